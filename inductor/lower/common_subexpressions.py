"""Stage "lower" (first step): identical ATen calls of a functional graph become one.

Input: a decomposed, functional ATen-level FX graph (`decompose.py`). Output: the same graph,
edited in place, where a call with the same op, arguments and keyword arguments as an earlier
one is replaced by the earlier one.

Why: models repeat work per layer that eager repeats too, and that the lowering would
otherwise generate once per copy. T5 expands and copies its position bias and mask for the
attention of each of its layers: six identical kernels writing 4 MB each per call, where
one suffices.

Left alone: random ops (each call draws new numbers), ops that mutate or have no users
(assertions), and calls whose value the graph returns, directly or through views: two
outputs must stay two tensors, as in eager.
"""
from __future__ import annotations

import torch

from inductor.lower.extern import VIEW_OPS


def eliminate_common_subexpressions(gm: torch.fx.GraphModule) -> int:
    """Replace repeated pure calls in `gm` by their first occurrence; returns how many were
    removed (the graph is recompiled when any was)."""
    returned = _returned_values(gm.graph)
    first: dict = {}
    replaced: dict = {}
    removed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not _is_pure(node):
            continue
        key = _key(node, replaced)
        if key is None:
            continue
        earlier = first.get(key)
        if earlier is None:
            first[key] = node
        elif node not in returned:
            node.replace_all_uses_with(earlier)
            replaced[node] = earlier
            gm.graph.erase_node(node)
            removed += 1
    if removed:
        gm.recompile()
    return removed


def _is_pure(node: torch.fx.Node) -> bool:
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or not node.users:
        return False
    if target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
        return False
    return all(argument.alias_info is None or not argument.alias_info.is_write
               for argument in target._schema.arguments)


def _key(node: torch.fx.Node, replaced: dict):
    """A hashable description of the call, or None where an argument is not hashable."""
    def canonical(value):
        if isinstance(value, torch.fx.Node):
            return ("node", replaced.get(value, value))
        if isinstance(value, (list, tuple)):
            return (type(value).__name__,) + tuple(canonical(item) for item in value)
        if isinstance(value, dict):
            return ("dict",) + tuple(sorted((name, canonical(item))
                                            for name, item in value.items()))
        if isinstance(value, float) and value != value:
            return ("nan",)
        return (type(value).__name__, value)
    try:
        key = (node.target, canonical(node.args), canonical(node.kwargs))
        hash(key)
    except TypeError:
        return None
    return key


def _returned_values(graph: torch.fx.Graph) -> set:
    """Nodes whose value the graph returns, directly or as the base of a returned view."""
    returned = set()
    pending = [value for value in graph.output_node().all_input_nodes]
    while pending:
        node = pending.pop()
        if node in returned:
            continue
        returned.add(node)
        packet = getattr(node.target, "overloadpacket", None)
        if node.op == "call_function" and packet in VIEW_OPS:
            pending.extend(node.all_input_nodes)
    return returned
