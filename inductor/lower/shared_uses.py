"""Stage "lower": whether the several users of a value all end up in one loop body.

Input: an FX node of the ATen graph with more than one user. Output: `uses_meet(node)`,
true when every user leads, through single-user elementwise ops of the node's own shape,
to one elementwise op: that op's body then reads the value once per path, each time at the
same index, so inlining it there twice repeats identical loads and arithmetic (which the
C++ and Triton compilers fold into one), while realizing it writes and reads back a buffer
of the whole shape.

Why: bilinear interpolation decomposes into `top + (bottom - top) * weight`, `top` itself
four gathered loads and a lerp. Realized on reuse (more than 4 loads), LRASPP's final
upsample to 1x21x224x224 wrote `top` channels-last and read it back transposed: 7.6 ms per
call against 1.1 ms with `top` inlined (docs/performance-notes.md, LRASPP).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.fx

from inductor.lower.registry import lowering_for
from inductor.symbolic_overlap import known

# How many elementwise ops a path from a user to the meeting op may have.
MEET_DEPTH = 6


def uses_meet(node: torch.fx.Node) -> bool:
    """Whether all users of `node` lead to one elementwise op that reads `node`'s value at
    its own index along every path (see the module docstring)."""
    shape = _shape(node)
    if shape is None or len(node.users) < 2:
        return False
    paths = []
    for user in node.users:
        path = _elementwise_path(user, shape)
        if not path:
            return False
        paths.append(path)
    return bool(set(paths[0]).intersection(*paths[1:]))


def _elementwise_path(start: torch.fx.Node, shape) -> list:
    """`start` and the ops after it, each the only user of the one before, while they are
    lowered elementwise ops producing `shape` (at most MEET_DEPTH of them)."""
    path = []
    current = start
    while _is_elementwise(current, shape) and len(path) < MEET_DEPTH:
        path.append(current)
        if len(current.users) != 1:
            break
        current = next(iter(current.users))
    return path


def _is_elementwise(node: torch.fx.Node, shape) -> bool:
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    if torch.Tag.pointwise not in node.target.tags or lowering_for(node.target) is None:
        return False
    return _same_shape(_shape(node), shape)


def _same_shape(first: Optional[tuple], second: Optional[tuple]) -> bool:
    """Whether two shapes are equal for every size the graph serves, asking no size question
    (`==` on symbolic sizes would add a guard the front end never made: a per-size compile)."""
    if first is None or second is None or len(first) != len(second):
        return False
    return all(known(a == b) for a, b in zip(first, second))


def _shape(node: torch.fx.Node) -> Optional[tuple]:
    value = node.meta.get("val")
    return tuple(value.shape) if isinstance(value, torch.Tensor) else None
