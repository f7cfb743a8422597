"""The graph fuzzer's unread-value pass: values a graph computes and never reads.

Input: a torch-level graph module (after `check._live_only`) and the call's inputs. Output:
the module with each such value replaced by an uninitialised tensor of its geometry
(`empty_strided`), so that running it tells whether eager raises anywhere but there.

An error eager raises only while computing values nobody reads (an integer division by zero)
is not the compiler's to keep: the compiled graph never computes them, as torch.compile's
inductor does not (`a1.expand_as(a1 % a2)` with a zero in `a2`: eager raises
ZeroDivisionError, both compilers return). `_live_only` drops nodes nothing uses; this pass
also drops values used only for their geometry (`x.expand_as(v)`, `zeros_like(v)`),
overwritten whole before any read (`v.fill_(1)`, `v.zero_()`, `v.copy_(w)`), or read only
through views of no element (`v.narrow(1, 1, 0)`): graph fuzzer seeds 8290, 9455, 15040.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

# Per op name, the argument positions it reads only the geometry (shape, dtype, device) of.
GEOMETRY_ONLY = {
    "expand_as": (1,), "view_as": (1,), "reshape_as": (1,), "type_as": (1,),
    "zeros_like": (0,), "ones_like": (0,), "empty_like": (0,), "full_like": (0,),
    "rand_like": (0,), "randn_like": (0,), "randint_like": (0,), "new_zeros": (0,),
    "new_ones": (0,), "new_empty": (0,), "new_full": (0,)}
# In-place ops that write every element of their first argument and read none of them.
OVERWRITES = ("fill_", "zero_", "copy_")


def without_unread_values(module: torch.fx.GraphModule, inputs: list,
                          name, aliasing: set) -> Optional[torch.fx.GraphModule]:
    """`module` with unread values replaced (see the module docstring); None where the
    geometry of its values cannot be found (fake tensors refuse the graph). `name`: a node's
    op name (`check._name`); `aliasing`: the names of ops whose result views their input."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    try:
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        fakes = [mode.from_tensor(value) if isinstance(value, torch.Tensor) else value
                 for value in inputs]
        ShapeProp(module, fake_mode=mode).propagate(*fakes)
    except Exception:  # noqa: BLE001 (no geometry: the syntactic pass alone decides)
        return None
    for node in list(module.graph.nodes):
        meta = node.meta.get("tensor_meta")
        if node.op not in ("call_function", "call_method") or node.users == {} or \
                not hasattr(meta, "shape") or not all(
                    _reads_nothing(node, user, name, aliasing) for user in node.users):
            continue
        with module.graph.inserting_before(node):
            empty = module.graph.call_function(
                torch.empty_strided, (tuple(meta.shape), tuple(meta.stride)),
                {"dtype": meta.dtype, "device": _device(node)})
        node.replace_all_uses_with(empty)
    module.recompile()
    return module


def _reads_nothing(node, user, name, aliasing: set) -> bool:
    """Whether `user` reads none of `node`'s element values."""
    if user.op not in ("call_function", "call_method"):
        return False
    op = name(user)
    positions = [place for place, argument in enumerate(user.args) if argument is node]
    if any(value is node for value in user.kwargs.values()):
        return False
    if op in GEOMETRY_ONLY:
        return all(place in GEOMETRY_ONLY[op] for place in positions)
    if op in OVERWRITES:
        return positions == [0]
    meta = user.meta.get("tensor_meta")
    return op in aliasing and hasattr(meta, "shape") and _count(meta.shape) == 0


def _count(shape) -> int:
    total = 1
    for extent in shape:
        total *= int(extent)
    return total


def _device(node) -> torch.device:
    value = node.meta.get("val")
    return value.device if isinstance(value, torch.Tensor) else torch.device("cpu")
