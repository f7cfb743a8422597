"""Stage "partition" of training compilation (after "trace", before "run").

Input: a `JointGraph` (functional ATen forward+backward). Output: a `Partition`: a forward graph
(primals -> function outputs + saved values) and a backward graph (saved values + tangents ->
gradients), with the saved values chosen by a minimum cut.

The cut: every node the backward needs that does not depend on a tangent is either computed in
the forward and saved, or recomputed in the backward from other saved values. Each such node is
split into `in -> out` with the bytes saving it keeps alive as capacity; its uses are infinite
edges; primals and forward nodes that must not be recomputed hang off the source, nodes of the
backward off the sink. A minimum cut is a cheapest set of values to save such that everything
else the backward needs can be recomputed from them (see `policy` for what may be recomputed).

With symbolic sizes, sizes are values like any other: a `SymInt` node the backward needs is
saved (the forward returns it, a Python int at run time) or recomputed from saved tensors'
sizes, whichever the cut finds cheaper; costs are taken at the traced example's sizes.
"""
from __future__ import annotations

import dataclasses

import torch
import torch.fx

from inductor.autograd.joint import JointGraph
from inductor.autograd.partition.mincut import FlowNetwork
from inductor.autograd.partition.policy import (INFINITE, UNWATCHED_COST, PartitionPolicy,
                                                is_random, is_symbol_node, is_tensor_node,
                                                may_recompute, policy, save_cost,
                                                storage_bytes, storage_key, symbol_cost,
                                                value_of)
from inductor.autograd.partition.split import build_backward, build_forward

__all__ = ["Partition", "partition", "PartitionPolicy", "policy"]


@dataclasses.dataclass
class Partition:
    """Forward and backward graphs. The forward returns the function outputs, then the saved
    values it computed; the backward takes those, then the saved primals (`saved_primals`:
    indices of inputs kept for the backward as they are), then the tangents, and returns one
    gradient per input listed in `grad_of_input`."""

    forward: torch.fx.GraphModule
    backward: torch.fx.GraphModule
    function_output_count: int
    saved_computed_count: int
    saved_primals: list[int]
    tangent_count: int
    grad_of_input: list
    saved_bytes: int
    reads_inputs: list[int] = dataclasses.field(default_factory=list)   # saved or viewed
    # per saved value (computed, then primals): the input whose memory it is, or None
    saved_reads: list = dataclasses.field(default_factory=list)
    # per saved value: the function output whose memory it is (and no input's), or None
    saved_outputs: list = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        """One line for logs."""
        return (f"forward {_count(self.forward)} ops, backward {_count(self.backward)} ops, "
                f"saved {self.saved_computed_count} computed + {len(self.saved_primals)} "
                f"inputs ({self.saved_bytes} bytes)")


def _count(module: torch.fx.GraphModule) -> int:
    return sum(node.op == "call_function" for node in module.graph.nodes)


def _classify(graph: torch.fx.Graph, function_output_count: int):
    """Nodes depending on a tangent (backward), and the forward outputs."""
    nodes = list(graph.nodes)
    output_node = nodes[-1]
    outputs = list(output_node.args[0])
    tangent_dependent: set[torch.fx.Node] = set()
    for node in nodes:
        if node.op == "placeholder" and node.name.startswith("tangents"):
            tangent_dependent.add(node)
        elif node.op == "call_function" and any(
                argument in tangent_dependent for argument in node.all_input_nodes):
            tangent_dependent.add(node)
    forward_outputs = outputs[:function_output_count]
    gradient_outputs = outputs[function_output_count:]
    return nodes, tangent_dependent, forward_outputs, gradient_outputs


def _ancestors(roots) -> set[torch.fx.Node]:
    seen: set[torch.fx.Node] = set()
    stack = [root for root in roots if isinstance(root, torch.fx.Node)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(node.all_input_nodes)
    return seen


def choose_saved(joint: JointGraph, mutated_inputs: list[int],
                 settings: PartitionPolicy = policy) -> list[torch.fx.Node]:
    """The nodes whose values the forward saves for the backward (a minimum cut)."""
    nodes, backward, forward_outputs, gradient_outputs = _classify(
        joint.module.graph, joint.function_output_count)
    needed_by_forward = _ancestors(forward_outputs)
    needed_by_backward = _ancestors(gradient_outputs)
    placeholders = [node for node in nodes if node.op == "placeholder"]
    primals = placeholders[:joint.primal_count]
    primal_storages = {storage_key(value_of(node)) for node in primals if is_tensor_node(node)}
    mutated_storages = {storage_key(value_of(primals[index])) for index in mutated_inputs}
    watched = joint.versions.watched_inputs
    storages = [storage_key(value_of(node)) if is_tensor_node(node) else None
                for node in primals]
    unwatched_storages = frozenset(storages[i] for i in range(len(primals))
                                   if i not in watched) - mutated_storages - {
        storages[i] for i in watched} - {None}
    unwatched_storages |= _unwatched_outputs(joint, forward_outputs, primal_storages)
    eager_reads = _eager_reads(joint, storages)
    uses = _gradient_uses(joint, nodes, backward, needed_by_backward)
    network = FlowNetwork()
    unsafe_nodes = set()
    for node in nodes:
        if node.op == "output" or node not in needed_by_backward:
            continue
        if node in backward:
            network.add_edge((node, "in"), "sink", INFINITE)
            continue
        if node.op == "placeholder" or is_random(node) or (
                node in needed_by_forward and not may_recompute(node, settings)):
            network.add_edge("source", (node, "in"), INFINITE)
        capacity = (save_cost(node, primal_storages, mutated_storages, unwatched_storages)
                    if is_tensor_node(node) else symbol_cost() if is_symbol_node(node)
                    else INFINITE)
        network.add_edge((node, "in"), (node, "out"), capacity)
        read = eager_reads.get(storage_key(value_of(node))) if is_tensor_node(node) else None
        unsafe = [user for user in node.users if user in needed_by_backward
                  and read is not None and uses is not None and not uses[user] <= read]
        if unsafe:   # an input's memory read for gradients eager reads it for no more
            # cutting this edge saves the node for those users: it costs its saving too
            network.add_edge((node, "in"), (node, "unsafe"),
                             min(INFINITE, capacity + UNWATCHED_COST))
            unsafe_nodes.add(node)
        for user in node.users:
            if user in needed_by_backward:
                network.add_edge((node, "unsafe" if user in unsafe else "out"), (user, "in"),
                                 INFINITE)
    network.vertex("source")
    network.vertex("sink")
    value, source_side = network.minimum_cut("source", "sink")
    if value >= INFINITE:
        raise AssertionError("no finite cut: the backward needs a forward value that cannot be "
                             "saved or recomputed")
    return [node for node in nodes if (node, "in") in source_side and node not in backward
            and ((node, "out") not in source_side
                 or (node in unsafe_nodes and (node, "unsafe") not in source_side))]


def _unwatched_outputs(joint: JointGraph, forward_outputs: list,
                       primal_storages: set) -> frozenset:
    """Storages of function outputs eager's autograd does not save: the caller may write
    them before `backward()`, which eager allows, so they are saved only where nothing else
    will do (`t1 @ x.T` saves `x`, not `t1`; saving the returned `t1` to recompute the
    product raised `ModifiedSavedInput` after `t1[1:2] = ...`: program fuzzer seed 20036)."""
    watched = joint.versions.watched_outputs
    keys = [storage_key(value_of(node)) if is_tensor_node(node) else None
            for node in forward_outputs]
    kept = {key for position, key in enumerate(keys) if position in watched}
    return frozenset(keys) - kept - primal_storages - {None}


def _eager_reads(joint: JointGraph, storages: list) -> dict:
    """Per storage of an input eager's autograd saves: the function outputs whose gradients
    make eager's backward read it (`Watch.reached_by`)."""
    reads: dict = {}
    for watch in joint.versions.watches:
        kind, index = watch.root
        if kind == "input" and storages[index] is not None:
            reads[storages[index]] = reads.get(storages[index], frozenset()) | watch.reached_by
    return reads


def _gradient_uses(joint: JointGraph, nodes: list, backward: set,
                   needed_by_backward: set) -> dict | None:
    """Per node the backward needs: the function outputs whose gradients read its value
    (those of the tangents a backward node depends on; for a forward value, its users'),
    so that the backward for calls where some gradients do not arrive (`absent`) reads no
    input eager's would not read: an input eager saves for one output's gradient (`mm`'s)
    must not be saved to recompute a value another output's gradient reads (`sum`'s, which
    eager saves itself: program fuzzer seeds 1144, 2459). None when the joint does not say
    which output each tangent belongs to."""
    placeholders = [node for node in nodes if node.op == "placeholder"]
    tangents = placeholders[joint.primal_count:]
    if len(joint.tangent_outputs) != len(tangents):
        return None
    uses: dict = {node: frozenset({position})
                  for node, position in zip(tangents, joint.tangent_outputs)}
    for node in nodes:
        if node in backward and node not in uses:
            uses[node] = frozenset().union(*(uses.get(argument, frozenset())
                                             for argument in node.all_input_nodes
                                             if argument in backward))
    for node in reversed(nodes):
        if node in needed_by_backward and node not in backward:
            uses[node] = frozenset().union(*(uses.get(user, frozenset()) for user in node.users
                                             if user in needed_by_backward))
    return uses


def partition(joint: JointGraph, mutated_inputs: list[int],
              settings: PartitionPolicy = policy) -> Partition:
    """Split `joint` into forward and backward graphs around a minimum set of saved values."""
    saved = choose_saved(joint, mutated_inputs, settings)
    graph = joint.module.graph
    primals = [node for node in graph.nodes if node.op == "placeholder"][:joint.primal_count]
    primal_index = {node: index for index, node in enumerate(primals)}
    saved_primals = [primal_index[node] for node in saved if node in primal_index]
    saved_computed = [node for node in saved if node not in primal_index]
    forward = build_forward(joint, saved_computed)
    backward = build_backward(joint, saved_computed, [primals[i] for i in saved_primals])
    saved_bytes = sum(storage_bytes(value_of(node)) for node in saved_computed
                      if is_tensor_node(node))
    input_of_storage = {storage_key(value_of(node)): index for index, node in enumerate(primals)
                        if is_tensor_node(node)}
    saved_reads = [input_of_storage.get(storage_key(value_of(node)))
                   if is_tensor_node(node) else None for node in saved_computed]
    saved_reads += [index if is_tensor_node(primals[index]) else None   # (a size: no memory)
                    for index in saved_primals]
    reads_inputs = sorted({index for index in saved_reads if index is not None})
    return Partition(forward, backward, joint.function_output_count, len(saved_computed),
                     saved_primals, joint.tangent_count, joint.grad_of_input, saved_bytes,
                     reads_inputs, saved_reads,
                     _saved_outputs(joint, saved_computed, saved_reads))


def _saved_outputs(joint: JointGraph, saved_computed: list, saved_reads: list) -> list:
    """Per saved value: the position of the function output whose memory it is (the caller
    can write it before `backward()`), None for inputs' memory and values of their own."""
    output_node = next(node for node in reversed(joint.module.graph.nodes)
                       if node.op == "output")
    position_of: dict = {}
    for position, node in enumerate(output_node.args[0][:joint.function_output_count]):
        if isinstance(node, torch.fx.Node) and is_tensor_node(node):
            position_of.setdefault(storage_key(value_of(node)), position)
    saved_outputs = [position_of.get(storage_key(value_of(node))) if is_tensor_node(node)
                     else None for node in saved_computed]
    saved_outputs += [None] * (len(saved_reads) - len(saved_computed))
    return [None if read is not None else position
            for read, position in zip(saved_reads, saved_outputs)]
