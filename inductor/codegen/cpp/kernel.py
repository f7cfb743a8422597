"""The C++ kernel printer: one `KernelPlan` becomes one static C++ function.

Input: a kernel plan and the dtypes of the buffers it touches. Output: C++ source with

- loops over the outer iteration space, split over OpenMP threads at the first loop level
  whose extent reaches the thread count (collapsing levels above it), when the work is above
  `config.parallel_threshold`;
- per outer point, the stages in order: "outer" members as straight-line code, "inner"
  members in a `#pragma omp simd` loop, "reduction" members accumulating in lanes
  (`reductions.py`) along the innermost inner loop;
- reductions over a non-contiguous inner loop whose innermost outer loop is contiguous
  vectorised across outer points instead ("outer lanes");
- a reduction with few outer points and a long inner loop split over threads, each thread
  folding a chunk into a partial, combined in thread order (deterministic).
"""
from __future__ import annotations

from typing import Optional

import sympy
import torch

from inductor.codegen.cpp.expressions import index_text, storage_type
from inductor.codegen.cpp.hoist import Hoist
from inductor.codegen.cpp.lines import Lines
from inductor.config import config
from inductor.codegen.cpp.ops import CppOpsHandler, CppValue
from inductor.codegen.cpp.reductions import (FLUSH_BLOCKS, LANES, WIDE_LANES, Accumulator,
                                              SharedPass, lanes_for, positions_ascend,
                                              positions_fit_int32, static_elements)
from inductor.codegen.cpp.reuse import NARROW, StructureTracker, find_reuses
from inductor.codegen.cpp.segments import Segment, innermost_segments
from inductor.ir.ops import use_handler
from inductor.ir.symbols import linear_coefficient, simplify_index, size_hint, substitute
from inductor.schedule.plans import KernelPlan, Member, reduction_linear_index

TILE = 8   # rows and columns of the tiles of a transposing pointwise kernel


class CppKernel:
    """Prints one kernel plan (see the module docstring)."""

    def __init__(self, plan: KernelPlan, dtype_of, threads: int, threshold: int,
                 vectorize: bool = True):
        self.plan = plan
        self.dtype_of = dtype_of
        self.threads = threads
        # Pinned thread counts are printed; otherwise teams follow the OpenMP runtime's current
        # maximum, which torch.set_num_threads sets (one libgomp serves torch and the kernels).
        self.clause = f" num_threads({threads})" if config.threads > 0 else ""
        self.threshold = threshold
        self.vectorize = vectorize
        self.ranges = plan.variable_ranges()
        self.available: dict = {}
        self.counter = 0
        self.hoists = 0
        self.lines = Lines()
        self.pointers = {name: f"p{position}" for position, name in enumerate(self.arguments())}
        self.local_names = {member.name: f"m{position}"
                            for position, member in enumerate(plan.members())}
        self.reciprocals: dict = {}   # per-row float value -> its reciprocal (see truediv)
        self.reuses: list = []        # summands stored into a later loop's output (reuse.py)
        self.extents: Optional[dict] = None   # buffer -> elements it spans (bounds.py)
        # symbolic sizes the kernel takes after its pointers, in this order (the contract)
        self.size_symbols = plan.size_symbols()

    # -- interface -------------------------------------------------------------------------
    def arguments(self) -> list[str]:
        """Buffer names in parameter order (loads, then stores)."""
        names = list(self.plan.loads)
        names += [name for name in self.plan.stores if name not in names]
        return names

    def source(self, function_name: Optional[str] = None) -> str:
        """The C++ function (named `function_name`, default the plan's name)."""
        stored = set(self.plan.stores)
        parameters = []
        for name in self.arguments():
            qualifier = "" if name in stored else "const "
            parameters.append(f"{qualifier}{storage_type(self.dtype_of(name))}* "
                              f"__restrict__ {self.pointers[name]}")
        body = self._body()
        self._add_printed_symbols(body)
        parameters += [f"const int64_t {symbol.name}" for symbol in self.size_symbols]
        head = f"static void {function_name or self.plan.name}({', '.join(parameters)}) {{"
        return "\n".join([head] + body + ["}"])

    def _add_printed_symbols(self, body: list) -> None:
        """Size symbols the body prints beyond the plan's (an indirect index's bound check):
        parameters too, so the kernel never names an undeclared size."""
        if not self.size_symbols and not any(" s" in line or "(s" in line for line in body):
            return
        import re
        known = {symbol.name for symbol in self.size_symbols}
        printed = set(re.findall(r"\bs\d+\b", "\n".join(body))) - known
        if printed:
            self.size_symbols = sorted(self.size_symbols + [sympy.Symbol(name, integer=True,
                                                                         positive=True)
                                                            for name in printed],
                                       key=lambda symbol: symbol.name)

    # -- shape of the nest -----------------------------------------------------------------
    def _work(self) -> int:
        work = 1
        for size in self.plan.outer_sizes + self.plan.inner_sizes:
            work *= size_hint(size)     # a heuristic: symbolic sizes at their example values
        return work

    def _parallel_level(self, sizes: list) -> Optional[int]:
        """The loop level to split over threads (levels above it are collapsed)."""
        if self.threads <= 1 or self._work() < self.threshold or not sizes:
            return None
        running = 1
        for level, size in enumerate(sizes):
            running *= size_hint(size)
            if running >= self.threads:
                return level
        return None

    def _mode(self) -> str:
        plan = self.plan
        if not plan.inner_sizes:
            return "pointwise"
        outer = 1
        for size in plan.outer_sizes:
            outer *= size_hint(size)
        kinds = [stage.kind for stage in plan.stages]
        if self._outer_lanes_fit(kinds):
            return "outer_lanes"
        if outer < self.threads and len(plan.inner_sizes) == 1 and \
                self._work() >= self.threshold and self.threads > 1:
            return "split"
        return "rows"

    def _outer_lanes_fit(self, kinds: list) -> bool:
        plan = self.plan
        if not self.vectorize or not plan.outer_sizes or size_hint(plan.outer_sizes[-1]) < LANES:
            return False
        if "inner" in kinds or kinds[0] != "reduction":
            return False
        inner_var = plan.inner_vars()[-1]
        outer_var = plan.outer_vars()[-1]
        contiguous_outer = strided_inner = False
        for member in plan.members():
            if member.kind != "reduction":
                continue
            for access in member.node.reads:
                if access.index is None:
                    return False
                index = sympy.expand(substitute(access.index, member.replacements))
                inner = linear_coefficient(index, inner_var)
                outer = linear_coefficient(index, outer_var)
                if inner is None or outer is None:
                    return False
                strided_inner |= inner not in (0, 1)
                contiguous_outer |= outer == 1
        return strided_inner and contiguous_outer

    # -- body ------------------------------------------------------------------------------
    def _body(self) -> list[str]:
        mode = self._mode()
        if mode == "pointwise":
            self._pointwise()
        elif mode == "outer_lanes":
            self._outer_lanes()
        else:
            if mode == "rows":
                self.reuses = find_reuses(self.plan.stages, self._evaluate, self.ranges,
                                          self.dtype_of,
                                          lambda member: _compute(member.node.buffer.data
                                                                  .src_dtype),
                                          frozenset(self.plan.aliased_stores),
                                          static_elements(self.plan.inner_sizes))
            self._rows(split=mode == "split")
        return self.lines.function_lines()

    def _open_outer_loops(self, sizes: list, simd_innermost: bool,
                          skip_last: bool = False) -> int:
        """Open the outer loops (all, or all but the last); return how many were opened."""
        variables = self.plan.outer_vars()
        count = len(sizes) - (1 if skip_last else 0)
        level = self._parallel_level(sizes[:count])
        for position in range(count):
            pragma = None
            if level is not None and position == 0:
                collapse = f" collapse({level + 1})" if level > 0 else ""
                simd = " simd" if simd_innermost and level == count - 1 else ""
                pragma = f"#pragma omp parallel for{simd}{collapse}{self.clause} " \
                         f"schedule(static)"
            elif simd_innermost and position == count - 1 and self.vectorize and \
                    (level is None or level < count - 1):
                pragma = "#pragma omp simd"
            if pragma:
                self.lines.add(pragma)
            name = variables[position].name
            self.lines.open(f"for (int64_t {name} = 0; {name} < {_text(sizes[position])}; "
                            f"++{name})")
        return count

    def _pointwise(self) -> None:
        sizes = self.plan.outer_sizes
        if self._transposing(sizes):
            opened = self._open_tiles(sizes)
            hoist = self._hoist_before(self.plan.outer_vars()[-1:])
            opened += self._open_tile_loop(len(sizes) - 1, sizes[-1], simd=self.vectorize)
            self._store_members(self._handler(hoist))
        elif not self._innermost_hoist(sizes):
            opened = self._open_outer_loops(sizes, simd_innermost=True)
            self._store_members(self._handler())
        else:
            # values invariant along the innermost loop (index_select's and embedding's row
            # index and its bounds check) are computed once per row, before that loop; a
            # `cat` along it runs one loop per input (segments.py)
            opened = self._open_outer_loops(sizes, simd_innermost=False, skip_last=True)
            name = self.plan.outer_vars()[-1].name
            pieces = innermost_segments(self._boundaries, name, sizes[-1])
            for piece in pieces or [Segment(name, 0, sizes[-1])]:
                hoist = self._hoist_before(self.plan.outer_vars()[-1:])
                if self.vectorize:
                    self.lines.add("#pragma omp simd")
                self.lines.open(f"for (int64_t {name} = {piece.start}; {name} < "
                                f"{_text(piece.end)}; ++{name})")
                self._store_members(self._handler(hoist, piece if pieces else None))
                self.lines.close()
        for _ in range(opened):
            self.lines.close()

    def _store_members(self, handler: CppOpsHandler) -> None:
        for stage in self.plan.stages:
            for member in stage.members:
                self._compute_and_store(member, handler)

    def _boundaries(self, whole: Segment) -> set:
        """Where the body's position tests change outcome along the innermost loop (its
        code thrown away)."""
        probe = CppOpsHandler([], self.dtype_of, self._forwarded, self._index,
                              pointer=lambda name: self.pointers.get(name, name),
                              segment=whole)
        for member in self.plan.members():
            self._evaluate(member, probe)
        return probe.facts.boundaries

    def _transposing(self, sizes: list) -> bool:
        """Whether the last two loops run in TILE x TILE tiles: a load reads along the
        second-to-last loop contiguously and along the last with a stride of a row or more
        (x.t().contiguous()), so every element of the innermost loop touched another cache
        line and page (1024x1024: 5.4 ms against eager's 1.6). Only for static extents of
        two tiles or more, and where threads split no more than the tile rows."""
        if len(sizes) < 2 or not all(isinstance(size, int) for size in sizes[-2:]) or \
                min(sizes[-2:]) < 2 * TILE:
            return False
        level = self._parallel_level(sizes)
        if not (level is None or level < len(sizes) - 2 or (level == 0 and len(sizes) == 2)):
            return False
        row, last = self.plan.outer_vars()[-2:]
        for member in self.plan.members():
            for access in member.node.reads:
                if access.index is None or access.name in self.plan.stores:
                    continue
                index = sympy.expand(substitute(access.index, member.replacements))
                along_row = linear_coefficient(index, row)
                along_last = linear_coefficient(index, last)
                if along_row == 1 and along_last is not None and abs(along_last) >= TILE:
                    return True
        return False

    def _open_tiles(self, sizes: list) -> int:
        """Open the loops above the last two, the two tile loops and the row loop of a tile
        (threads split the tile rows, or a loop above them)."""
        variables = self.plan.outer_vars()
        level = self._parallel_level(sizes)
        opened = self._open_outer_loops(sizes[:-2], simd_innermost=False) \
            if len(sizes) > 2 else 0
        for position in (len(sizes) - 2, len(sizes) - 1):
            if position == 0 and level == 0:
                self.lines.add(f"#pragma omp parallel for{self.clause} schedule(static)")
            name = variables[position].name
            self.lines.open(f"for (int64_t {name}_tile = 0; {name}_tile < {sizes[position]}; "
                            f"{name}_tile += {TILE})")
        return opened + 2 + self._open_tile_loop(len(sizes) - 2, sizes[-2], simd=False)

    def _open_tile_loop(self, position: int, size: int, simd: bool) -> int:
        name = self.plan.outer_vars()[position].name
        if simd:
            self.lines.add("#pragma omp simd")
        self.lines.open(f"for (int64_t {name} = {name}_tile; {name} < ({name}_tile + {TILE} < "
                        f"{size} ? {name}_tile + {TILE} : {size}); ++{name})")
        return 1

    def _rows(self, split: bool) -> None:
        sizes = self.plan.outer_sizes
        opened = self._open_outer_loops(sizes, simd_innermost=False) if not split else \
            self._open_sequential(sizes)
        for stage in self.plan.stages:
            if stage.kind == "outer":
                handler = self._handler()
                for member in stage.members:
                    self._compute_and_store(member, handler)
            elif stage.kind == "inner":
                self._inner_stage(stage.members, parallel=split)
            else:
                self._reduction_stage(stage.members, parallel=split)
        for _ in range(opened):
            self.lines.close()

    def _open_sequential(self, sizes: list) -> int:
        for position, size in enumerate(sizes):
            name = self.plan.outer_vars()[position].name
            self.lines.open(f"for (int64_t {name} = 0; {name} < {_text(size)}; ++{name})")
        return len(sizes)

    # -- members ---------------------------------------------------------------------------
    def _handler(self, hoist: Optional[Hoist] = None,
                 segment: Optional[Segment] = None) -> CppOpsHandler:
        self.counter += 1
        return CppOpsHandler(_LineSink(self.lines), self.dtype_of, self._forwarded,
                             self._index, prefix=f"t{self.counter}_",
                             pointer=self.pointers.__getitem__, reciprocals=self.reciprocals,
                             extents=self.extents, site=self.plan.name,
                             check_bounds=config.bounds_check, hoist=hoist, segment=segment)

    def _hoist(self) -> Optional[Hoist]:
        """A mark here for what the inner loop nest about to open need not recompute per
        element (hoist.py); None where the nest may not run (an extent of 0)."""
        if any(isinstance(size, int) and size <= 0 for size in self.plan.inner_sizes):
            return None
        return self._hoist_before(self.plan.inner_vars())

    def _hoist_before(self, variables: list) -> Hoist:
        self.hoists += 1     # apart from `counter`: the other temporaries keep their names
        return Hoist(self.lines, variables, self.plan.stores, prefix=f"h{self.hoists}_")

    def _innermost_hoist(self, sizes: list) -> bool:
        """Whether a pointwise nest gets a hoist mark before its innermost loop (and that
        loop's segments, segments.py; a 1-D cat ran 948 us against eager's 307, split 177):
        not where threads split that loop or a `collapse` clause folds it into the parallel
        one (no statement may stand between them) or where it may not run (an extent of 0)."""
        if not sizes or (isinstance(sizes[-1], int) and sizes[-1] <= 0):
            return False
        level = self._parallel_level(sizes)
        return level is None or level < len(sizes) - 1

    def _index(self, expr) -> str:
        return index_text(simplify_index(sympy.expand(sympy.sympify(expr)), self.ranges))

    def _forwarded(self, name: str, index) -> Optional[CppValue]:
        known = self.available.get(name)
        if known is None:
            return None
        known_index, value = known
        index = simplify_index(sympy.expand(sympy.sympify(index)), self.ranges)
        known_index = simplify_index(sympy.expand(sympy.sympify(known_index)), self.ranges)
        if sympy.expand(index - known_index) == 0 or name not in self.pointers:
            # Fusion admitted only same-element reads of buffers written in this kernel, so a
            # buffer kept in registers is this value even where simplification cannot show it.
            return value
        return None

    def _evaluate(self, member: Member, handler: CppOpsHandler) -> CppValue:
        node = member.node
        data = node.buffer.data
        outer = [sympy.expand(substitute(expr, member.replacements)) for expr in node.outer_index]
        with use_handler(handler):
            if member.kind == "reduction":
                inner = [sympy.expand(substitute(expr, member.replacements))
                         for expr in node.inner_index]
                return data.inner_fn(outer, inner)
            return data.inner_fn(outer)

    def _write_index(self, member: Member):
        return sympy.expand(substitute(member.node.write.index, member.replacements))

    def _compute_and_store(self, member: Member, handler: CppOpsHandler) -> None:
        value = self._evaluate(member, handler)
        index = self._write_index(member)
        if not isinstance(value, CppValue):
            raise NotImplementedError(f"body of {member.name} produced no value")
        self.available[member.name] = (index, value)
        if member.store:
            self.lines.add(handler.store_text(member.node.written_name(), index, value))

    # -- inner stages ----------------------------------------------------------------------
    def _open_inner_loops(self, simd: bool, parallel: bool = False) -> int:
        sizes, variables = self.plan.inner_sizes, self.plan.inner_vars()
        for position, size in enumerate(sizes):
            last = position == len(sizes) - 1
            if last and parallel:
                self.lines.add(f"#pragma omp parallel for simd{self.clause} schedule(static)")
            elif last and simd and self.vectorize:
                self.lines.add("#pragma omp simd")
            name = variables[position].name
            self.lines.open(f"for (int64_t {name} = 0; {name} < {_text(size)}; ++{name})")
        return len(sizes)

    def _inner_stage(self, members: list, parallel: bool) -> None:
        saved = dict(self.available)
        hoist = self._hoist()
        opened = self._open_inner_loops(simd=True, parallel=parallel)
        handler = self._handler(hoist)
        preloaded = {}
        for reuse in self.reuses:
            if reuse.reader in members and reuse.scratch:
                kept = CppValue(f"{reuse.scratch}_value", torch.float32)
                self.lines.add(f"const float {kept.name} = {reuse.scratch}"
                               f"[{self._row_position()}];")
                preloaded[reuse.key] = lambda kept=kept: kept
            elif reuse.reader in members:
                # Load the kept summand before any member of the stage stores (the reader
                # overwrites the same element with its own result).
                with use_handler(handler):
                    kept = handler.load(reuse.reader.node.written_name(),
                                        self._write_index(reuse.reader))
                preloaded[reuse.key] = lambda kept=kept: kept
        if preloaded:
            handler = StructureTracker(handler, self.ranges, preloaded)
        for member in members:
            self._compute_and_store(member, handler)
        for _ in range(opened):
            self.lines.close()
        self.available = saved

    # -- reductions ------------------------------------------------------------------------
    def _accumulators(self, members: list, lanes: int, suffix: str = "",
                      terms: Optional[int] = None) -> list:
        """Accumulators of `members`; `terms` is how many values each folds (default: the
        whole inner iteration space)."""
        if terms is None:
            terms = 1
            for size in self.plan.inner_sizes:
                terms *= size_hint(size)    # a heuristic (float sums' blocking)
        accumulators = []
        for member in members:
            data = member.node.buffer.data
            name = f"{self.local_names[member.name]}_acc{suffix}"
            if member.shares:
                source = f"{self.local_names[member.shares]}_acc{suffix}"
                accumulators.append(SharedPass(source, data.reduction_type,
                                               _compute(data.src_dtype), lanes))
                continue
            accumulators.append(Accumulator(name, data.reduction_type,
                                            _compute(data.src_dtype), lanes, terms,
                                            *self._position_order(member),
                                            widened=self._loads_half_floats(member)))
        return accumulators

    def _loads_half_floats(self, member: Member) -> bool:
        """Whether the member's body loads a bfloat16 or float16 buffer (its values reach the
        accumulator widened)."""
        return any(self.dtype_of(access.name) in NARROW for access in member.node.reads)

    def _position_order(self, member: Member) -> tuple:
        """(whether each lane sees growing reduction positions, whether they fit int32): lanes
        run over the innermost inner loop, or over outer points with every inner loop inside
        them, so either way in the inner loops' order."""
        if member.node.buffer.data.reduction_type not in ("argmax", "argmin"):
            return False, False
        position = substitute(reduction_linear_index(member.node), member.replacements)
        return (positions_ascend(position, self.plan.inner_vars(), self.plan.inner_sizes),
                positions_fit_int32(member.node.inner_sizes))

    def _row_position(self) -> str:
        """The row-major position in the inner loops, as C++ (a scratch row's index)."""
        position, stride = sympy.Integer(0), 1
        for variable, size in reversed(list(zip(self.plan.inner_vars(),
                                                self.plan.inner_sizes))):
            position, stride = position + variable * stride, stride * size
        return self._index(position)

    def _reduction_index(self, member: Member) -> str:
        linear = substitute(reduction_linear_index(member.node), member.replacements)
        return self._index(linear)

    def _fold(self, members: list, accumulators: list, lane: Optional[str],
              hoist: Optional[Hoist] = None) -> None:
        """Evaluate the members' bodies and fold them into the accumulators."""
        saved = dict(self.available)
        handler = self._handler(hoist)
        for member, accumulator in zip(members, accumulators):
            value = self._evaluate(member, handler)
            for reuse in self.reuses:
                if reuse.reduction is member and reuse.scratch:
                    self.lines.add(f"{reuse.scratch}[{self._row_position()}] = {value.name};")
                elif reuse.reduction is member:   # keep the summand for the later loop
                    self.lines.add(handler.store_text(reuse.reader.node.written_name(),
                                                      self._write_index(reuse.reader), value))
            index = self._reduction_index(member)
            lines = accumulator.update_lane(value.name, lane, index) if lane is not None \
                else accumulator.update_scalar(value.name, index)
            self.lines.add(*lines)
        self.available = saved

    def _reduction_stage(self, members: list, parallel: bool) -> None:
        if parallel:
            self._split_reduction(members)
            return
        sizes, variables = self.plan.inner_sizes, self.plan.inner_vars()
        innermost = sizes[-1]
        lanes = lanes_for(size_hint(innermost), [member.node.buffer.data for member in members]) \
            if self.vectorize else 0
        accumulators = self._accumulators(members, lanes)
        for accumulator in accumulators:
            self.lines.add(*accumulator.declare())
        self.lines.add(*[f"float {reuse.scratch}[{static_elements(sizes)}] "
                         "__attribute__((aligned(64)));" for reuse in self.reuses
                         if reuse.scratch and reuse.reduction in members])
        hoist = self._hoist()
        for position, size in enumerate(sizes[:-1]):
            name = variables[position].name
            self.lines.open(f"for (int64_t {name} = 0; {name} < {_text(size)}; ++{name})")
        self._innermost_reduction_loop(members, accumulators, variables[-1].name, 0,
                                       _text(innermost), lanes, hoist)
        for _ in sizes[:-1]:
            self.lines.close()
        self._finish_reductions(members, accumulators)

    def _innermost_reduction_loop(self, members, accumulators, name: str, start, end,
                                  lanes: int, hoist: Optional[Hoist] = None) -> None:
        """Lanes over [start, end) in blocks, then a scalar tail (bounds are C++ text). Float
        sums folded into double every FLUSH_BLOCKS blocks run those blocks as a loop of a
        constant trip count, then fold: a test per block kept the lanes in memory (sum of a
        million floats 25% slower)."""
        tail_start = start
        if lanes:
            whole = f"{start} + (({end}) - ({start})) / {lanes} * {lanes}"
            first, width = start, lanes * FLUSH_BLOCKS
            if any(accumulator.blocked for accumulator in accumulators):
                chunk = f"{name}_flush"
                self.lines.open(f"for (int64_t {chunk} = {start}; {chunk} + {width} <= {end}; "
                                f"{chunk} += {width})")
                self._lane_blocks(members, accumulators, name, (chunk, f"{chunk} + {width}"),
                                  lanes, hoist)
                for accumulator in accumulators:
                    self.lines.add(*accumulator.flush())
                self.lines.close()
                first = f"{start} + (({end}) - ({start})) / {width} * {width}"
            self._lane_blocks(members, accumulators, name, (first, end), lanes, hoist)
            tail_start = whole
        self.lines.open(f"for (int64_t {name} = {tail_start}; {name} < {end}; ++{name})")
        self._fold(members, accumulators, None, hoist)
        self.lines.close()

    def _lane_blocks(self, members, accumulators, name: str, bounds: tuple, lanes: int,
                     hoist: Optional[Hoist]) -> None:
        """The whole blocks of `lanes` positions in [bounds) (C++ text)."""
        block = f"{name}_block"
        self.lines.open(f"for (int64_t {block} = {bounds[0]}; {block} + {lanes} <= {bounds[1]}; "
                        f"{block} += {lanes})")
        for accumulator in accumulators:
            self.lines.add(*accumulator.before_block())
        self.lines.add("#pragma omp simd")
        self.lines.open(f"for (int64_t {name} = {block}; {name} < {block} + {lanes}; "
                        f"++{name})", own_vml_blocks=False)
        self._fold(members, accumulators, f"{name} - {block}", hoist)
        self.lines.close()
        for accumulator in accumulators:
            self.lines.add(*accumulator.after_block())
        self.lines.close()

    def _finish_reductions(self, members: list, accumulators: list) -> None:
        for member, accumulator in zip(members, accumulators):
            lines, result = accumulator.finish()
            self.lines.add(*lines)
            dtype = accumulator.result_dtype()
            name = f"{self.local_names[member.name]}_value"
            self.lines.add(f"const {storage_type(dtype)} {name} = {result};")
            if dtype in (torch.float32, torch.float64) and self._inner_stage_follows(member):
                one = "1.0f" if dtype == torch.float32 else "1.0"
                self.lines.add(f"const {storage_type(dtype)} {name}_reciprocal = {one} / {name};")
                self.reciprocals[name] = f"{name}_reciprocal"
            value = CppValue(name, dtype)
            index = self._write_index(member)
            self.available[member.name] = (index, value)
            if member.store:
                handler = self._handler()
                self.lines.add(handler.store_text(member.node.written_name(), index, value))

    def _inner_stage_follows(self, member: Member) -> bool:
        """Whether an inner loop runs after `member`'s reduction in this kernel (only then can
        a reciprocal save divisions)."""
        stages = self.plan.stages
        position = next(index for index, stage in enumerate(stages) if member in stage.members)
        return any(stage.kind == "inner" for stage in stages[position + 1:])

    def _split_reduction(self, members: list) -> None:
        """Each thread folds a chunk of the single inner loop; partials combine in order."""
        size_example = size_hint(self.plan.inner_sizes[0])
        size = _text(self.plan.inner_sizes[0])
        name = self.plan.inner_vars()[0].name
        lanes = lanes_for(size_example // self.threads,
                          [member.node.buffer.data for member in members]) if self.vectorize else 0
        granule = max(lanes, 1)
        threads = "jit_teams"
        teams = self.threads if self.clause else "omp_get_max_threads()"
        self.lines.add(f"const int jit_teams = {teams};")
        partials = self._accumulators(members, 0)
        for accumulator in partials:
            self.lines.add(*accumulator.declare())
            self.lines.add(*accumulator.partial_arrays(threads))
        self.lines.add(f"#pragma omp parallel num_threads({threads})")
        self.lines.open("")
        self.lines.add("const int thread = omp_get_thread_num();",
                       "const int team = omp_get_num_threads();",
                       f"const int64_t chunk = (({size} + team - 1) / team + {granule - 1}) / "
                       f"{granule} * {granule};",
                       "const int64_t begin = thread * chunk;",
                       f"const int64_t end = begin + chunk < {size} ? begin + chunk : {size};")
        local = self._accumulators(members, lanes, suffix="_local",
                                   terms=-(-size_example // self.threads))
        for accumulator in local:
            self.lines.add(*accumulator.declare())
        self._innermost_reduction_loop(members, local, name, "begin", "end", lanes)
        for accumulator, partial in zip(local, partials):
            lines, _result = accumulator.finish()
            self.lines.add(*lines)
            self.lines.add(*accumulator.store_partial(partial.name))
        self.lines.close()
        for partial in partials:
            self.lines.add(*partial.combine_partials(threads))
        self._finish_reductions(members, partials)

    # -- reductions vectorised across outer points -----------------------------------------
    def _outer_lanes(self) -> None:
        """Per block of `width` contiguous outer points: each reduction stage folds the inner
        loops into one lane per point, then a lane loop finishes it and runs the "outer"
        stages after it. A value a later lane loop reads (a BatchNorm's mean, read by its
        variance's pass) is kept per lane in a small array across the loops."""
        plan = self.plan
        sizes = plan.outer_sizes
        last = plan.outer_vars()[-1].name
        extent = sizes[-1]
        opened = self._open_outer_loops(sizes, simd_innermost=False, skip_last=True)
        block = f"{last}_block"
        width = WIDE_LANES if size_hint(extent) >= 2 * WIDE_LANES else LANES
        if opened == 0 and self._parallel_level([size_hint(extent) // width]) is not None:
            self.lines.add(f"#pragma omp parallel for{self.clause} schedule(static)")
        blocks_end = _whole_blocks(extent, width)
        self.lines.open(f"for (int64_t {block} = 0; {block} < {blocks_end}; "
                        f"{block} += {width})")
        lane = f"{last} - {block}"
        kept = _LaneArrays(self.lines.mark(), width)
        groups = _reduction_groups(plan.stages)
        for position, (reductions, epilogue) in enumerate(groups):
            accumulators = self._accumulators(reductions, width)
            for accumulator in accumulators:
                self.lines.add(*accumulator.declare())
            inner_opened = self._open_inner_loops(simd=False)
            for accumulator in accumulators:
                self.lines.add(*accumulator.before_block())
            self._open_lane_loop(last, block, width, kept)
            self._fold(reductions, accumulators, lane)
            self.lines.close()
            for accumulator in accumulators:
                self.lines.add(*accumulator.after_block())
            for _ in range(inner_opened):
                self.lines.close()
            self._open_lane_loop(last, block, width, kept)
            before = set(self.available)
            self._lane_results(reductions, accumulators, lane)
            handler = self._handler()
            for member in epilogue:
                self._compute_and_store(member, handler)
            if position < len(groups) - 1:
                kept.keep(self.lines, [self.available[name][1] for name in self.available
                                       if name not in before], lane)
            self.lines.close()
        self.lines.close()
        if not isinstance(extent, int) or extent % width:
            self.lines.open(f"for (int64_t {last} = {blocks_end}; {last} < "
                            f"{_text(extent)}; ++{last})")
            self._rows_tail()
            self.lines.close()
        for _ in range(opened):
            self.lines.close()

    def _open_lane_loop(self, last: str, block: str, width: int,
                        kept: "_LaneArrays") -> None:
        self.lines.add("#pragma omp simd")
        self.lines.open(f"for (int64_t {last} = {block}; {last} < {block} + {width}; ++{last})")
        kept.restore(self.lines, f"{last} - {block}")

    def _lane_results(self, members: list, accumulators: list, lane: str) -> None:
        for member, accumulator in zip(members, accumulators):
            dtype = accumulator.result_dtype()
            name = f"{self.local_names[member.name]}_value"
            self.lines.add(f"const {storage_type(dtype)} {name} = "
                           f"{accumulator.lane_result(lane)};")
            value = CppValue(name, dtype)
            index = self._write_index(member)
            self.available[member.name] = (index, value)
            if member.store:
                self.lines.add(self._handler().store_text(member.node.written_name(), index,
                                                          value))

    def _rows_tail(self) -> None:
        """The outer points past the last whole block, one at a time."""
        for reductions, epilogue in _reduction_groups(self.plan.stages):
            accumulators = self._accumulators(reductions, 0)
            for accumulator in accumulators:
                self.lines.add(*accumulator.declare())
            opened = self._open_inner_loops(simd=False)
            self._fold(reductions, accumulators, None)
            for _ in range(opened):
                self.lines.close()
            self._finish_reductions(reductions, accumulators)
            handler = self._handler()
            for member in epilogue:
                self._compute_and_store(member, handler)


class _LaneArrays:
    """Values computed in one lane loop of an outer-lanes block and read by a later one: an
    array of `width` per value, declared at the block's start (`mark`), written at the end
    of the loop computing it and read back, under the same name, at the start of the later
    loops (each loop is its own C++ scope)."""

    def __init__(self, mark, width: int):
        self.mark = mark
        self.width = width
        self.values: list = []      # CppValue, in the order they were computed

    def keep(self, lines: Lines, values: list, lane: str) -> None:
        for value in values:
            if any(kept.name == value.name for kept in self.values):
                continue
            lines.insert(self.mark, f"{storage_type(value.dtype)} {value.name}_lane"
                                    f"[{self.width}];")
            lines.add(f"{value.name}_lane[{lane}] = {value.name};")
            self.values.append(value)

    def restore(self, lines: Lines, lane: str) -> None:
        for value in self.values:
            lines.add(f"const {storage_type(value.dtype)} {value.name} = "
                      f"{value.name}_lane[{lane}];")


def _reduction_groups(stages: list) -> list:
    """(reduction members, members of the "outer" stages up to the next reduction stage)
    per reduction stage; the plan starts with a reduction stage and has no inner stage."""
    groups: list = []
    for stage in stages:
        if stage.kind == "reduction":
            groups.append((list(stage.members), []))
        else:
            groups[-1][1].extend(stage.members)
    return groups


def _text(size) -> str:
    """A loop extent as C++: the int, or the symbolic size's expression (int64_t)."""
    return str(size) if isinstance(size, int) else index_text(size)


def _whole_blocks(extent, width: int) -> str:
    """Where the blocks of `width` iterations of a loop over `extent` end (C++ text)."""
    if isinstance(extent, int):
        return str(extent - extent % width)
    return f"({index_text(extent)} / {width} * {width})"


class _LineSink(list):
    """A list-like the ops handler appends to; forwards to the kernel's indented lines."""

    def __init__(self, lines: Lines):
        super().__init__()
        self.target = lines

    def append(self, text: str) -> None:
        self.target.add(text)


def _compute(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
