"""Symbolic sizes in training compilation (used by the stages "analyze", "trace", "partition"
and "run").

Input: a torch-level FX graph whose placeholders carry fake tensors with symbolic sizes
(`meta["example_value"]`, or `meta["val"]` for make_fx graphs) or `SymInt` values, all from one
`ShapeEnv` (the dynamic-shapes contract between the front end and a backend, issue 23).
Output, per concern:

- `SymbolicInputs.of(graph)`: the graph's fake mode and its placeholders' fake values (None
  when no size is symbolic: the static path, which traces fakes of its own); `fakes(inputs)`,
  the values to trace with: the placeholders' fakes, static fakes for lifted attributes. Every
  assumption a trace makes about a symbol becomes a guard in that `ShapeEnv`, which the front
  end installs after the backend returns.
- `Binder`: at run time, each symbol's value from the first (input, dim) whose size is exactly
  that symbol (or a `SymInt` input's value); `evaluate` turns traced sizes, strides and offsets
  into integers.
- `hint`: a size's value for the traced example, without adding a guard (costs for the
  partitioner); `known_equal`: sizes equal for every value of their symbols, no guard.
- `stride_rule`/`expected_strides`: traced strides of a dense output as a dimension order, so
  that the layout check of an output uses its own sizes at run time.
- `GuardedVariant`: a variant compiled after the backend returned (another grad mode, other
  inputs requiring grad) whose trace added guards the front end never saw: they are checked at
  each call, and the graph runs eagerly (a counted fallback) where they fail.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from typing import Any, Callable, Optional, Sequence

import sympy
import torch

log = logging.getLogger("framejit.training")


def is_symbolic(value: Any) -> bool:
    """Whether `value` (a tensor, a SymInt, or a tuple of sizes) holds a symbolic size."""
    if isinstance(value, torch.SymInt):
        return not isinstance(value.node.expr, sympy.Integer)
    if isinstance(value, (tuple, list, torch.Size)):
        return any(is_symbolic(item) for item in value)
    if isinstance(value, torch.Tensor):
        return is_symbolic(tuple(value.shape)) or is_symbolic(tuple(value.stride())) or \
            isinstance(value.storage_offset(), torch.SymInt)
    return False


def known_ints(value: Any) -> Any:
    """`value` (a SymInt, or a tuple, list or torch.Size of them) with every SymInt whose value
    the trace fixed (its expression a constant: `s1 -> 5` after a guard) as a plain int; the
    same object where nothing changes. Real tensors' ops refuse a SymInt even of known value
    (tests/dynamic/test_symbolic_constant_sizes.py)."""
    if isinstance(value, torch.SymInt):
        constant = value.node.maybe_as_int()
        return value if constant is None else constant
    if isinstance(value, (tuple, list)) and any(isinstance(item, torch.SymInt) or
                                                type(item) in (tuple, list) for item in value):
        items = [known_ints(item) for item in value]
        if all(new is old for new, old in zip(items, value)):
            return value
        return torch.Size(items) if isinstance(value, torch.Size) else type(value)(items)
    return value


def _placeholder_value(node: Any) -> Any:
    meta = node.meta
    return meta["example_value"] if "example_value" in meta else meta.get("val")


_metadata_tracing = threading.local()


@contextlib.contextmanager
def _no_layout_metadata():
    """While this thread traces symbolically: make_fx's `meta["tensor_meta"]` of each node
    without its memory format. torch finds that format by asking whether each stride equals
    the contiguous one (`s0 - 1 != 1` for `x[1:]`, `s + (-s) % 8 != s` for a padded view),
    and with backed sizes each answer becomes a guard the front end never saw, so the graph
    went per size; nothing in framejit reads `tensor_meta` (`meta["val"]` is used)."""
    _install_metadata_hook()
    depth = getattr(_metadata_tracing, "depth", 0)
    _metadata_tracing.depth = depth + 1
    try:
        yield
    finally:
        _metadata_tracing.depth = depth


def _install_metadata_hook() -> None:
    from torch.fx.experimental import proxy_tensor
    original = getattr(proxy_tensor, "_extract_tensor_metadata", None)
    if original is None or getattr(original, "framejit_wrapped", None) is not None:
        return

    def extract(value, include_contiguity=True):
        if getattr(_metadata_tracing, "depth", 0):
            include_contiguity = False
        return original(value, include_contiguity=include_contiguity)
    extract.framejit_wrapped = original
    proxy_tensor._extract_tensor_metadata = extract


@dataclasses.dataclass
class SymbolicInputs:
    """The fake mode of a graph with symbolic sizes and its placeholders' values."""

    mode: Any                 # the FakeTensorMode whose ShapeEnv holds every symbol
    values: list              # per placeholder: a fake tensor, a SymInt, or None

    @staticmethod
    def of(graph: torch.fx.GraphModule) -> Optional["SymbolicInputs"]:
        """The graph's symbolic inputs, or None where no placeholder has a symbolic size."""
        values = [_placeholder_value(node) for node in graph.graph.nodes
                  if node.op == "placeholder"]
        if not any(is_symbolic(value) for value in values):
            return None
        modes = [value.fake_mode for value in values
                 if isinstance(value, torch.Tensor) and hasattr(value, "fake_mode")]
        if modes:
            mode = modes[0]
        else:   # only SymInt placeholders (a torch.compile graph): a mode over their ShapeEnv
            from torch._subclasses.fake_tensor import FakeTensorMode
            environment = next(value.node.shape_env for value in values
                               if isinstance(value, torch.SymInt))
            mode = FakeTensorMode(shape_env=environment)
        return SymbolicInputs(mode, values)

    @property
    def shape_env(self):
        """The ShapeEnv of every symbol of the graph."""
        return self.mode.shape_env

    @contextlib.contextmanager
    def tracing(self):
        """The graph's fake mode, letting real constants captured in the graph through (as
        the static path's `functional.fake_mode` does), with make_fx's node metadata made
        without a memory format (`_no_layout_metadata`)."""
        allowed = self.mode.allow_non_fake_inputs
        self.mode.allow_non_fake_inputs = True
        try:
            with self.mode, _no_layout_metadata():
                yield self.mode
        finally:
            self.mode.allow_non_fake_inputs = allowed


    def fakes(self, inputs: Sequence[Any]) -> list:
        """Per input, the value to trace with: its placeholder's fake (detached: a fresh
        alias, so that the callers' `requires_grad_` leave the placeholder's alone) or SymInt;
        a static fake for inputs without one (lifted attributes), non-tensors as they are."""
        fakes = []
        for position, value in enumerate(inputs):
            meta = self.values[position] if position < len(self.values) else None
            if isinstance(meta, torch.SymInt) or (
                    isinstance(meta, torch.Tensor) and isinstance(value, torch.Tensor)):
                fakes.append(meta.detach() if isinstance(meta, torch.Tensor) else meta)
            elif isinstance(value, torch.Tensor):
                fakes.append(self.mode.from_tensor(value.detach(), static_shapes=True))
            else:
                fakes.append(value)
        return fakes

    def symbolic_positions(self) -> frozenset:
        """Positions of SymInt placeholders (their values are sizes, not constants)."""
        return frozenset(position for position, value in enumerate(self.values)
                         if isinstance(value, torch.SymInt))

    def binder(self) -> "Binder":
        """The run-time binding of this graph's symbols from its inputs."""
        return Binder(self.values)


def hint(value: Any) -> int:
    """The traced example's value of a size (an int for a SymInt), adding no guard."""
    if isinstance(value, torch.SymInt):  # (`optimization_hint` is torch 2.14's; 2.11 lacks it)
        node = value.node
        known = node.hint
        return int(known if known is not None else node.shape_env.size_hint(node.expr))
    return int(value)


def known_equal(a: Any, b: Any) -> bool:
    """Whether two sizes (or tuples of them) are equal for every value of their symbols,
    adding no guard (False where that is not known: `s0 == 16` holds for one size only)."""
    if isinstance(a, (tuple, list, torch.Size)) or isinstance(b, (tuple, list, torch.Size)):
        return len(a) == len(b) and all(known_equal(x, y) for x, y in zip(a, b))
    if not isinstance(a, torch.SymInt) and not isinstance(b, torch.SymInt):
        return a == b
    from torch.fx.experimental.symbolic_shapes import statically_known_true
    return statically_known_true(a == b)


def _expression(value: Any) -> Any:
    """A SymInt's expression as traced (`_expr`: a later trace's replacements, `s0 -> 4`
    for a variant that specialised, must not change what an earlier variant evaluates)."""
    if not isinstance(value, torch.SymInt):
        return value
    node = value.node
    return getattr(node, "_expr", node.expr)


def _read(argument: Any, dim: Any) -> int:
    """A symbol's value in a call's argument: the int itself (`dim` None), a size (`dim` an
    int), a stride (`("stride", dim)`) or the storage offset (`("offset", None)`)."""
    if dim is None:
        return int(argument)
    if isinstance(dim, int):
        return argument.shape[dim]
    kind, index = dim
    return argument.storage_offset() if kind == "offset" else argument.stride()[index]


class Binder:
    """Each symbol's value at run time, from the first (input position, dim) whose traced
    size is exactly that symbol, or the value of a SymInt input (see the contract), else a
    stride or the storage offset of an input that is a view (`x[1:]` at a symbolic offset)."""

    def __init__(self, values: Sequence[Any]):
        self.sources: dict = {}
        self.shape_env = None
        for position, value in enumerate(values):
            if isinstance(value, torch.SymInt):
                self._add(value, position, None)
            elif isinstance(value, torch.Tensor):
                for dim, size in enumerate(value.shape):
                    self._add(size, position, dim)
        for position, value in enumerate(values):  # after every size: sizes read first
            if isinstance(value, torch.Tensor):    # a view input's stride or offset symbols
                for dim, stride in enumerate(value.stride()):
                    self._add(stride, position, ("stride", dim))
                self._add(value.storage_offset(), position, ("offset", None))
        self.plan = list(self.sources.items())

    def _add(self, size: Any, position: int, dim: Optional[int]) -> None:
        """Bind the size's own symbol and, where the trace found it equal to another
        (`ShapeEnv` replacements: `s1 -> s0`), the one it now reads as."""
        if not isinstance(size, torch.SymInt):
            return
        node = size.node
        self.shape_env = node.shape_env
        for expression in (getattr(node, "_expr", node.expr), node.expr):
            if isinstance(expression, sympy.Symbol):
                self.sources.setdefault(expression, (position, dim))

    def covers(self, value: Any) -> bool:
        """Whether every symbol `value` (sizes, a SymInt, a sympy expression) holds is bound."""
        return _free_symbols(value) <= set(self.sources)

    def bind(self, arguments: Sequence[Any]) -> dict:
        """{symbol: sympy integer} read off the call's `arguments`."""
        bound = {}
        for symbol, (position, dim) in self.plan:
            bound[symbol] = sympy.Integer(_read(arguments[position], dim))
        return bound

    def evaluate(self, value: Any, bound: dict) -> Any:
        """`value` (an int, SymInt or sympy expression, or a tuple of them) as integers."""
        if isinstance(value, (tuple, list, torch.Size)):
            return tuple(self.evaluate(item, bound) for item in value)
        expression = _expression(value)
        if not isinstance(expression, sympy.Basic):
            return expression
        result = expression.xreplace(bound)
        if not result.is_number and self.shape_env is not None:
            result = self.shape_env.replace(expression).xreplace(bound)
        return int(result)

    def evaluate_condition(self, condition: Any, bound: dict) -> bool:
        """A guard's sympy condition at the bound values."""
        result = condition.xreplace(bound)
        if not isinstance(result, sympy.logic.boolalg.BooleanAtom) and \
                self.shape_env is not None:
            result = self.shape_env.replace(condition).xreplace(bound)
        return bool(result)


def _free_symbols(value: Any) -> set:
    if isinstance(value, (tuple, list, torch.Size)):
        return set().union(*(_free_symbols(item) for item in value)) if value else set()
    expression = _expression(value)
    return set(expression.free_symbols) if isinstance(expression, sympy.Basic) else set()


@dataclasses.dataclass(frozen=True)
class DenseOrder:
    """Traced strides of a dense layout with symbolic sizes: the dims, innermost first."""

    order: tuple


def stride_rule(size: Optional[Sequence[Any]], stride: Optional[Sequence[Any]]) -> Any:
    """`stride` as it is where it is static; for symbolic strides of a dense layout (at the
    traced example's sizes), a `DenseOrder`; else None (no layout to enforce)."""
    if stride is None or not is_symbolic(tuple(stride)):
        return None if stride is None else tuple(stride)
    if size is None:
        return None
    sizes = [hint(extent) for extent in size]
    strides = [hint(step) for step in stride]
    order = sorted(range(len(sizes)), key=lambda dim: (strides[dim], -dim))
    expected = 1
    for dim in order:
        if sizes[dim] != 1 and strides[dim] != expected:
            log.debug("symbolic strides %s are not dense: no layout check", stride)
            return None
        expected *= sizes[dim]
    return DenseOrder(tuple(order))


def expected_strides(rule: Any, shape: Sequence[int]) -> Optional[tuple]:
    """The strides `rule` (from `stride_rule`) asks of a value of `shape`."""
    if not isinstance(rule, DenseOrder):
        return rule
    strides = [0] * len(shape)
    expected = 1
    for dim in rule.order:
        strides[dim] = expected
        expected *= shape[dim]
    return tuple(strides)


class GuardedVariant:
    """A variant (or a compiled backward) whose compile added guards after the front end
    read the ShapeEnv's: they are checked at each call (the `variant` and `eager` callables
    take the same arguments); where one fails, `eager` runs (counted once as a fallback of
    kind "unsupported")."""

    takes_argument_list = True

    def __init__(self, variant: Callable, eager: Callable, guards: Sequence[Any],
                 binder: Binder, reason: str = ""):
        self.variant, self.eager, self.binder = variant, eager, binder
        self.guards = list(guards)
        self.counted = False
        self.reason = reason or ("training graph with symbolic sizes: a variant compiled "
                                 "after the first call assumed more about the sizes than "
                                 "the front end guards")

    def __call__(self, arguments: list) -> Any:
        bound = self.binder.bind(arguments)
        if all(self.binder.evaluate_condition(guard, bound) for guard in self.guards):
            return self.variant(arguments)
        if not self.counted:
            from inductor.runtime import fallbacks
            self.counted = True
            log.warning("%s (guards %s)", self.reason, self.guards)
            fallbacks.record("unsupported", self.reason)
        return self.eager(arguments)


def added_guards(shape_env: Any, count: int) -> list:
    """The conditions of the guards `shape_env` holds beyond its first `count`."""
    return [guard.expr for guard in shape_env.guards[count:]]
