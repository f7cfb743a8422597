"""Symbolic sizes of one trace (stage: trace; input: the frame's tensors and which of their
dimensions are dynamic; output: fake tensors whose dynamic sizes are symbols, and after the
trace, the guards on everything it learned about them).

The symbolic algebra is torch.fx's `ShapeEnv` (`torch.fx.experimental.symbolic_shapes`): fake
tensors' meta kernels speak only its `SymInt` protocol, so a symbolic size propagates through
every ATen op as it does under torch's own tracers. framejit decides the rest: which dimensions
get symbols (`dynamo.shapes.policy`), how the facts the trace learned become guards on the
frame's sources (`guards.kinds.shapes.ShapeGuard`), and how they read in `explain()`.

What a symbol is: one tensor size of the frame, 2 or more (sizes 0 and 1 are never symbolic:
torch's 0/1 rule, kept so that broadcasting and empty tensors specialise as eager's kernels do).
Any Python read of a symbolic value during the trace (`if x.size(0) > 4`, `range(x.size(0))`,
`int(n)`) asks the `ShapeEnv`, which records the fact it answered with (`s0 > 4`, `s0 == 5`);
`guards()` turns every recorded fact, and each symbol's range, into conditions over the reads
that bind the symbols; `specialisations()` names each symbol fixed to one value and the user's
line that fixed it (for `explain()`).
"""
from __future__ import annotations

import copy
import dataclasses
import time
from typing import Callable, Optional

import sympy
import torch
from torch._guards import GuardSource
from torch._guards import Source as TorchSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv,
                                                   StatelessSymbolicContext)
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.printers import PythonPrinter

from guards.kinds.base import Guard
from guards.kinds.shapes import ShapeGuard, SizeRead
from guards.sources import AttrSource, Source


class _Name(str):
    """A name readable both ways torch's versions read `Source.name`: a property (2.14) and a
    method (2.11)."""

    def __call__(self) -> str:
        return str(self)


@dataclasses.dataclass(frozen=True)
class _Named(TorchSource):
    """A framejit source as torch's `ShapeEnv` wants one: it only names symbols with it."""

    text: str

    @property
    def name(self) -> _Name:
        return _Name(self.text)

    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL


class UnboundSymbol(Exception):
    """A learned fact names a symbol no input entry reads (a view's base size): the trace
    cannot be guarded with symbolic sizes and is traced again with static ones."""


class SymbolicTraceTooSlow(UnboundSymbol):
    """The trace with symbolic sizes outran `dynamo.config.symbolic_trace_seconds`: traced
    again with static sizes."""


class SymbolicSizes:
    """The `ShapeEnv` of one trace and the inputs it made symbolic."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.env = ShapeEnv(duck_shape=False, allow_dynamic_output_shape_ops=False,
                            allow_scalar_outputs=False)
        self.inputs: list[tuple[Source, torch.Tensor]] = []
        self.numbers: list[tuple[Source, torch.SymInt]] = []
        self.where: Callable[[], Optional[str]] = lambda: None  # the user's file:line now
        self.env.guards = _LocatedGuards(self)

    def fake_mode(self) -> FakeTensorMode:
        return FakeTensorMode(shape_env=self.env, allow_non_fake_inputs=False)

    def fake_input(self, mode: FakeTensorMode, value: torch.Tensor, source: Source,
                   dims: dict) -> torch.Tensor:
        """The fake of `value`: sizes of `dims` ({dim: (min, max)}) symbolic, others exact;
        for a view, its base's sizes of `dims.base` (`policy.Dims`) too."""
        base_dims = getattr(dims, "base", {})
        if not dims and not base_dims:
            return mode.from_tensor(value, static_shapes=True)
        base_context = None
        if value._base is not None:
            base_context = _context(value._base, base_dims)
        fake = mode.from_tensor(value, source=_Named(source.name()),
                                symbolic_context=_context(value, dims, base_context))
        self._constrain(fake, dims)
        if value._base is not None:
            self._add_base(fake._base, AttrSource(source, "_base"), base_dims)
        if any(isinstance(size, torch.SymInt) for size in fake.shape):
            self.inputs.append((source, fake))
        return fake

    def _constrain(self, fake: torch.Tensor, dims: dict) -> None:
        for dim, (low, high) in dims.items():
            size = fake.shape[dim]
            if isinstance(size, torch.SymInt) and (low is not None or high is not None):
                self.env.constrain_symbol_range(size.node.expr, compiler_min=low or 2,
                                                compiler_max=high or int(sympy.oo))

    def _add_base(self, base: torch.Tensor, source: Source, dims: dict) -> None:
        """A view's base made with symbolic sizes: its reads bind them (unless the base is
        an input of its own, already read)."""
        if any(known is base for _, known in self.inputs):
            return
        self._constrain(base, dims)
        if any(isinstance(size, torch.SymInt) for size in base.shape):
            self.inputs.append((source, base))

    def number_input(self, value: int, source: Source) -> torch.SymInt:
        """A symbol for an int argument of the frame (2 or more)."""
        named = _Named(source.name())
        symbol = self.env.create_symbol(value, source=named, dynamic_dim=DimDynamic.DYNAMIC)
        number = self.env.create_symintnode(symbol, hint=value, source=named)
        self.numbers.append((source, number))
        return number

    def check_time(self, limit: float) -> None:
        """Raise `SymbolicTraceTooSlow` if this trace has symbolic sizes and has run for more
        than `limit` seconds (0: never)."""
        if limit and self.used and time.monotonic() - self.started > limit:
            raise SymbolicTraceTooSlow(f"the trace with symbolic sizes ran over {limit:g} s "
                                       "(dynamo.config.symbolic_trace_seconds)")

    @property
    def used(self) -> bool:
        """Whether any input of the trace has a symbolic size or is a symbolic int."""
        return bool(self.inputs or self.numbers)

    def free_entries(self, fake: torch.Tensor) -> tuple[list[int], list[int]]:
        """The size and stride dims of a fake input that are symbolic (its tensor match guard
        leaves them free: `ShapeGuard` checks them)."""
        sizes = [dim for dim, size in enumerate(fake.shape) if isinstance(size, torch.SymInt)]
        strides = [dim for dim, stride in enumerate(fake.stride())
                   if isinstance(stride, torch.SymInt)]
        return sizes, strides

    def guards(self) -> list[Guard]:
        """One `ShapeGuard` for what the trace learned (empty when nothing is symbolic)."""
        if not self.inputs and not self.numbers:
            return []
        bindings: dict[sympy.Symbol, SizeRead] = {}
        equalities: list[tuple[SizeRead, sympy.Expr]] = []
        reads = [(SizeRead(source, "value"), number) for source, number in self.numbers]
        for source, fake in self.inputs:
            reads += list(_reads(source, fake))
        for read, value in reads:
            if not isinstance(value, torch.SymInt):
                continue
            expr = self.env.simplify(value.node.expr)
            if isinstance(expr, sympy.Symbol) and expr not in bindings:
                bindings[expr] = read
            else:
                equalities.append((read, expr))
        names = {symbol: f"s{position}" for position, symbol in enumerate(bindings)}
        conditions = self._range_conditions(bindings, names)
        for read, expr in equalities:
            symbol = sympy.Symbol(f"_read{len(names)}", integer=True)
            names[symbol] = f"v{len(names)}"
            bindings[symbol] = read
            conditions.append(f"{names[symbol]} == {_print(expr, names)}")
        for guard in self.env.guards:
            expr = self.env.simplify(guard.expr)
            if expr == sympy.true:
                continue
            conditions.append(_print(expr, names))
        ordered = tuple((names[symbol], read) for symbol, read in bindings.items())
        shape_guard = ShapeGuard(ordered, tuple(dict.fromkeys(conditions)))
        _check_holds(shape_guard, dict(reads))
        return [shape_guard]

    def traced(self) -> None:
        """Tracing is over: facts learned from now on are the backend's."""
        self.where = lambda: None

    def specialisations(self) -> list[str]:
        """Each symbol the trace fixed to one value, where (`specialised: L['x'].size()[0]
        == 5 at f.py:3`): the line that needed the Python value (`explain()` lists them with
        the guards); the entry serves that size only."""
        found = []
        for guard, location in self.env.guards.locations:
            expr = guard.expr
            if not isinstance(expr, sympy.Eq) or not any(side.is_number for side in expr.args):
                continue
            text = self._in_user_terms(expr)
            if text is not None:
                found.append(f"specialised: {text} " + (f"at {location}" if location else
                                                       "by the backend's compile"))
        return list(dict.fromkeys(found))

    def _in_user_terms(self, expr) -> Optional[str]:
        reads = {}  # symbol -> how the user reads it (before replacements: `_expr`)
        for source, fake in self.inputs:
            for read, value in _reads(source, fake):
                symbol = getattr(value.node, "_expr", None) \
                    if isinstance(value, torch.SymInt) else None
                if isinstance(symbol, sympy.Symbol):
                    reads.setdefault(symbol, read.text())
        for source, number in self.numbers:
            reads.setdefault(getattr(number.node, "_expr", number.node.expr),
                             SizeRead(source, "value").text())
        try:
            return _print(expr, reads)
        except UnboundSymbol:
            return None

    def _range_conditions(self, bindings: dict, names: dict) -> list[str]:
        conditions = []
        for symbol in bindings:
            bounds = self.env.var_to_range.get(symbol)
            if bounds is None:
                continue
            name = names[symbol]
            if _finite(bounds.lower):
                conditions.append(f"{name} >= {int(bounds.lower)}")
            if _finite(bounds.upper):
                conditions.append(f"{name} <= {int(bounds.upper)}")
        return conditions


def _context(value: torch.Tensor, dims: dict,
             base: Optional[StatelessSymbolicContext] = None) -> StatelessSymbolicContext:
    return StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC if dim in dims else DimDynamic.STATIC
                       for dim in range(value.dim())], view_base_context=base)


class _LocatedGuards(list):
    """The `ShapeEnv`'s guard list, noting the user's line each guard was learned at."""

    def __init__(self, sizes: Optional["SymbolicSizes"] = None) -> None:
        super().__init__()
        self.sizes = sizes
        self.locations: list = []

    def append(self, guard) -> None:
        super().append(guard)
        self.locations.append((guard, None if self.sizes is None else self.sizes.where()))

    def __copy__(self) -> list:
        return list(self)

    def __deepcopy__(self, memo) -> list:
        return copy.deepcopy(list(self), memo)

    def __reduce__(self):
        return (list, (list(self),))


def _finite(bound) -> bool:
    return bool(bound.is_number) and bound not in (sympy.oo, -sympy.oo, int_oo, -int_oo)


def _reads(source: Source, fake: torch.Tensor):
    for dim, size in enumerate(fake.shape):
        yield SizeRead(source, "size", dim), size
    for dim, stride in enumerate(fake.stride()):
        yield SizeRead(source, "stride", dim), stride
    yield SizeRead(source, "storage_offset"), fake.storage_offset()


class _Printer(PythonPrinter):
    def __init__(self, names: dict):
        super().__init__()
        self._names = {symbol.name: name for symbol, name in names.items()}

    def _print_Symbol(self, expr) -> str:
        name = self._names.get(expr.name)
        if name is None:
            raise UnboundSymbol(expr.name)
        return name


def _print(expr, names: dict) -> str:
    return _Printer(names).doprint(expr)


def _check_holds(guard: ShapeGuard, traced: dict) -> None:
    """The conditions hold for the values traced with (else printing went wrong: refuse)."""
    values = [hint(traced[read]) for _, read in guard.bindings]
    if not guard.holds_for(values):
        raise UnboundSymbol(f"the shape conditions do not hold for the traced sizes: "
                            f"{guard.describe()}")


def hint(value) -> Optional[int]:
    """The traced value of a symbolic int (no guard recorded), else None."""
    if isinstance(value, torch.SymInt):
        return int(value.node.hint)
    return None if not isinstance(value, int) else value

