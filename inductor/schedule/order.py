"""Program order: the order the scheduler visits buffers in, honouring in-place updates.

Input: the live scheduler nodes of one graph (the loop IR's buffers, in lowering order).
Output: the same nodes (plus the temporaries below) in an order where every producer runs
before its readers and every in-place update of a graph input runs after every reader of the
input's old value.

A functional ATen graph reads inputs only as they were on entry: the new value of a mutated
input exists only as the source of its trailing `copy_`, which the lowering turns into a loop
writing into the input's memory (a `ComputedBuffer` with `mutated_input`). So the write into
input X must come after every other node that reads X, including the updates of other inputs
(`x.add_(1); s.add_(x)`: the update of `s` reads the old `x` and must run before `x` is
written, or the increment of `x` counts twice). Two cases need the new value in memory of its
own first, which `separate` arranges (a temporary buffer computing the value, then a copy
into the input):

- the update reads its own input at other elements than the one it writes (`x[1:] = 2 *
  x[:-1]` functionalized reads `x[i - 1]` while writing `x[i]`: in one loop it would read
  elements it already overwrote);
- updates that read each other's inputs in a cycle (a swap: `t = x.clone(); x.copy_(s);
  s.copy_(t)`).

Readers through aliases count: an eager op whose schema returns a view of its input (a
fallback `as_strided`, `t`, ...) gives a buffer sharing the input's memory, and reading it
is reading the input.
"""
from __future__ import annotations

import heapq

import sympy

from inductor.ir.nodes import ComputedBuffer, ExternKernel, Pointwise
from inductor.ir.layout import Layout
from inductor.schedule.nodes import SchedulerNode


def mutated_input(node: SchedulerNode):
    """The graph input `node` writes into, or None."""
    return getattr(node.buffer, "mutated_input", None)


def _view_results(nodes: list[SchedulerNode]) -> dict:
    """Buffer name -> names of the buffers it may share memory with (results of eager ops
    whose schema returns an alias of an argument)."""
    aliases: dict = {}
    for node in nodes:
        buffer = node.buffer
        schema = getattr(getattr(buffer, "kernel", None), "_schema", None)
        if not isinstance(buffer, ExternKernel) or schema is None:
            continue
        if any(result.alias_info is not None for result in schema.returns):
            shared = set()
            for name in node.read_names():
                shared |= {name} | aliases.get(name, set())
            aliases[node.name] = shared
    return aliases


def _reads_through_aliases(node: SchedulerNode, aliases: dict) -> set:
    names = set()
    for name in node.read_names():
        names |= {name} | aliases.get(name, set())
    return names


def _reads_elsewhere(node: SchedulerNode, name: str) -> bool:
    """Whether `node` reads `name` at an element other than the one it writes."""
    for access in node.reads:
        if access.name != name:
            continue
        if access.index is None or node.write is None or node.write.index is None:
            return True
        if sympy.expand(access.index - node.write.index) != 0:
            return True
    return False


def separate(node: SchedulerNode, graph) -> tuple[SchedulerNode, SchedulerNode]:
    """Split an in-place update of an input into a temporary buffer computing the new value
    and an update copying it into the input. The temporary joins `graph.buffers`."""
    buffer = node.buffer
    size = buffer.get_size()
    layout = Layout(buffer.get_device(), buffer.get_dtype(), size)
    value = ComputedBuffer(f"{buffer.get_name()}_value", layout, buffer.data)
    value.origin = buffer.origin
    graph.buffers.insert(graph.buffers.index(buffer), value)
    copy = Pointwise(buffer.get_device(), buffer.get_dtype(), value.make_loader(), size)
    update = ComputedBuffer(buffer.get_name(), buffer.layout, copy,
                            mutated_input=buffer.mutated_input)
    update.origin = buffer.origin
    graph.buffers[graph.buffers.index(buffer)] = update
    return SchedulerNode(value), SchedulerNode(update)


def _predecessors(nodes: list[SchedulerNode], aliases: dict) -> dict:
    """node -> nodes that must run before it (producers; for an input update, every other
    reader of that input)."""
    writer = {node.name: node for node in nodes if mutated_input(node) is None}
    readers: dict = {}
    for node in nodes:
        for name in _reads_through_aliases(node, aliases):
            readers.setdefault(name, []).append(node)
    before = {}
    for node in nodes:
        first = {writer[name] for name in node.read_names() if name in writer}
        target = mutated_input(node)
        if target is not None:
            first |= {reader for reader in readers.get(target, []) if reader is not node}
        first.discard(node)
        before[node] = first
    return before


def predecessors(nodes: list[SchedulerNode]) -> dict:
    """node -> the nodes that must run before it (producers; for an update of an input, every
    other reader of that input, through aliases too)."""
    return _predecessors(nodes, _view_results(nodes))


def _topological(nodes: list[SchedulerNode], before: dict):
    """A topological order, as close to `nodes`' order as the constraints allow, and the
    nodes left over (they wait on each other: a cycle)."""
    position = {node: index for index, node in enumerate(nodes)}
    waiting = {node: len(before[node]) for node in nodes}
    after: dict = {node: [] for node in nodes}
    for node, first in before.items():
        for other in first:
            after[other].append(node)
    ready = [(position[node], id(node), node) for node in nodes if waiting[node] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, node = heapq.heappop(ready)
        order.append(node)
        for later in after[node]:
            waiting[later] -= 1
            if waiting[later] == 0:
                heapq.heappush(ready, (position[later], id(later), later))
    placed = set(order)
    return order, [node for node in nodes if node not in placed]


def program_order(nodes: list[SchedulerNode], graph) -> list[SchedulerNode]:
    """`nodes` in an order that runs producers first and updates of inputs after every reader
    of the old value, separating updates that would otherwise read what they overwrite (see
    the module docstring)."""
    nodes = list(nodes)
    separated: set = set()

    def split(node: SchedulerNode) -> None:
        value, update = separate(node, graph)
        at = nodes.index(node)
        nodes[at:at + 1] = [value, update]
        separated.add(update.name)

    for node in list(nodes):
        target = mutated_input(node)
        if target is not None and _reads_elsewhere(node, target):
            split(node)
    aliases = _view_results(nodes)
    while True:
        order, stuck = _topological(nodes, _predecessors(nodes, aliases))
        if not stuck:
            break
        victim = next((node for node in stuck if mutated_input(node) is not None
                       and node.name not in separated), None)
        if victim is None:
            raise AssertionError(f"the loop IR has a dependency cycle: {stuck}")
        split(victim)
    for index, node in enumerate(order):
        node.order = index
    return order
