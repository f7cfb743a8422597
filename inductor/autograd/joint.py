"""Stage "trace" of training compilation (after "analyze", before "partition").

Input: a torch-level FX graph, its `GraphSignature`, example inputs and the global state to
trace under. Output: a functional, decomposed ATen FX graph:

- `trace_joint` -> `JointGraph`: placeholders `primals_*` (every input) then `tangents_*` (one
  per differentiable function output); outputs are the function outputs (see `signature`)
  followed by the gradient of every input that requires grad (inputs that get no gradient are
  listed in `JointGraph.grad_of_input`).
- `trace_inference` -> an FX graph from the inputs to the function outputs, no autograd.

Tracing uses `make_fx` on fake tensors over a function that runs the graph with ATen-level
functionalization on (mutations and views become functional ops; the new values of mutated
inputs become outputs) and calls `torch.autograd.grad` for the backward. The forward runs inside
the traced autocast state and the backward with autocast off, as eager's `loss.backward()`
outside an autocast region does. Random ops appear once, in the forward; the partitioner never
recomputes them, so the backward sees the forward's dropout masks.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Optional, Sequence

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

from inductor.autograd.decompositions import LstmAsGates
from inductor.autograd.global_state import GlobalState, autocast_off
from inductor.autograd.functional import (fake_mode, from_functional, functionalization,
                                          to_functional)
from inductor.autograd.signature import GraphSignature
from inductor.autograd.symbols import SymbolicInputs
from inductor.autograd.versions import SavedTensorLog, VersionPlan
from inductor.eager_run import version_of
from inductor.graph_calls import hookless


@dataclasses.dataclass
class JointGraph:
    """The joint forward+backward graph and how its placeholders and outputs are laid out."""

    module: torch.fx.GraphModule
    primal_count: int
    tangent_count: int
    function_output_count: int
    grad_of_input: list[Optional[int]]   # per input: index among gradient outputs, or None
    versions: VersionPlan = VersionPlan(())   # eager's saved tensors and their version checks
    inputs_reached: tuple = ()   # per function output: inputs its gradient reaches
    tangent_outputs: tuple = ()   # per tangent: the function output position it belongs to
    # function output positions per autograd node of a call (`output_groups`); one group of
    # every output where the trace did not say
    output_groups: tuple = ()
    # the groups whose traced eager history holds a node that saves tensors (`freeing_groups`)
    freeing_groups: tuple = ()


def _function_outputs(signature: GraphSignature, arguments: list, result: Any) -> list:
    """Pick the function outputs out of the arguments (mutated) and the graph's result."""
    flat = pytree.tree_leaves(result)
    picked = []
    for output in signature.function_outputs:
        if output.source == "mutated_input":
            picked.append(arguments[output.index])
        elif output.source == "output":
            picked.append(flat[output.index])
        else:
            base = flat[output.index]._base
            if base is None:
                raise AssertionError(f"output {output.index} lost its view base while tracing")
            picked.append(base)
    return picked


def _joint_function(gm: torch.fx.GraphModule, signature: GraphSignature, state: GlobalState):
    mutated = set(signature.mutated_inputs)
    differentiable = signature.differentiable_inputs

    def joint(primals: list, tangents: list):
        with functionalization():
            leaves = [to_functional(primal) for primal in primals]
            for index in differentiable:
                leaves[index].requires_grad_(True)
            # An input that requires grad and is updated in place is a non-leaf in eager: give
            # the graph a copy so that autograd allows the update, and differentiate the leaf.
            with torch.enable_grad():
                arguments = [leaf.clone() if index in mutated and index in differentiable
                             else leaf for index, leaf in enumerate(leaves)]
            tangents = [to_functional(tangent) for tangent in tangents]
            starts = [version_of(argument) for argument in arguments]
            # The caller's grad mode, which the graph's own regions switch. The log records
            # what eager's autograd saves; the backward below checks no versions (eager's
            # checks are made at run time, `versions.check`).
            log = SavedTensorLog(gm)
            with torch.set_grad_enabled(state.grad_enabled), state.autocast_context():
                result = log.run_graph(arguments)
            outputs = _function_outputs(signature, arguments, result)
            facts = log.describe_forward(arguments, outputs, starts)
            wanted = [output for output, info in zip(outputs, signature.function_outputs)
                      if info.differentiable]
            with autocast_off(state.autocast):
                grads = torch.autograd.grad(wanted, [leaves[i] for i in differentiable],
                                            tangents, allow_unused=True)
            joint.grad_present = [grad is not None for grad in grads]
            joint.versions = facts.plan([position for position, info
                                         in enumerate(signature.function_outputs)
                                         if info.differentiable])
            joint.inputs_reached = facts.inputs_reached(leaves, len(outputs))
            boundary = {id(node) for node in log.start_nodes if node is not None}
            joint.output_groups = output_groups(
                facts.reachable, boundary, joint.inputs_reached,
                [info.differentiable for info in signature.function_outputs])
            joint.freeing_groups = freeing_groups(joint.output_groups, facts.reachable,
                                                  boundary)
            return ([from_functional(output) for output in outputs],
                    [from_functional(grad) for grad in grads if grad is not None])
    return joint


def _fake_arguments(mode, inputs: Sequence[Any]) -> list:
    return [mode.from_tensor(value.detach()) if isinstance(value, torch.Tensor) else value
            for value in inputs]


def _tangents(mode, signature: GraphSignature) -> list[torch.Tensor]:
    with mode:
        return [torch.empty(output.meta.size, dtype=output.meta.dtype,
                            device=output.meta.device)
                for output in signature.function_outputs if output.differentiable]


def _trace_mode(inputs: Sequence[Any], symbolic: Optional[SymbolicInputs]):
    """(a context entering the fake mode to trace in, the primals to trace with): a fresh
    mode and fakes of `inputs`, or for symbolic sizes the graph's mode and fakes."""
    if symbolic is not None:
        return symbolic.tracing(), symbolic.fakes(inputs), symbolic.mode
    mode = fake_mode()
    return mode, _fake_arguments(mode, inputs), mode


def trace_joint(gm: torch.fx.GraphModule, signature: GraphSignature, inputs: Sequence[Any],
                state: GlobalState, decompositions: dict,
                symbolic: Optional[SymbolicInputs] = None) -> JointGraph:
    """Trace forward and backward of `gm` into one functional ATen graph (see module doc).
    With `symbolic`, in the graph's fake mode: the joint graph's sizes are symbolic (its
    `SymInt` values are nodes: `sym_size`, arithmetic on them), and every assumption the
    trace makes about them is a guard of the graph's ShapeEnv."""
    context, primals, mode = _trace_mode(inputs, symbolic)
    tangents = _tangents(mode, signature)
    joint = _joint_function(gm, signature, state)
    with context, LstmAsGates():
        traced = make_fx(joint, decomposition_table=decompositions)(primals, tangents)
    output_node = next(node for node in traced.graph.nodes if node.op == "output")
    flat_outputs = list(output_node.args[0])
    grad_of_input: list[Optional[int]] = [None] * len(inputs)
    position = 0
    for index, present in zip(signature.differentiable_inputs, joint.grad_present):
        if present:
            grad_of_input[index] = position
            position += 1
    _set_flat_outputs(traced, flat_outputs)
    function_outputs = len(signature.function_outputs)
    return JointGraph(traced, len(inputs), len(tangents), function_outputs, grad_of_input,
                      joint.versions, joint.inputs_reached,
                      tuple(position for position, info
                            in enumerate(signature.function_outputs) if info.differentiable),
                      joint.output_groups, joint.freeing_groups)


def output_groups(reachable: dict, boundary: set, reached: Sequence[frozenset],
                  differentiable: Sequence[bool]) -> tuple:
    """The function outputs grouped by the autograd node a call gives them (positions,
    ascending; groups ordered by their first). Eager's autograd gives each output the
    history it depends on: a backward from it runs only the nodes it reaches, and frees
    only those. One node for every output linked the histories of unrelated ones: a backward
    from one ran (with no gradient) the history of inputs only another reaches, and raised
    "Trying to backward through the graph a second time" where that history was freed by an
    earlier backward (an input's new value, `avg[1:2] = w.amax(...)`, next to `w * t`:
    program fuzzer P29), and called the hooks of inputs it does not reach. Two outputs share
    a node here if their gradients reach the same inputs (`reached`, per output) and their
    traced histories share a node inside the graph (`reachable`: per output, {id: node};
    the inputs' leaves and the nodes in `boundary`, stand-ins for the caller's history, do
    not count, nor nodes that save no tensor: eager's backward through one output frees
    nothing there, and a backward through the other may run them again). Outputs with no
    gradient, or no traced history, join the first group."""
    parent = list(range(len(differentiable)))

    def root(position: int) -> int:
        while parent[position] != position:
            parent[position] = parent[parent[position]]
            position = parent[position]
        return position

    owner: dict = {}
    traced = [position for position, flag in enumerate(differentiable)
              if flag and reachable.get(position)]
    for position in traced:
        for key, node in reachable[position].items():
            if key in boundary or hasattr(node, "variable") or not _saves(node):
                continue   # the caller's history, an input's leaf, or nothing to free
            other = root(owner.setdefault(key, position))
            if other != root(position):
                parent[root(position)] = other
    groups: dict = {}
    for position in traced:
        groups.setdefault((root(position), reached[position]), []).append(position)
    ordered = sorted(groups.values())
    if not ordered:
        return (tuple(range(len(differentiable))),)
    rest = sorted(set(range(len(differentiable))) - set(traced))
    ordered[0] = sorted(ordered[0] + rest)
    return tuple(tuple(group) for group in ordered)


def freeing_groups(groups: Sequence[tuple], reachable: dict, boundary: set) -> tuple:
    """The groups of `groups` whose outputs' traced eager histories (`reachable`, as in
    `output_groups`) hold a node that saves tensors: eager's backward through them frees
    those, and a later backward reaching them raises "Trying to backward through the graph a
    second time" even where the compiled backward keeps nothing (program fuzzer seed 52236:
    `avg.mul_(0.9)` saves its wrapped-number factor; a second call's `avg[:2] = w` keeps the
    first call's history as an edge)."""
    return tuple(group for group in groups if any(
        _holds_saved(node) for position in group
        for key, node in reachable.get(position, {}).items()
        if key not in boundary and not hasattr(node, "variable")))


def _holds_saved(node: Any) -> bool:
    """Whether an autograd node of the traced history saved a tensor (one a backward frees): a
    generated node (`MulBackward0`) whose `_saved_*` for one of its `_raw_saved_*` is a tensor
    (or a list of them), or raises as freed (the joint trace's own backward ran). Unlike
    `_saves` this never guesses yes: a node it cannot read (`CopySlices`, a custom Function's)
    counts as holding none, so that a second backward eager allows is never refused."""
    kind = type(node)
    if not re.search(r"Backward\d+$", kind.__name__):
        return False
    for name in dir(kind):
        if name.startswith("_raw_saved_"):
            try:
                value = getattr(node, "_saved_" + name[len("_raw_saved_"):], None)
            except RuntimeError:   # saved, and freed already by the trace's own backward
                return True
            if isinstance(value, torch.Tensor) or (isinstance(value, (list, tuple)) and any(
                    isinstance(item, torch.Tensor) for item in value)):
                return True
    return False


def _inference_function(gm: torch.fx.GraphModule, signature: GraphSignature,
                        state: GlobalState):
    def forward(primals: list):
        with functionalization():
            arguments = [to_functional(primal) for primal in primals]
            with torch.no_grad(), state.autocast_context():
                result = hookless(gm)(*arguments)
            outputs = _function_outputs(signature, arguments, result)
            return [from_functional(output) for output in outputs]
    return forward


def trace_inference(gm: torch.fx.GraphModule, signature: GraphSignature,
                    inputs: Sequence[Any], state: GlobalState,
                    decompositions: dict,
                    symbolic: Optional[SymbolicInputs] = None) -> torch.fx.GraphModule:
    """Trace `gm` without autograd into a functional ATen graph of the function outputs
    (`symbolic`: as for `trace_joint`)."""
    context, primals, _ = _trace_mode(inputs, symbolic)
    with context:
        traced = make_fx(_inference_function(gm, signature, state),
                         decomposition_table=decompositions)(primals)
    output_node = next(node for node in traced.graph.nodes if node.op == "output")
    _set_flat_outputs(traced, list(output_node.args[0]))
    return traced


def _set_flat_outputs(traced: torch.fx.GraphModule, outputs: list) -> None:
    """Replace the pytree-structured output and input handling by flat positional lists."""
    graph = traced.graph
    output_node = next(node for node in graph.nodes if node.op == "output")
    output_node.args = (tuple(outputs),)
    graph.set_codegen(torch.fx.graph.CodeGen())
    graph.eliminate_dead_code()
    traced.recompile()


_SAVING: dict = {}   # autograd node type -> whether it may save tensors (`_saves`)


def _saves(node: Any) -> bool:
    """Whether an autograd node may save tensors (freed by a backward through it): a
    generated node (`SinBackward0`) declares what it saves (`_raw_saved_*`); any other
    (`CopySlices`, which frees what the node it wraps saved) is taken to."""
    kind = type(node)
    saves = _SAVING.get(kind)
    if saves is None:
        saves = _SAVING[kind] = not re.search(r"Backward\d+$", kind.__name__) or any(
            name.startswith("_raw_saved_") for name in dir(kind))
    return saves
