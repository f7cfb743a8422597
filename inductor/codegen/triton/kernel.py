"""The Triton kernel printer: one tiled `KernelPlan` becomes one or two `@triton.jit`
functions.

Input: a kernel plan whose `tiling` (`schedule/tiling.py`) says how it maps onto programs,
and the dtypes of the buffers it touches. Output: `KernelFunction`s (source text with a
placeholder name) and a `LaunchSpec` telling the runtime the grid, the block parameters and
the scratch memory each needs (both defined in `spec.py`, with the extents' printing):

- "pointwise": one flat index `xindex` over the outer loops, masked past the end;
- "tiled": a `[YBLOCK, XBLOCK]` tile, the leading loops on Y and the rest on X;
- reductions over `[XBLOCK, RBLOCK]` tiles, rows on X and the row on R: "persistent" (the
  whole row in one block; every stage reuses the loaded values), "looped" (each stage loops
  over the row in blocks, accumulating elementwise, reducing the block at the end), and
  "split" (a partial kernel reduces a chunk of each row into scratch memory, a combine
  kernel merges the partials in a fixed order and runs the once-per-row stages).

Names inside a function depend only on its content, so identical kernels (repeated layers)
print identically and share one compilation.

Over symbolic sizes (issue 23) the plan's extents and indices hold the graph's size symbols:
each function takes them after its buffer pointers as int64 arguments (`s0: tl.int64`,
never specialised by Triton, so one compilation serves every size), every axis whose extent
is symbolic keeps its mask, and the runtime computes the grid per call
(`runtime/triton_sizes.py`). A plan without symbols prints exactly as before.
"""
from __future__ import annotations

import re
from typing import Optional

import sympy
import torch

from inductor.codegen.bounds import triton_assert
from inductor.codegen.triton.expressions import index_text
from inductor.codegen.triton.ops import TritonOpsHandler, TritonValue
from inductor.codegen.triton.reductions import (Accumulator, OnlineSoftmax, SharedPass,
                                                 identity_lanes, result_dtype, row_mean,
                                                 whole_row)
from inductor.codegen.triton.spec import (EVEN_EXTENT, NAME, SIZE_NAME, SIZES,  # noqa: F401
                                          KernelFunction, LaunchSpec, Lines, divisible,
                                          loop_steps, product, size_text)
from inductor.ir.ops import use_handler
from inductor.ir.symbols import simplify_index, substitute
from inductor.schedule.plans import KernelPlan, Member, reduction_linear_index

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Names every function defines for its lanes: the axis whose lanes they vary over.
LANE_NAMES = {f"{axis}{suffix}": axis for axis in "yxrs" for suffix in ("index", "mask")}


class TritonKernel:
    """Prints one kernel plan (see the module docstring). `interpret`: for Triton's CPU
    interpreter: report out-of-range indices and integer division by zero through a status
    word (on GPUs reading it back would synchronise). `wait_for_prior`: each function starts
    by waiting for the kernels before it on the stream (`gdc_wait`), so the runtime may launch
    it with programmatic dependent launch (`LaunchSpec.programmatic`)."""

    def __init__(self, plan: KernelPlan, dtype_of, interpret: bool = False,
                 wait_for_prior: bool = False):
        self.plan = plan
        self.wait_for_prior = wait_for_prior and not interpret
        self.tiling = plan.tiling
        self.dtype_of = dtype_of
        self.checks = interpret
        self.interpret = interpret
        self.ranges = plan.variable_ranges()
        self.pointers = {name: f"pointer{position}"
                         for position, name in enumerate(self.arguments())}
        self.local_names = {member.name: f"m{position}"
                            for position, member in enumerate(plan.members())}
        # the size symbols the functions take (`functions` adds any a body printed)
        self.size_names = [symbol.name for symbol in plan.size_symbols()]
        # of a graph over symbolic sizes (`source.py` sets it): a plan of static extents may
        # still print a size in its body (the bound of an indirect index into a buffer of
        # symbolic size), which must then be a parameter (else NameError compiling for the GPU)
        self.symbolic = False
        self.spec = self._launch_spec()
        self.spec.programmatic = self.wait_for_prior
        self.extents: Optional[dict] = None   # buffer -> elements it spans (bounds.py)
        self.check_bounds = False               # bounds mode: assert every access
        self.full_axes = {block[0].lower() for block in self.spec.even}  # "x", "y", "r"
        # a part of a combined launch (`combo.py`): the name of its program index parameter,
        # which stands for `tl.program_id(0)`
        self.program_id: Optional[str] = None
        self._reset()

    def _reset(self) -> None:
        self.lines = Lines()
        self.available: dict = {}
        self.counter = 0
        self.axes: dict = {}          # loop symbol -> "x", "y" or "r"
        self.scope_axes: tuple = ()
        self.unsynchronised: set = set()  # buffers stored since the last barrier
        self.reciprocals: dict = {}   # per-row float32 value -> its reciprocal (see truediv)
        self.flat_indices: list = []  # (flat index symbol, {loop symbol: stride}) per axis
        self.value_axes: dict = {}    # name of a value defined in the function -> its axes

    # -- interface -------------------------------------------------------------------------
    def arguments(self) -> list[str]:
        """Graph buffer names in parameter order (loads, then stores)."""
        names = list(self.plan.loads)
        names += [name for name in self.plan.stores if name not in names]
        return names

    def functions(self) -> list[KernelFunction]:
        """The functions of this plan (two for a split reduction; a persistent reduction
        with a looped alternative also gets the looped one). Over symbolic sizes, every
        function takes the same size parameters: the plan's symbols and any other one a
        body printed (a bound of an indirect index), sorted by name."""
        found = self._functions()
        if not self.size_names and not self.symbolic:
            return found
        names = set(self.size_names)
        for function in found:
            names |= {token for token in IDENTIFIER.findall(function.text)
                      if SIZE_NAME.fullmatch(token)}
        self.size_names = sorted(names)
        if not self.size_names:     # a static kernel of a symbolic graph
            for function in found:
                function.text = function.text.replace(f", {SIZES}", "")
            return found
        parameters = ", ".join(f"{name}: tl.int64" for name in self.size_names)
        unspecialised = ", ".join(f'"{name}"' for name in self.size_names)
        for function in found:
            function.text = function.text.replace(SIZES, parameters).replace(
                "@triton.jit\n", f"@triton.jit(do_not_specialize=[{unspecialised}])\n", 1)
        return found

    def _functions(self) -> list[KernelFunction]:
        tiling = self.tiling
        if tiling.kind == "pointwise":
            return [self._function("main", self._pointwise, ["XBLOCK"])]
        if tiling.kind == "tiled":
            return [self._function("main", self._tiled, ["YBLOCK", "XBLOCK"])]
        if tiling.strategy == "split":
            return [self._function("partial", self._split_partial, ["XBLOCK", "RBLOCK"]),
                    self._function("combine", self._split_combine, ["XBLOCK", "SBLOCK"])]
        result = []
        for strategy in (tiling.strategy,) + tuple(tiling.alternatives):
            body = self._persistent if strategy == "persistent" else self._looped
            role = "main" if not result else strategy
            result.append(self._function(role, body, ["XBLOCK", "RBLOCK"]))
        return result

    def _launch_spec(self) -> LaunchSpec:
        tiling, plan = self.tiling, self.plan
        xnumel = product(plan.outer_sizes)
        if tiling.kind == "pointwise":
            return LaunchSpec("pointwise", xnumel, even=("XBLOCK",) if divisible(xnumel) else ())
        if tiling.kind == "tiled":
            spec = LaunchSpec("tiled", product(plan.outer_sizes[tiling.y_loops:]),
                              ynumel=product(plan.outer_sizes[:tiling.y_loops]))
            spec.even = tuple(block for block, extent in (("YBLOCK", spec.ynumel),
                                                          ("XBLOCK", spec.xnumel))
                              if divisible(extent))
            return spec
        rnumel = product(plan.inner_sizes)
        spec = LaunchSpec("reduction", xnumel, rnumel=rnumel,
                          outer_contiguous=tiling.outer_contiguous, strategy=tiling.strategy,
                          row_limit=tiling.row_limit)
        if tiling.strategy == "split":
            spec.kind, spec.split = "split", tiling.split
            spec.chunk = -(-rnumel // tiling.split)
            for accumulator in self._accumulators(plan.stages[0].members):
                spec.workspaces += [dtype for _name, dtype in accumulator.variables()]
            row_even = divisible(spec.chunk) and spec.chunk * spec.split == rnumel
        elif isinstance(rnumel, int) and rnumel & (rnumel - 1) == 0:
            row_even = True      # a persistent block is the row itself
        else:
            row_even = divisible(rnumel) and "persistent" not in \
                (tiling.strategy,) + tuple(tiling.alternatives)
        spec.even = (("XBLOCK",) if divisible(xnumel) else ()) + \
            (("RBLOCK",) if row_even else ())
        return spec

    def _function(self, role: str, body, blocks: list) -> KernelFunction:
        self._reset()
        extra = body()
        parameters = [self.pointers[name] for name in self.arguments()] + \
            ([SIZES] if self.size_names or self.symbolic else []) + list(extra or [])
        if self.checks:  # every function takes the status word, used or not
            parameters.append("status_pointer")
            self.spec.status = True
        parameters += [f"{block}: tl.constexpr" for block in blocks]
        head = ["@triton.jit", f"def {NAME}({', '.join(parameters)}):"]
        if self.wait_for_prior:   # before any memory access: the launch may be early
            head.append("    tl.extra.cuda.gdc_wait()")
        return KernelFunction(role, "\n".join(head + self.lines.lines) + "\n", blocks)

    # -- scope services for the ops handler --------------------------------------------------
    def add_line(self, *texts: str) -> None:
        self.lines.add(*texts)

    def pointer(self, name: str) -> str:
        return self.pointers[name]

    def assert_in_bounds(self, name: str, offset: str, mask: Optional[str],
                         access: str) -> None:
        """Bounds mode (`codegen/bounds.py`): assert the access lies within its buffer."""
        if not self.check_bounds:
            return
        line = triton_assert(offset, mask, name, self.extents, self.plan.name, access)
        if line is not None:
            self.add_line(line)

    def index_text(self, expr) -> str:
        return index_text(self._simplified(expr))

    def _simplified(self, expr):
        return self._refold(simplify_index(sympy.expand(sympy.sympify(expr)), self.ranges))

    def _refold(self, expr):
        """`k * (stride0*x0 + stride1*x1 + ...) + rest` over all loop variables decomposed
        from one flat index, as `k * xindex + rest`. The variables come from `xindex` by `//`
        and `%`; written back as their sum, Triton cannot prove the address contiguous and
        loads and stores lose their vectorisation (a bias broadcast over rows kept the
        other operands' `4096*(xindex // 4096) + xindex % 4096`)."""
        for flat, strides in self.flat_indices:
            if not any(expr.has(symbol) for symbol in strides):
                continue
            ratios = {sympy.sympify(expr.coeff(symbol)) / stride
                      for symbol, stride in strides.items()}
            if len(ratios) != 1:
                continue
            (ratio,) = ratios
            if not ratio.is_Integer or ratio == 0:
                continue
            rest = sympy.expand(expr - ratio * sum(stride * symbol
                                                   for symbol, stride in strides.items()))
            if any(rest.has(symbol) for symbol in strides):
                continue  # a variable also appears inside a division or modulo
            expr = rest + ratio * flat
        return expr

    def mask_for(self, index) -> Optional[str]:
        """The lane mask a load or store at `index` needs in the current scope (None where
        every axis it spans divides evenly into blocks)."""
        return self.masks(*self.axes_of(index))

    def axes_of(self, index) -> set:
        """The axes ("y", "x", "r") whose lanes `index` varies over in the current scope."""
        axes = set()
        for symbol in sympy.sympify(index).free_symbols:
            axis = self.axes.get(symbol)
            axes |= {axis} if axis else set(self.scope_axes)
        return axes

    def text_axes(self, text: str) -> frozenset:
        """The axes whose lanes the Triton expression `text` varies over: those of the loop
        variables, lane names and values it mentions (`value_axes`). A value that varies over
        no axis is a scalar, and one that varies over fewer than the scope's is a block with
        size-1 dimensions: Triton broadcasts both in arithmetic, but not where the shape
        itself matters (a reduction, a pointer under a block mask)."""
        symbols = {symbol.name: axis for symbol, axis in self.axes.items()}
        axes: set = set()
        for token in set(IDENTIFIER.findall(text)):
            axis = self.value_axes.get(token) or symbols.get(token) or LANE_NAMES.get(token)
            if axis:
                axes |= set(axis)
        return frozenset(axes)

    def define(self, name: str, text: str) -> None:
        """Record the axes of value `name`, defined as `text` (see `text_axes`)."""
        self.value_axes[name] = self.text_axes(text)

    def lanes(self, text: str, axes=None) -> str:
        """`text` broadcast to the lanes of `axes` (default: every lane of the current scope;
        see `text_axes`), a block of size 1 along the function's other dimensions. A pointer
        at a constant index under a mask over the rows only is a `[XBLOCK, 1]` block: spread
        over `[XBLOCK, RBLOCK]`, the value it loads made a row's result a whole block."""
        axes = set(self.scope_axes if axes is None else axes)
        if self.tiling.kind == "pointwise":
            dimensions = (("x", "XBLOCK"),)
        elif self.tiling.kind == "tiled":
            dimensions = (("y", "YBLOCK"), ("x", "XBLOCK"))
        else:
            dimensions = (("x", "XBLOCK"), ("r", "RBLOCK"))
        shape = ", ".join(block if axis in axes else "1" for axis, block in dimensions)
        return f"tl.broadcast_to({text}, [{shape}])"

    def masks(self, *axes: str) -> Optional[str]:
        """The conjunction of the masks of `axes` that are not full, or None."""
        return " & ".join(f"{axis}mask" for axis in ("y", "x", "r", "s")
                          if axis in axes and axis not in self.full_axes) or None

    def lane_mask(self) -> str:
        return " & ".join(f"{axis}mask" for axis in self.scope_axes)

    def check(self, condition: str, code: int, predicate: Optional[str]) -> None:
        """Record error `code` in the status word for the lanes where `condition` holds."""
        if not self.checks:
            return
        failing = f"({condition}) & {self.lane_mask()}"
        if predicate:
            failing += f" & {predicate}"
        self.add_line(f"tl.store(status_pointer + ({failing}).to(tl.int32) * 0, {code}, "
                      f"{failing})")

    def synchronise_before_load(self, name: str) -> None:
        """A barrier before reading back a buffer this program stored earlier in the kernel.
        Its lanes may lie in other threads of the program than the ones that stored them
        (a load whose index the compiler cannot prove contiguous gets another layout), and
        stores of one thread become visible to the others only at a barrier. Without it, on
        an H100, a layer-norm backward kernel reading its result back through a view for a
        bfloat16 cast read stale memory (the interpreter runs programs sequentially and
        cannot show this)."""
        if name in self.unsynchronised:
            self.add_line("tl.debug_barrier()")
            self.unsynchronised.clear()

    def forwarded(self, name: str, index) -> Optional[TritonValue]:
        known = self.available.get(name)
        if known is None:
            return None
        known_index, value = known
        if sympy.expand(self._simplified(index) - self._simplified(known_index)) == 0:
            return value
        return None

    # -- shared pieces -----------------------------------------------------------------------
    def _handler(self) -> TritonOpsHandler:
        self.counter += 1
        return TritonOpsHandler(self, prefix=f"t{self.counter}_")

    def _program_offset(self, axis: int, block: str) -> str:
        pid = self.program_id if self.program_id and axis == 0 else f"tl.program_id({axis})"
        if self.tiling.index_bits == 64:
            pid += ".to(tl.int64)"
        return f"{pid} * {block}"

    def _decompose(self, index: str, variables: list, sizes: list, axis: str) -> None:
        """Define each loop variable of `variables` from the flat `index`."""
        steps = loop_steps(sizes)
        for position, (symbol, size) in enumerate(zip(variables, sizes)):
            stride = steps[position]
            if len(variables) == 1:
                text = index
            elif position == 0:
                text = f"{index} // {size_text(stride)}"
            elif stride == 1:
                text = f"{index} % {size_text(size)}"
            else:
                text = f"({index} // {size_text(stride)}) % {size_text(size)}"
            self.add_line(f"{symbol.name} = {text}")
            self.axes[symbol] = axis
        if len(variables) > 1:
            flat = sympy.Symbol(index, integer=True, nonnegative=True)
            self.axes[flat] = axis
            self.flat_indices.append((flat, {symbol: sympy.sympify(stride) for symbol, stride
                                             in zip(variables, steps)}))

    def _x_axis(self, shape: str) -> None:
        plan = self.plan
        self.add_line(f"xnumel = {size_text(product(plan.outer_sizes))}",
                      f"xoffset = {self._program_offset(0, 'XBLOCK')}",
                      f"xindex = xoffset + tl.arange(0, XBLOCK){shape}",
                      "xmask = xindex < xnumel")
        self._decompose("xindex", plan.outer_vars(), plan.outer_sizes, "x")

    def _r_axis(self, start: Optional[str] = None, limit: Optional[str] = None) -> None:
        """Define rindex/rmask and the inner loop variables for one block of the row."""
        base = "tl.arange(0, RBLOCK)[None, :]"
        if self.tiling.index_bits == 64:
            base += ".to(tl.int64)"
        self.add_line(f"rindex = {start + ' + ' if start else ''}{base}")
        mask = "rindex < rnumel"
        if limit:
            mask = f"({mask}) & ({limit})"
        self.add_line(f"rmask = {mask}")
        self._decompose("rindex", self.plan.inner_vars(), self.plan.inner_sizes, "r")

    def _evaluate(self, member: Member, handler: TritonOpsHandler) -> TritonValue:
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

    def _publish(self, member: Member, value: TritonValue, handler: TritonOpsHandler) -> None:
        """Make a member's value available to later readers; store it if the plan says."""
        if not isinstance(value, TritonValue):
            raise NotImplementedError(f"body of {member.name} produced no value")
        index = self._write_index(member)
        self.available[member.name] = (index, value)
        if member.store:
            self.add_line(handler.store_text(member.node.written_name(), index, value))
            self.unsynchronised.add(member.node.written_name())

    def _compute_and_store(self, member: Member, handler: TritonOpsHandler) -> None:
        self._publish(member, self._evaluate(member, handler), handler)

    def _reduction_index(self, member: Member) -> str:
        linear = substitute(reduction_linear_index(member.node), member.replacements)
        return self.index_text(linear)

    def _reduction_value(self, member: Member, handler) -> tuple[str, torch.dtype]:
        """The text of a reduction's summand over the whole `[XBLOCK, RBLOCK]` block. One
        that does not vary over a row (a constant, a value read at a constant index or once
        per row) is broadcast first: reduced as it is, a `[XBLOCK, 1]` value summed to itself
        (`x.expand(4, 8).sum(1)` gave x, not 8x) and a scalar could not be reduced at all."""
        value = self._evaluate(member, handler)
        text = handler.tensor(value) if value.bare else value.name
        if self.text_axes(text) != {"x", "r"}:
            text = self.lanes(text)
        return text, value.dtype

    def _accumulators(self, members: list) -> list[Accumulator]:
        accumulators = []
        for member in members:
            data = member.node.buffer.data
            kind = SharedPass if member.shares else Accumulator
            name = f"{self.local_names[member.shares or member.name]}_acc"
            accumulators.append(kind(name, data.reduction_type, _compute(data.src_dtype)))
        return accumulators

    def _result(self, member: Member, dtype: torch.dtype, handler) -> None:
        name = f"{self.local_names[member.name]}_value"
        reduction = member.node.buffer.data.reduction_type
        value_dtype = result_dtype(reduction, dtype)
        if value_dtype == torch.float32 and self._inner_stage_follows(member):
            # As the C++ backend does: a later loop dividing by this per-row value multiplies
            # by its reciprocal, computed once here (within 1.5 ulp of the quotient). A
            # division per element cost softmax over 32768 a quarter of its bandwidth on an
            # H100.
            self.add_line(f"{name}_reciprocal = jit_div(tl.full([], 1.0, tl.float32), {name})")
            self.reciprocals[name] = f"{name}_reciprocal"
            self.value_axes[f"{name}_reciprocal"] = frozenset("x")
        self.value_axes[name] = frozenset("x")      # [XBLOCK, 1]: one value per row
        self._publish(member, TritonValue(name, value_dtype), handler)

    def _inner_stage_follows(self, member: Member) -> bool:
        """Whether an inner stage runs after `member`'s reduction in this kernel."""
        stages = self.plan.stages
        position = next(index for index, stage in enumerate(stages) if member in stage.members)
        return any(stage.kind == "inner" for stage in stages[position + 1:])

    # -- pointwise ---------------------------------------------------------------------------
    def _pointwise(self):
        self.scope_axes = ("x",)
        self._x_axis("")
        handler = self._handler()
        for member in self.plan.members():
            self._compute_and_store(member, handler)

    def _tiled(self):
        plan, split = self.plan, self.tiling.y_loops
        variables, sizes = plan.outer_vars(), plan.outer_sizes
        self.scope_axes = ("y", "x")
        self.add_line(f"ynumel = {size_text(product(sizes[:split]))}",
                      f"xnumel = {size_text(product(sizes[split:]))}",
                      f"yoffset = {self._program_offset(1, 'YBLOCK')}",
                      "yindex = yoffset + tl.arange(0, YBLOCK)[:, None]",
                      "ymask = yindex < ynumel",
                      f"xoffset = {self._program_offset(0, 'XBLOCK')}",
                      "xindex = xoffset + tl.arange(0, XBLOCK)[None, :]",
                      "xmask = xindex < xnumel")
        self._decompose("yindex", variables[:split], sizes[:split], "y")
        self._decompose("xindex", variables[split:], sizes[split:], "x")
        handler = self._handler()
        for member in plan.members():
            self._compute_and_store(member, handler)

    # -- persistent reductions ---------------------------------------------------------------
    def _persistent(self):
        self._x_axis("[:, None]")
        self.add_line(f"rnumel = {size_text(product(self.plan.inner_sizes))}")
        self._r_axis()
        handler = self._handler()
        sources = {member.name: member.node.buffer.data.reduction_type
                   for member in self.plan.members() if member.kind == "reduction"}
        for stage in self.plan.stages:
            # An outer stage computes one value per row, as in a looped reduction: an index
            # read from memory there varies over the rows only (with the scope's row lanes,
            # a one-element gather after a full reduction loaded through a [1, RBLOCK] block)
            self.scope_axes = ("x",) if stage.kind == "outer" else ("x", "r")
            for member in stage.members:
                if stage.kind != "reduction":
                    self._compute_and_store(member, handler)
                    continue
                value, dtype = self._reduction_value(member, handler)
                result = f"{self.local_names[member.name]}_value"
                data = member.node.buffer.data
                full = "r" in self.full_axes      # the block is the row: no select at all
                mask = None if full or identity_lanes(data.reduction_type, value, handler) \
                    else "xmask & rmask"
                shared = member.shares and row_mean(
                    sources[member.shares], f"{self.local_names[member.shares]}_value")
                self.add_line(*whole_row(data.reduction_type, dtype, value, mask,
                                         self._reduction_index(member),
                                         size_text(product(self.plan.inner_sizes)), result,
                                         shared or None))
                self._result(member, dtype, handler)

    # -- looped reductions -------------------------------------------------------------------
    def _looped(self):
        self._x_axis("[:, None]")
        self.add_line(f"rnumel = {size_text(product(self.plan.inner_sizes))}")
        outer_handler = self._handler()
        for stage in self.plan.stages:
            if stage.kind == "outer":
                self.scope_axes = ("x",)
                for member in stage.members:
                    self._compute_and_store(member, outer_handler)
            elif stage.kind == "inner":
                self._inner_loop(stage.members)
            else:
                self._reduction_loop(stage.members, outer_handler)

    def _open_row_loop(self, end: Optional[str] = None, base: str = "roffset",
                       limit=None) -> None:
        end = end or size_text(product(self.plan.inner_sizes))
        self.add_line(f"for roffset in range(0, {end}, RBLOCK):")
        self.lines.depth += 1
        self._r_axis(base, limit)
        self.scope_axes = ("x", "r")

    def _close_loop(self) -> None:
        self.lines.depth -= 1
        self.scope_axes = ("x",)

    def _inner_loop(self, members: list) -> None:
        saved = dict(self.available)
        self._open_row_loop()
        handler = self._handler()
        for member in members:
            self._compute_and_store(member, handler)
        self._close_loop()
        self.available = saved

    def _fold_loop(self, members: list, accumulators: list, end=None, base="roffset",
                   limit=None) -> None:
        """One loop over the row folding each member's values into its accumulator."""
        for accumulator in accumulators:
            self.add_line(*accumulator.declare("[XBLOCK, RBLOCK]"))
        saved = dict(self.available)
        self._open_row_loop(end, base, limit)
        handler = self._handler()
        for member, accumulator in zip(members, accumulators):
            value, _dtype = self._reduction_value(member, handler)
            plain = "r" in self.full_axes and not isinstance(accumulator, OnlineSoftmax)
            mask = None if identity_lanes(accumulator.type, value, handler, plain) \
                else "xmask & rmask"
            self.add_line(*accumulator.update(value, mask, self._reduction_index(member)))
        self._close_loop()
        self.available = saved

    def _reduction_loop(self, members: list, outer_handler) -> None:
        online = self.tiling.online                   # sum member -> its max member
        partner = {maximum: total for total, maximum in online.items()}
        by_name = {member.name: member for member in self.plan.members()}
        members = [member for member in members if member.name not in online]
        if not members:
            return
        accumulators = self._accumulators(members)
        for position, member in enumerate(members):
            if member.name in partner:
                accumulators[position] = OnlineSoftmax(accumulators[position].name,
                                                       accumulators[position].dtype)
        self._fold_loop(members, accumulators)
        for member, accumulator in zip(members, accumulators):
            result = f"{self.local_names[member.name]}_value"
            if isinstance(accumulator, OnlineSoftmax):
                total = by_name[partner[member.name]]
                self.add_line(*accumulator.finish_pair(
                    result, f"{self.local_names[total.name]}_value"))
                self._result(member, accumulator.dtype, outer_handler)
                self._result(total, accumulator.dtype, outer_handler)
                continue
            self.add_line(*accumulator.finish(result))
            self._result(member, accumulator.dtype, outer_handler)

    # -- split reductions --------------------------------------------------------------------
    def _workspace_names(self) -> list[str]:
        return [f"workspace{position}" for position in range(len(self.spec.workspaces))]

    def _split_partial(self):
        members = self.plan.stages[0].members
        accumulators = self._accumulators(members)
        self._x_axis("[:, None]")
        self.add_line(f"rnumel = {product(self.plan.inner_sizes)}",
                      f"rstart = {self._program_offset(1, str(self.spec.chunk))}")
        self._fold_loop(members, accumulators, str(self.spec.chunk), "rstart + roffset",
                        limit=f"rindex < rstart + {self.spec.chunk}")
        workspaces = iter(self._workspace_names())
        for accumulator in accumulators:
            self.add_line(*accumulator.finish_partials())
            for name, _dtype in accumulator.variables():
                mask = self.masks("x")
                self.add_line(f"tl.store({next(workspaces)} + (tl.program_id(1) * xnumel + "
                              f"xindex), {name}[:, None]{', ' + mask if mask else ''})")
        return self._workspace_names()

    def _split_combine(self):
        plan = self.plan
        self._x_axis("[:, None]")
        self.add_line("sindex = tl.arange(0, SBLOCK)[None, :]",
                      f"smask = sindex < {self.spec.split}")
        split = self.spec.split
        if split & (split - 1) == 0:     # SBLOCK is the split itself
            self.full_axes.add("s")
        mask = self.masks("x", "s")
        handler = self._handler()
        self.scope_axes = ("x",)
        workspaces = iter(self._workspace_names())
        members = plan.stages[0].members
        for member, accumulator in zip(members, self._accumulators(members)):
            loads = []
            for position, (name, _dtype) in enumerate(accumulator.variables()):
                loads.append(f"{name}_partials")
                masking = f", {mask}, other={accumulator.partial_filler(position)}" \
                    if mask else ""
                self.add_line(f"{name}_partials = tl.load({next(workspaces)} + (sindex * xnumel"
                              f" + xindex){masking})")
            self.add_line(*accumulator.combine_partials(
                loads, f"{self.local_names[member.name]}_value"))
            self._result(member, accumulator.dtype, handler)
        for stage in plan.stages[1:]:
            for member in stage.members:
                self._compute_and_store(member, handler)
        return self._workspace_names()


def _compute(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
