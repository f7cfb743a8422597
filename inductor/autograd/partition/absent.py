"""Backward graphs for calls where some outputs' gradients never arrive (stage "partition").

Input: a backward graph (saved values, saved primals, tangents -> gradients) and the positions
of the tangents that do not arrive. Output: a backward graph without those tangents'
placeholders, and without every node only they feed.

Eager's backward never runs a node that no arriving gradient reaches, and sums only the
gradients that arrive. A compiled backward that takes zeros for the missing ones computes
those paths anyway: it reads saved values eager never reads (a saved input the caller changed
since raised framejit's `ModifiedSavedInput`; a saved output the graph itself changed after
saving it fed `amax`'s backward 0 / 0) and multiplies their zeros by what the forward made
(`std` of one element: 0 * inf), giving NaN gradients where eager's are finite (program fuzzer
P23, P24). Here a node whose tangent-dependent inputs are all absent is absent too (a backward
is linear in its tangents, each node in the ones it takes); a node with present and absent
ones gets zeros for the absent ones. A gradient output left absent becomes zeros, as before
(the runtime gives None to inputs no arriving gradient reaches). `without_unused_saved` then
drops the saved values such a backward no longer reads: the autograd node of a group of outputs
(`joint.output_groups`) keeps alive only what its backward reads.
"""
from __future__ import annotations

import operator
from typing import Optional

import torch
import torch.fx

aten = torch.ops.aten

# Ops that read only the shape of their tensor inputs (or make values of their own): their
# results depend on no tangent's values; given an absent one, they read zeros of its shape.
_NOT_LINEAR = frozenset({
    "ones_like", "full_like", "empty_like", "new_ones", "new_full", "new_empty",
    "new_empty_strided", "rand_like", "randn_like", "randint_like", "scalar_tensor",
    "sym_size", "sym_numel", "sym_stride",
})


class _Unsupported(Exception):
    """The graph holds something this pass cannot rebuild (a symbolic size no node of the
    pruned graph has)."""


def without_tangents(backward: torch.fx.GraphModule, saved_count: int,
                     absent: frozenset) -> Optional[torch.fx.GraphModule]:
    """`backward` for calls where the tangents at positions `absent` (among the tangents) do
    not arrive: it takes the saved values and saved primals, then the present tangents (in
    order), and returns every gradient `backward` returns. None if it cannot be built (the
    caller then passes zeros for them)."""
    try:
        return _build(backward, saved_count, absent)
    except _Unsupported:
        return None


def _build(backward: torch.fx.GraphModule, saved_count: int,
           absent: frozenset) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    environment: dict = {}
    gone: set = set()        # absent nodes of `backward`
    dependent: set = set()   # nodes of `backward` computed from a tangent
    zeros: dict = {}         # absent node -> its zeros in `graph`

    def value(node: torch.fx.Node) -> torch.fx.Node:
        if node in gone:
            if node not in zeros:
                zeros[node] = _zeros(graph, node, environment.values())
            return zeros[node]
        return environment[node]

    placeholders = 0
    for node in backward.graph.nodes:
        if node.op == "placeholder":
            position = placeholders - saved_count
            placeholders += 1
            if position >= 0:
                dependent.add(node)
                if position in absent:
                    gone.add(node)
                    continue
            environment[node] = graph.placeholder(node.name)
            environment[node].meta = dict(node.meta)
        elif node.op == "output":
            graph.output(tuple(value(output) if isinstance(output, torch.fx.Node) else output
                               for output in node.args[0]))
        elif node.op == "call_function":
            inputs = node.all_input_nodes
            if any(argument in dependent for argument in inputs) and not _shape_only(node):
                dependent.add(node)
            if any(argument in gone for argument in inputs) and _vanishes(
                    node, [argument for argument in inputs if argument in dependent], gone):
                gone.add(node)
                continue
            environment[node] = graph.node_copy(node, value)
        else:
            raise _Unsupported(node.op)
    graph.eliminate_dead_code()
    graph.lint()
    return torch.fx.GraphModule(backward, graph)


def _shape_only(node: torch.fx.Node) -> bool:
    return (isinstance(node.target, torch._ops.OpOverload)
            and node.target.__name__.split(".")[0] in _NOT_LINEAR)


def _vanishes(node: torch.fx.Node, dependent_inputs: list, gone: set) -> bool:
    """Whether `node` is absent: all its tangent-dependent inputs are, and it is linear in
    them (a gradient, not a shape or a mask read off one)."""
    if not all(argument in gone for argument in dependent_inputs):
        return False
    if node.target is operator.getitem:
        return True
    if not isinstance(node.target, torch._ops.OpOverload):
        return False
    if _shape_only(node):
        return False
    result = node.meta.get("val")
    results = result if isinstance(result, (tuple, list)) else [result]
    return all(isinstance(item, torch.Tensor) and (item.is_floating_point() or item.is_complex())
               for item in results if item is not None)


def _zeros(graph: torch.fx.Graph, node: torch.fx.Node, available=()) -> torch.fx.Node:
    """A node of `graph` making zeros shaped as `node`'s value (contiguous). A symbolic size
    is read off a node of `graph` (`available`) that has it: a size node, or a tensor one
    (`sym_size`)."""
    fake = node.meta.get("val")
    if not isinstance(fake, torch.Tensor):
        raise _Unsupported(node.name)
    sizes = [size if isinstance(size, int) else _size_node(graph, size, available)
             for size in fake.shape]
    zeros = graph.call_function(aten.full.default, (sizes, 0), {
        "dtype": fake.dtype, "layout": torch.strided, "device": fake.device,
        "pin_memory": False})
    zeros.meta["val"] = torch.zeros_like(fake, memory_format=torch.contiguous_format)
    return zeros


def _size_node(graph: torch.fx.Graph, size: torch.SymInt, available) -> torch.fx.Node:
    """A node of `graph` whose value is `size` (the same expression of the same symbols)."""
    wanted = size.node.expr
    for candidate in list(available):
        value = candidate.meta.get("val") if isinstance(candidate, torch.fx.Node) else None
        if isinstance(value, torch.SymInt) and value.node.expr == wanted:
            return candidate
        if isinstance(value, torch.Tensor):
            for dim, extent in enumerate(value.shape):
                if isinstance(extent, torch.SymInt) and extent.node.expr == wanted:
                    read = graph.call_function(aten.sym_size.int, (candidate, dim))
                    read.meta["val"] = extent
                    return read
    raise _Unsupported(f"no node has the size {wanted}")


def without_unused_saved(backward: torch.fx.GraphModule,
                         saved_count: int) -> tuple[torch.fx.GraphModule, tuple]:
    """`backward` taking only the saved values it reads, and their positions among the
    `saved_count` it took (a backward for some outputs' gradients reads fewer: the autograd
    node of those outputs keeps only these alive)."""
    placeholders = [node for node in backward.graph.nodes
                    if node.op == "placeholder"][:saved_count]
    kept = tuple(index for index, node in enumerate(placeholders) if node.users)
    if len(kept) == len(placeholders):
        return backward, kept
    graph = torch.fx.Graph()
    copies: dict = {}
    graph.output(graph.graph_copy(backward.graph, copies))
    for node in placeholders:
        if not node.users:
            graph.erase_node(copies[node])
    graph.lint()
    return torch.fx.GraphModule(backward, graph), kept
