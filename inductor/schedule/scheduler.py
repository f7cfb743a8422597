"""Stage "schedule": a `LoopGraph` becomes a `GraphPlan`.

Input: the loop IR of one graph. Output: the kernels and library calls to run, in order, with
the buffers to allocate and where each one dies. Steps: one scheduler node per buffer,
dependencies (producers, and for in-place updates of inputs every earlier reader), removal of
buffers nobody reads, fusion, kernel plans, lifetimes.
"""
from __future__ import annotations

from inductor.ir.nodes import MultiOutput, ReinterpretView
from inductor.schedule.fusion import FusedGroup, fuse
from inductor.schedule.in_place import in_place_outputs
from inductor.schedule.nodes import SchedulerNode
from inductor.schedule.order import mutated_input, predecessors, program_order
from inductor.schedule.plans import (ExternStep, GraphPlan, KernelPlan, build_kernel,
                                     build_scan, build_scatter)


def _output_names(outputs) -> set:
    names = set()
    for value in outputs:
        if isinstance(value, ReinterpretView):
            names.add(value.data.get_name())
        elif hasattr(value, "get_name"):
            names.add(value.get_name())
    return names


def _live_nodes(graph, outputs: set) -> list[SchedulerNode]:
    """Scheduler nodes for every buffer something needs (dead computed buffers dropped), in
    program order (`order.program_order`: updates of inputs after every reader of the old
    value)."""
    nodes = [SchedulerNode(buffer) for buffer in graph.buffers]
    needed = set(outputs)
    live = []
    for node in reversed(nodes):
        keep = node.name in needed or node.is_extern() or mutated_input(node)
        if isinstance(node.buffer, MultiOutput) and node.name not in needed:
            keep = False
        if keep:
            live.append(node)
            needed |= node.read_names()
    live.reverse()
    return program_order(live, graph)


def _dependencies(nodes: list[SchedulerNode]) -> tuple[dict, dict]:
    """(node -> nodes that must run first, buffer name -> reading nodes)."""
    readers: dict = {}
    for node in nodes:
        for name in node.read_names():
            readers.setdefault(name, []).append(node)
    before = predecessors(nodes)
    return {node: sorted(before[node], key=lambda other: other.order) for node in nodes}, \
        readers


def schedule(graph) -> GraphPlan:
    """Fuse the loop IR of `graph` into kernel plans (see the module docstring)."""
    outputs = _output_names(graph.outputs)
    nodes = _live_nodes(graph, outputs)
    dependencies, readers = _dependencies(nodes)
    steps = []
    for step in fuse(nodes, dependencies):
        if isinstance(step, FusedGroup):
            steps.append(build_kernel(step, f"kernel{len(steps)}", readers, outputs))
        elif step.is_scatter():
            steps.append(build_scatter(step, f"kernel{len(steps)}"))
        elif step.is_scan():
            steps.append(build_scan(step, f"kernel{len(steps)}"))
        else:
            steps.append(ExternStep(step))
    buffers = {buffer.get_name(): buffer for buffer in
               graph.inputs + graph.constants + graph.buffers}
    allocated, frees = _lifetimes(steps, graph, outputs)
    plan = GraphPlan(steps, graph.inputs, graph.outputs, buffers, allocated, frees)
    plan.in_place = in_place_outputs(plan)
    return plan


def _step_reads(step) -> set:
    if isinstance(step, ExternStep):
        return step.node.read_names()
    return set(step.loads)


def _step_writes(step) -> list:
    if isinstance(step, ExternStep):
        return [step.name]
    return step.stores


def _lifetimes(steps, graph, outputs: set):
    """Buffers the wrapper allocates (kernel stores) and the step after which each dies."""
    inputs = {buffer.get_name() for buffer in graph.inputs + graph.constants}
    allocated, last_use = [], {}
    for position, step in enumerate(steps):
        for name in _step_writes(step):
            if isinstance(step, KernelPlan) and name not in inputs and name not in allocated:
                allocated.append(name)
            last_use.setdefault(name, position)
        for name in _step_reads(step):
            last_use[name] = position
    frees: dict = {}
    for name, position in last_use.items():
        if name not in inputs and name not in outputs:
            frees.setdefault(position, []).append(name)
    return allocated, frees
