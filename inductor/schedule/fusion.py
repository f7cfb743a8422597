"""Fusion: which scheduler nodes share one kernel, decided on symbolic indices.

Input: scheduler nodes in topological order. Output: `FusedGroup`s (and extern nodes) in
execution order. A group has one iteration space: `numel` outer points, each running
`rnumel` inner points (1 for a purely pointwise kernel). Within one outer point, nodes run
in stages: "outer" nodes once, "inner" pointwise nodes over the inner loop, "reduction"
nodes combining over it.

Rules (greedy, in topological order):
- A node joins the latest group it benefits (reads what the group writes: vertical; or reads
  what the group reads: horizontal), if every producer outside the group runs before it.
- Shapes must fit: same `numel`; pointwise over `numel * rnumel` becomes an inner stage;
  the loops of all members must have a common refinement (no div/mod introduced).
- Every read of a buffer written inside the group must hit, in the group's loop variables,
  exactly the element the producer writes in the same outer point (no indirect reads).
- An in-place update of a graph input shares a group with other readers of that input only
  where all of them are point-wise and read it at the element the update writes (an
  optimizer step: the param update and the updates of its moments in one loop); a node
  never joins a group that already wrote an input it reads.
- When the group of most benefit refuses a node, the next ones (up to `_TRIES`) may take it.
"""
from __future__ import annotations

from typing import Optional

import sympy

from inductor.config import config
from inductor.ir.symbols import (above_one, exact_quotient, index_symbol, simplify_index,
                                 size_hint, substitute, to_expr)
from inductor.schedule.nodes import SchedulerNode, extent_of


def _equal(first, second) -> bool:
    """Whether two sizes are equal for every value of their symbols."""
    return sympy.expand(to_expr(first) - to_expr(second)) == 0


def prefix_products(dims: list[int]) -> list[int]:
    """Products of the leading dimensions: [a, b, c] -> [a, a*b, a*b*c]."""
    products, running = [], 1
    for size in dims:
        running *= size
        products.append(running)
    return products


def refine(first: list, second: list) -> Optional[list]:
    """The coarsest dims that split both row-major factorizations of one total, or None.
    Symbolic dims refine only where every quotient is exact for all sizes (boundaries
    ordered by their example values, then checked)."""
    total_first = prefix_products(first)[-1] if first else 1
    total_second = prefix_products(second)[-1] if second else 1
    if sympy.expand(to_expr(total_first) - to_expr(total_second)) != 0:
        return None
    boundaries = set(prefix_products(first)) | set(prefix_products(second))
    if all(to_expr(boundary).is_Integer for boundary in boundaries):
        boundaries = sorted(boundaries)
    else:
        boundaries = sorted({sympy.expand(to_expr(boundary)) for boundary in boundaries},
                            key=lambda boundary: (size_hint(boundary), str(boundary)))
    dims, previous = [], 1
    for boundary in boundaries:
        quotient = exact_quotient(boundary, previous)
        if quotient is None:
            return None
        if quotient != 1:
            dims.append(extent_of(quotient))
        previous = boundary
    return dims


def express(node_dims: list[int], kernel_dims: list[int], kernel_vars: list) -> list:
    """Each node loop variable as a linear combination of kernel loop variables."""
    result, position = [], 0
    for size in node_dims:
        members, covered = [], 1
        while sympy.expand(to_expr(covered) - to_expr(size)) != 0:
            if position >= len(kernel_dims):
                raise AssertionError(f"kernel dims {kernel_dims} do not refine {node_dims}")
            members.append(position)
            covered *= kernel_dims[position]
            position += 1
        expression, stride = sympy.Integer(0), 1
        for member in reversed(members):
            expression = expression + kernel_vars[member] * stride
            stride *= kernel_dims[member]
        result.append(expression)
    return result


OUTER_VARS = [index_symbol("x", n) for n in range(32)]
INNER_VARS = [index_symbol("y", n) for n in range(32)]


class Placement:
    """How a node sits in a group: its stage kind and its loops split outer/inner."""

    def __init__(self, kind: str, outer: list[int], inner: list[int]):
        self.kind = kind      # "outer", "inner" or "reduction"
        self.outer = outer    # node dims covering the outer iteration space
        self.inner = inner    # node dims covering the inner iteration space

    def mapping(self, node: SchedulerNode, outer_dims: list[int], inner_dims: list[int]):
        """Node loop variable -> expression in kernel variables (x: outer, y: inner)."""
        if self.kind == "reduction":
            outer = express(node.outer_sizes, outer_dims, OUTER_VARS)
            inner = express(node.inner_sizes, inner_dims, INNER_VARS)
            replacements = {index_symbol("i", n): value for n, value in enumerate(outer)}
            replacements.update({index_symbol("r", n): value for n, value in enumerate(inner)})
            return replacements
        dims = outer_dims + inner_dims
        variables = OUTER_VARS[:len(outer_dims)] + INNER_VARS[:len(inner_dims)]
        values = express(node.outer_sizes, dims, variables)
        return {index_symbol("i", n): value for n, value in enumerate(values)}


class FusedGroup:
    """Nodes sharing one kernel, with their common loops."""

    def __init__(self, node: SchedulerNode):
        self.nodes: list[SchedulerNode] = []
        self.placements: dict = {}
        self.numel = node.numel()
        self.rnumel = node.rnumel() if node.is_reduction() else 1
        self.outer_dims: list[int] = []
        self.inner_dims: list[int] = []
        self.position = 0
        self.written: dict = {}   # buffer name -> writing node
        self.read: set = set()
        placement, outer, inner, _ = self._fit(node)
        self._add(node, placement, outer, inner)

    # -- shapes --------------------------------------------------------------------------
    def _fit(self, node: SchedulerNode):
        """(placement, new outer dims, new inner dims, re-placed members) or None."""
        numel, rnumel = self.numel, self.rnumel
        replaced = {}
        if not self.nodes:
            numel, rnumel = node.numel(), node.rnumel() if node.is_reduction() else 1
        if node.is_reduction():
            if rnumel == 1 and above_one(node.rnumel()) and \
                    any(member.is_reduction() for member in self.nodes):
                # A member reducing over one element would run over the new inner loop and
                # combine its value once per inner point (`v[None].sum(-1)` next to
                # `v.expand(2).sum()` came out twice the value).
                return None
            if rnumel == 1 and self.nodes and _equal(node.numel() * node.rnumel(), numel) \
                    and above_one(node.rnumel()):
                numel, rnumel = node.numel(), node.rnumel()
                for member in self.nodes:
                    split = _split(member, numel, rnumel)
                    if split is None:
                        return None
                    replaced[member] = split
            elif rnumel == 1 and _equal(node.numel(), numel):
                rnumel = node.rnumel()
            if not _equal(node.numel(), numel) or not _equal(node.rnumel(), rnumel):
                return None
            placement = Placement("reduction", node.outer_sizes, node.inner_sizes)
        elif _equal(node.numel(), numel):
            placement = Placement("outer", node.outer_sizes, [])
        elif above_one(rnumel) and _equal(node.numel(), numel * rnumel):
            placement = _split(node, numel, rnumel)
            if placement is None:
                return None
        else:
            return None
        placements = {**self.placements, **replaced, node: placement}
        dims = _common_dims(placements)
        if dims is None:
            return None
        outer, inner = dims
        return placements, outer, inner, (numel, rnumel)

    def _add(self, node, placements, outer, inner, shape=None) -> None:
        if isinstance(placements, Placement):
            placements = {node: placements}
        self.placements = placements
        self.outer_dims, self.inner_dims = outer, inner
        if shape is not None:
            self.numel, self.rnumel = shape
        self.nodes.append(node)
        self.written[node.written_name()] = node
        self.read |= node.read_names()

    # -- legality ------------------------------------------------------------------------
    def try_add(self, node: SchedulerNode) -> bool:
        """Add `node` if it fits and every dependency inside the group is same-element."""
        if len(self.nodes) >= config.max_fusion_nodes:
            return False
        fit = self._fit(node)
        if fit is None:
            return False
        placements, outer, inner, shape = fit
        if not self._legal(node, placements, outer, inner):
            return False
        self._add(node, placements, outer, inner, shape)
        return True

    def _legal(self, node, placements, outer, inner) -> bool:
        if any(getattr(member.buffer, "mutated_input", None) in node.read_names()
               for member in self.nodes):
            return False
        node_map = placements[node].mapping(node, outer, inner)
        mutated = getattr(node.buffer, "mutated_input", None)
        if mutated and mutated in self.read and \
                not self._reads_only_the_written_element(node, placements, outer, inner):
            return False
        if not any(access.name in self.written for access in node.reads) and \
                not self._shares_a_load(node, node_map, placements, outer, inner):
            return False
        for access in node.reads:
            producer = self.written.get(access.name)
            if producer is None:
                continue
            if access.index is None or producer.write.index is None:
                return False
            producer_map = placements[producer].mapping(producer, outer, inner)
            if not self._same_element(producer.write.index, producer_map, access.index,
                                      node_map, outer, inner):
                return False
            if placements[producer].kind == "inner" and placements[node].kind == "outer":
                return False
        return True

    def _reads_only_the_written_element(self, node, placements, outer, inner) -> bool:
        """Whether an update of a graph input may join members that read the input's old
        value: each of them (and the update itself) is point-wise and reads it only at the
        element the update writes, so each loop point reads before it writes and no point
        reads another's element (an optimizer step: the param update reads the old moments
        that the moment updates then write, one loop per param). The readers run first:
        the program order puts an update after every reader of its input."""
        target = node.write.index
        if target is None or placements[node].kind != "outer":
            return False
        node_map = placements[node].mapping(node, outer, inner)
        name = node.buffer.mutated_input
        for member in self.nodes + [node]:
            member_map = placements[member].mapping(member, outer, inner)
            for access in member.reads:
                if access.name != name:
                    continue
                if access.index is None or placements[member].kind != "outer" or \
                        not self._same_element(
                        target, node_map, access.index, member_map, outer, inner):
                    return False
        return True

    def _shares_a_load(self, node, node_map, placements, outer, inner) -> bool:
        """Horizontal fusion pays only when both sides load the same elements (one load
        serves both); reading one buffer along different axes would make one side strided."""
        for access in node.reads:
            if access.index is None or access.name not in self.read:
                continue
            for member in self.nodes:
                member_map = placements[member].mapping(member, outer, inner)
                for other in member.reads:
                    if other.name == access.name and other.index is not None and \
                            self._same_element(other.index, member_map, access.index,
                                               node_map, outer, inner):
                        return True
        return False

    @staticmethod
    def _same_element(write, write_map, read, read_map, outer, inner) -> bool:
        ranges = {OUTER_VARS[n]: to_expr(size) for n, size in enumerate(outer)}
        ranges.update({INNER_VARS[n]: to_expr(size) for n, size in enumerate(inner)})
        first = simplify_index(sympy.expand(substitute(write, write_map)), ranges)
        second = simplify_index(sympy.expand(substitute(read, read_map)), ranges)
        return sympy.expand(first - second) == 0

    def benefit(self, node: SchedulerNode) -> int:
        """Shared memory traffic: reads of group outputs count twice, common reads once."""
        names = node.read_names()
        return 2 * len(names & set(self.written)) + len(names & self.read)

    def kind_of(self, node: SchedulerNode) -> str:
        return self.placements[node].kind

    def __repr__(self) -> str:
        members = ", ".join(f"{node.name}:{self.kind_of(node)}" for node in self.nodes)
        return f"FusedGroup([{members}], outer={self.outer_dims}, inner={self.inner_dims})"


def _common_dims(placements: dict) -> Optional[tuple[list[int], list[int]]]:
    """The (outer, inner) kernel dims refining every placement's own dims; None when two
    placements' dims do not refine into one another."""
    outer, inner = [], []
    for member_placement in placements.values():
        if member_placement.outer:
            outer = refine(outer, member_placement.outer) if outer \
                else member_placement.outer
        if member_placement.inner:
            inner = refine(inner, member_placement.inner) if inner \
                else member_placement.inner
        if outer is None or inner is None:
            return None
    return outer, inner


def _split(node: SchedulerNode, numel: int, rnumel: int) -> Optional[Placement]:
    """Place a pointwise node over numel*rnumel as an inner stage, if its loops split."""
    dims = refine(node.outer_sizes, [numel, rnumel] if above_one(numel) else [rnumel])
    if dims is None:
        return None
    outer, running = [], 1
    for position, size in enumerate(dims):
        if _equal(running, numel):
            return Placement("inner", outer, dims[position:])
        outer.append(size)
        running *= size
    return Placement("inner", outer, []) if _equal(running, numel) else None


def fuse(nodes: list[SchedulerNode], dependencies: dict) -> list:
    """Greedy fusion in topological order; returns groups and extern nodes in order.

    `dependencies[node]` lists the nodes that must run before `node` (producers, and for
    in-place updates of inputs every other reader of that input).
    """
    steps: list = []
    step_of: dict = {}
    for node in nodes:
        if node.is_extern() or node.own_kernel() or node.numel() == 0:
            step_of[node] = len(steps)
            steps.append(FusedGroup(node) if node.numel() == 0 and not node.is_extern() and
                         not node.own_kernel() else node)
            continue
        earliest = max((step_of[dependency] for dependency in dependencies.get(node, ())),
                       default=-1)
        joined = next((position for position in _candidates(steps, node, earliest)
                       if steps[position].try_add(node)), None)
        if joined is not None:
            step_of[node] = joined
            continue
        group = FusedGroup(node)
        step_of[node] = len(steps)
        steps.append(group)
    return steps


def _candidates(steps: list, node: SchedulerNode, earliest: int) -> list[int]:
    """Positions of the groups `node` may join, the most benefit first (the latest among
    equals), at most `_TRIES` of them: when the best refuses the node (an update of an
    input a member reads elsewhere), the next may take it (Adam's second moment, refused by
    another param's loop, joins the first moment's update sharing the gradient's load)."""
    scored = []
    for position in range(len(steps) - 1, max(earliest, 0) - 1, -1):
        candidate = steps[position]
        if isinstance(candidate, FusedGroup):
            score = candidate.benefit(node)
            if score > 0:
                scored.append((-score, -position))
    scored.sort()
    chosen = []
    for _score, negative in scored:
        if len(chosen) >= _TRIES:
            break
        if steps[-negative]._fit(node) is not None:
            chosen.append(-negative)
    return chosen


# groups tried per node, the most benefit first (each try checks indices symbolically)
_TRIES = 3
