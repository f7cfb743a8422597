"""Kernel plans: the backend-independent description of each kernel and of the graph.

Input: fused groups from `fusion.py`. Output: `KernelPlan`s (loops, stages, per-node index
maps, which buffers are stored and which stay in registers) and a `GraphPlan` (steps in
order, allocations, and where each buffer dies). The C++ printer and the Triton printer both
read these plans; neither reaches back into the scheduler.

Within a kernel, loops `x0..` cover the outer iteration space and `y0..` the inner one;
neighbouring loops every index walks contiguously are merged into one.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import sympy

from inductor.ir.nodes import WELFORD
from inductor.ir.ops import use_handler
from inductor.ir.printer import TextHandler
from inductor.ir.symbols import (FloorDiv, ModularIndexing, index_symbol, linear_coefficient,
                                 simplify_index, size_symbols, substitute, to_expr)
from inductor.schedule.fusion import INNER_VARS, OUTER_VARS, FusedGroup
from inductor.schedule.nodes import SchedulerNode, extent_of, member_is_outermost


@dataclasses.dataclass
class Member:
    """A node inside a kernel: its stage kind, loop variables in kernel terms, storage."""

    node: SchedulerNode
    kind: str                   # "outer", "inner" or "reduction"
    replacements: dict          # node loop variable -> expression in kernel variables
    store: bool = True          # write the buffer to memory (False: consumed in registers)
    # a Welford reduction reading the pass of an earlier member of its stage over the same
    # values (var_mean's variance and mean: one pass, not two): that member's name
    shares: Optional[str] = None

    @property
    def name(self) -> str:
        return self.node.name


@dataclasses.dataclass
class Stage:
    """Consecutive members sharing one loop (or, for "outer", running once per point)."""

    kind: str
    members: list


@dataclasses.dataclass
class KernelPlan:
    """One kernel: loops, stages, and the memory it touches."""

    name: str
    outer_sizes: list           # extents of x0, x1, ...
    inner_sizes: list           # extents of y0, y1, ...
    stages: list
    loads: list                 # buffers read from memory
    stores: list                # buffers written to memory
    tiling: Optional[object] = None   # GPU grid mapping (`schedule/tiling.py`), None for C++
    # stored buffers that take the memory of a buffer this kernel reads (`in_place.py`): no
    # loop may store into them before the last read of that buffer
    aliased_stores: set = dataclasses.field(default_factory=set)

    def members(self) -> list:
        return [member for stage in self.stages for member in stage.members]

    def outer_vars(self) -> list:
        return OUTER_VARS[:len(self.outer_sizes)]

    def size_symbols(self) -> list:
        """The size symbols this kernel uses (loop extents, index expressions), sorted by
        name: after its buffer pointers, the kernel takes one int64 per symbol, in this
        order (the symbolic-plan contract, docs/inductor.md "Symbolic sizes")."""
        expressions = list(self.outer_sizes) + list(self.inner_sizes)
        for member in self.members():
            node = member.node
            expressions += list(member.replacements.values()) + node.index_expressions
            expressions += list(node.outer_sizes) + list(node.inner_sizes)
            if node.write is not None and node.write.index is not None:
                expressions.append(node.write.index)
        return size_symbols(expressions)

    def inner_vars(self) -> list:
        return INNER_VARS[:len(self.inner_sizes)]

    def variable_ranges(self) -> dict:
        ranges = {symbol: to_expr(size) for symbol, size in
                  zip(self.outer_vars(), self.outer_sizes)}
        ranges.update({symbol: to_expr(size) for symbol, size in
                       zip(self.inner_vars(), self.inner_sizes)})
        return ranges

    def describe(self) -> str:
        """The plan as text: loops, then each stage with its members."""
        loops = ", ".join(f"{symbol} < {size}" for symbol, size in
                          zip(self.outer_vars() + self.inner_vars(),
                              self.outer_sizes + self.inner_sizes))
        lines = [f"{self.name}: loops {loops}; loads {', '.join(self.loads)}; "
                 f"stores {', '.join(self.stores)}"]
        for stage in self.stages:
            members = []
            for member in stage.members:
                node = member.node
                kind = node.buffer.data.reduction_type if member.kind == "reduction" else ""
                if member.shares:
                    kind += f" (the pass of {member.shares})"
                where = "memory" if member.store else "registers"
                members.append(f"{member.name}{' ' + kind if kind else ''} -> {where}")
            lines.append(f"  {stage.kind} stage: {'; '.join(members)}")
        if self.tiling is not None:
            lines.append(f"  tiling: {self.tiling.describe()}")
        return "\n".join(lines)


@dataclasses.dataclass
class ScatterPlan(KernelPlan):
    """A kernel copying a tensor, then writing values at computed positions (sequentially)."""

    node: Optional[SchedulerNode] = None
    # the output took the memory of the buffer its copy reads element for element
    # (`in_place.py`): there is nothing to copy
    copy_in_place: bool = False


def build_scatter(node: SchedulerNode, name: str) -> ScatterPlan:
    """The plan of a scatter node: it loads everything its bodies read, stores its buffer."""
    loads = sorted({access.name for access in node.reads} - {node.name})
    return ScatterPlan(name, list(node.outer_sizes), [], [], loads, [node.name], node=node)


@dataclasses.dataclass
class ScanPlan(KernelPlan):
    """A kernel scanning lines of its one buffer (`ScanBuffer`), in order along each."""

    node: Optional[SchedulerNode] = None


def build_scan(node: SchedulerNode, name: str) -> ScanPlan:
    """The plan of a scan node: it loads what its body reads, stores its buffer."""
    loads = sorted({access.name for access in node.reads} - {node.name})
    return ScanPlan(name, list(node.outer_sizes), [], [], loads, [node.name], node=node)


@dataclasses.dataclass
class ExternStep:
    """A library call or eager fallback, run from the wrapper."""

    node: SchedulerNode

    @property
    def name(self) -> str:
        return self.node.name


@dataclasses.dataclass
class GraphPlan:
    """Everything the code generators need for one graph."""

    steps: list                 # KernelPlan | ExternStep, in execution order
    inputs: list                # InputBuffers
    outputs: list               # per output: Buffer, ReinterpretView, Python value or None
    buffers: dict               # name -> Buffer (inputs included)
    allocated: list             # names of buffers the wrapper allocates, in order
    frees: dict                 # step index -> names whose last reader is that step
    in_place: dict = dataclasses.field(default_factory=dict)  # output -> donor (in_place.py)
    # symbolic sizes (the symbolic-plan contract): the example call's value of each size
    # symbol, for heuristics only (tiling, block sizes, thresholds), never for correctness
    size_hints: dict = dataclasses.field(default_factory=dict)
    # symbol -> (input position, "size" | "stride" | "int", dim), in binding order: how the
    # wrapper reads each symbol from a call's inputs ("int": a SymInt placeholder's value)
    symbol_bindings: dict = dataclasses.field(default_factory=dict)

    def kernels(self) -> list:
        return [step for step in self.steps if isinstance(step, KernelPlan)]

    def describe(self) -> str:
        """Every step in order, then the buffer lifetimes."""
        lines = []
        for position, step in enumerate(self.steps):
            if isinstance(step, KernelPlan):
                lines.append(step.describe())
            else:
                buffer = step.node.buffer
                call = getattr(buffer, "op_name", lambda: "output of a tuple")()
                lines.append(f"{step.name}: {getattr(buffer, 'kind', 'library')} call {call}")
            if self.frees.get(position):
                lines.append(f"  then free {', '.join(self.frees[position])}")
        return "\n".join(lines)


def build_kernel(group: FusedGroup, name: str, users: dict, outputs: set) -> KernelPlan:
    """Turn a fused group into a plan: merge loops, form stages, decide stores."""
    members = [Member(node, group.kind_of(node),
                      group.placements[node].mapping(node, group.outer_dims, group.inner_dims))
               for node in group.nodes]
    outer_sizes, inner_sizes = list(group.outer_dims), list(group.inner_dims)
    expressions = _all_expressions(members)
    outer_sizes, outer_map = _merge_loops(outer_sizes, OUTER_VARS, expressions)
    inner_sizes, inner_map = _merge_loops(inner_sizes, INNER_VARS,
                                          [substitute(expr, outer_map) for expr in expressions])
    final = {**outer_map, **inner_map}
    ranges = {OUTER_VARS[n]: to_expr(size) for n, size in enumerate(outer_sizes)}
    ranges.update({INNER_VARS[n]: to_expr(size) for n, size in enumerate(inner_sizes)})
    for member in members:
        member.replacements = {symbol: simplify_index(substitute(value, final), ranges)
                               for symbol, value in member.replacements.items()}
    stages = _stages(members)
    _share_welford_passes(stages)
    _decide_stores(stages, users, outputs)
    written = {member.node.written_name() for member in members} | \
        {member.name for member in members}
    loads = sorted({access.name for member in members for access in member.node.reads}
                   - written)
    stores = [member.node.written_name() for member in members if member.store]
    return KernelPlan(name, outer_sizes, inner_sizes, stages, loads, stores)


def _all_expressions(members: list) -> list:
    expressions = []
    for member in members:
        node = member.node
        for expr in node.index_expressions + [node.write.index]:
            if expr is not None:
                expressions.append(sympy.expand(substitute(expr, member.replacements)))
        if member.kind == "reduction":
            linear = reduction_linear_index(node)
            expressions.append(sympy.expand(substitute(linear, member.replacements)))
    return expressions


def reduction_linear_index(node: SchedulerNode):
    """The row-major position within the reduced elements (argmax/argmin report it)."""
    linear, stride = sympy.Integer(0), 1
    for position in reversed(range(len(node.inner_sizes))):
        linear = linear + index_symbol("r", position) * stride
        stride *= node.inner_sizes[position]
    return linear


def _merge_loops(sizes: list, variables: list, expressions: list):
    """Merge neighbouring loops when every expression walks them contiguously."""
    if any(size == 0 for size in sizes):   # no element: one empty loop, nothing to merge
        return [0], {symbol: sympy.Integer(0) for symbol in variables[:len(sizes)]}
    groups: list = []
    for position, size in enumerate(sizes):
        symbol = variables[position]
        if groups and _walks_contiguously(expressions, groups[-1][-1][1], symbol, size):
            groups[-1].append((size, symbol))
        else:
            groups.append([(size, symbol)])
    replacements, new_sizes = {}, []
    for position, group in enumerate(groups):
        new_symbol = variables[position]
        extent = 1
        for size, _symbol in group:
            extent = extent_of(extent * size)
        for member, (size, symbol) in enumerate(group):
            stride = 1
            for inner, _symbol in group[member + 1:]:
                stride = extent_of(stride * inner)
            if len(group) == 1:
                replacements[symbol] = new_symbol
            elif member_is_outermost(stride, size, extent):
                replacements[symbol] = FloorDiv(new_symbol, stride)
            else:
                replacements[symbol] = ModularIndexing(new_symbol, stride, size)
        new_sizes.append(extent)
    return new_sizes, replacements


def _walks_contiguously(expressions, outer_symbol, inner_symbol, inner_size) -> bool:
    for expr in expressions:
        outer = linear_coefficient(expr, outer_symbol)
        inner = linear_coefficient(expr, inner_symbol)
        if outer is None or inner is None or outer != inner * inner_size:
            return False
    return True


def _stages(members: list) -> list:
    stages: list = []
    for member in members:
        current: Optional[Stage] = stages[-1] if stages else None
        if current is not None and current.kind == member.kind and \
                not _depends_on_stage(member, current):
            current.members.append(member)
        else:
            stages.append(Stage(member.kind, [member]))
    return stages


def _share_welford_passes(stages: list) -> None:
    """A Welford reduction over the same values as an earlier one of its stage reads that
    one's pass (layer norm's variance and mean): the second accumulator would repeat every
    update of the first."""
    for stage in stages:
        if stage.kind != "reduction":
            continue
        first: dict = {}
        for member in stage.members:
            if member.node.buffer.data.reduction_type in WELFORD:
                member.shares = first.setdefault(_body_text(member), member.name)
                if member.shares == member.name:
                    member.shares = None


def _body_text(member: Member) -> tuple:
    """A reduction member's body in kernel variables, as text (equal text: equal values)."""
    node, data = member.node, member.node.buffer.data
    outer = [sympy.expand(substitute(expr, member.replacements)) for expr in node.outer_index]
    inner = [sympy.expand(substitute(expr, member.replacements)) for expr in node.inner_index]
    handler = TextHandler()
    with use_handler(handler):
        result = data.inner_fn(outer, inner)
    return (str(data.src_dtype), tuple(handler.lines), str(result))


def _depends_on_stage(member: Member, stage: Stage) -> bool:
    """A reduction cannot read another reduction of its own stage (not finished yet)."""
    if member.kind != "reduction":
        return False
    names = {other.name for other in stage.members}
    return bool(member.node.read_names() & names)


def _decide_stores(stages: list, users: dict, outputs: set) -> None:
    stage_of = {member.name: position for position, stage in enumerate(stages)
                for member in stage.members}
    kind_of = {member.name: member.kind for stage in stages for member in stage.members}
    for stage in stages:
        for member in stage.members:
            node = member.node
            if node.name in outputs or getattr(node.buffer, "mutated_input", None):
                continue
            readers = users.get(node.name, [])
            if not readers or any(reader.name not in stage_of for reader in readers):
                continue
            if member.kind == "inner" and any(stage_of[reader.name] != stage_of[node.name]
                                              for reader in readers):
                continue
            if member.kind == "reduction" and any(kind_of[reader.name] == "reduction" and
                                                  stage_of[reader.name] ==
                                                  stage_of[node.name] for reader in readers):
                continue
            member.store = False
