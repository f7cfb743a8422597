"""Context managers: grad mode, inference mode, autocast, `nullcontext`, user classes.

Grad-mode and autocast changes are recorded as graph nodes (so the compiled graph switches
modes at the same points) and applied for real while tracing (so fake tensors propagate
`requires_grad` and dtypes as eager would). The tracer undoes them if tracing stops early.
User context managers have their `__enter__`/`__exit__` inlined.

A `with` block that a graph break cuts in two keeps real exit callables on the rewritten
frame's stack (`ContextExit.real_exit`): `RestoreGradMode` and `exit_nothing` below.

`check_exception_path` runs after each instruction that recorded graph operations: an error
the graph raises when it runs must leave what eager leaves (program fuzzer P42). A graph that
can run again (its writes into inputs and random numbers drawn put back first) is run again
by its glue (`dynamo.rewrite.raising`); in one that cannot (a write that gives an input
autograd history or changes its shape), an operation an error in which would run Python code
(a user `__exit__`, `finally`, `except`) or skip a replayed effect breaks the graph, and runs
eagerly in its real frames.
"""
from __future__ import annotations

import contextlib
import itertools
from typing import Any, Optional

import torch

from dynamo.breaks import UNSUPPORTED_CALL, UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.base import Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.side_effects import cannot_raise, effect_of, memory_of_inputs
from guards import ConstantGuard, IdentityGuard, TypeGuard
from guards.sources import AttrSource, Source


class RestoreGradMode:
    """The `__exit__` of a grad-mode block resumed after a graph break: puts back the mode
    from before the block (the glue re-enters the block with the mode it had at the break)."""

    __slots__ = ("previous",)

    def __init__(self, previous: bool):
        self.previous = previous

    def __call__(self, *exc_info) -> bool:
        torch._C._set_grad_enabled(self.previous)
        return False

    def __repr__(self) -> str:
        return f"RestoreGradMode({self.previous})"


def exit_nothing(*exc_info) -> bool:
    """The `__exit__` of a block that restores nothing (`nullcontext`)."""
    return False


@variable
class GradModeContext(Variable):
    """`torch.no_grad()`, `torch.enable_grad()`, `torch.set_grad_enabled(flag)`."""

    enabled: bool

    def python_type(self) -> type:
        return torch.set_grad_enabled if not isinstance(self.enabled, bool) else \
            (torch.enable_grad if self.enabled else torch.no_grad)

    def enter(self, tx) -> tuple[Variable, Variable]:
        previous = torch.is_grad_enabled()
        _set_grad(tx, self.enabled)
        return grad_mode_exit(tx, previous), ConstantVariable(None)

    def call(self, tx, args, kwargs) -> Variable:
        """Used as a decorator: `@torch.no_grad()`."""
        if len(args) == 1 and not kwargs:
            return DecoratedVariable(self, args[0])
        raise Unsupported(UNSUPPORTED_CALL, "calling a grad-mode context")


def _set_grad(tx, enabled: bool) -> None:
    """Record a grad-mode change as a graph node (which also applies it for real while
    tracing); the undo restores the mode it replaced, which need not be `not enabled`
    (`set_grad_enabled(True)` with grad already on)."""
    previous = torch.is_grad_enabled()
    tx.graph.call("call_function", torch._C._set_grad_enabled, (ConstantVariable(enabled),), {})
    tx.undo_log.append(lambda: torch._C._set_grad_enabled(previous))


@variable
class AutocastContext(Variable):
    """`torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`."""

    arguments: tuple

    def python_type(self) -> type:
        return torch.autocast

    def enter(self, tx) -> tuple[Variable, Variable]:
        handle = tx.graph.call("call_function", torch.amp._enter_autocast,
                               tuple(ConstantVariable(arg) for arg in self.arguments), {})
        tx.undo_log.append(lambda: torch.amp._exit_autocast(handle.value))

        def leave():
            tx.graph.call("call_function", torch.amp._exit_autocast, (handle,), {})
            tx.undo_log.pop()

        def close_for_break():  # the graph must not leave autocast entered (see rebuild)
            tx.graph.call("call_function", torch.amp._exit_autocast, (handle,), {})
        return ContextExit(leave, real_exit=("autocast", self.arguments),
                           close_for_break=close_for_break), ConstantVariable(None)

    def call(self, tx, args, kwargs) -> Variable:
        if len(args) == 1 and not kwargs:
            return DecoratedVariable(self, args[0])
        raise Unsupported(UNSUPPORTED_CALL, "calling an autocast context")


@variable
class NullContext(Variable):
    entered: Variable = None

    def python_type(self) -> type:
        return contextlib.nullcontext

    def enter(self, tx) -> tuple[Variable, Variable]:
        return ContextExit(lambda: None, real_exit=(exit_nothing,)), \
            self.entered or ConstantVariable(None)


@variable
class ContextExit(Variable):
    """The `__exit__` CPython keeps on the stack during a `with` block."""

    leave: Any
    real_exit: Any = None  # (callable, *arguments) building a real exit, for graph breaks
    close_for_break: Any = None  # ends the block inside the graph that stops in it
    entered_before: bool = False  # a block entered before this trace (a region's stack)

    def call(self, tx, args, kwargs) -> Variable:
        """`__exit__(type, value, traceback)`: restores the mode; never swallows an
        exception (returns a false value)."""
        self.leave()
        if self.entered_before:  # an error after it is not undone by an exit of this graph
            tx.side_effects.exception_path.mode_changes += 1
        return ConstantVariable(None)

    def rebuild(self, plan) -> str:
        """A real exit callable, for a `with` block a graph break cuts in two."""
        if self.real_exit is None:
            raise Unsupported(UNSUPPORTED_OBJECT, "a graph break inside this kind of `with` "
                              "block (only grad-mode, autocast, nullcontext and user context "
                              "managers can be resumed)")
        if self.real_exit[0] == "autocast":  # re-enter a real autocast after the graph
            existing = plan.rebuilt(id(self))  # entered once, however often it is referred to
            if existing is not None:
                return f"{existing}.__exit__"
            device, dtype, enabled, cache = self.real_exit[1]
            name = plan.remember(id(self), f"{plan.bind(torch.autocast, 'autocast')}("
                                 f"{device!r}, {plan.constant(dtype)}, {enabled!r}, "
                                 f"{cache!r})")
            plan.statements.append(f"{name}.__enter__()")
            return f"{name}.__exit__"
        function, *arguments = self.real_exit
        if not arguments:
            return plan.bind(function, function.__name__)
        return f"{plan.bind(function, function.__name__)}" \
               f"({', '.join(plan.constant(argument) for argument in arguments)})"


def grad_mode_exit(tx, previous: bool, entered_before: bool = False) -> ContextExit:
    """The exit of a grad-mode block: records the mode change back to `previous`. A block
    entered in this trace is counted open until it is left (`ExceptionPath.grad_blocks`)."""
    if entered_before:
        return ContextExit(lambda: _set_grad(tx, previous),
                           real_exit=(RestoreGradMode, previous), entered_before=True)
    path = tx.side_effects.exception_path
    path.enter_grad_block(previous)

    def leave():
        _set_grad(tx, previous)
        path.grad_blocks -= 1
    return ContextExit(leave, real_exit=(RestoreGradMode, previous))



def wrap_exit(tx, value, source: Optional[Source]) -> Variable:
    """The exit of a `with` block cut by a graph break (`RestoreGradMode`, `exit_nothing`),
    on a region's stack."""
    if isinstance(value, RestoreGradMode):
        if source is not None:
            tx.guards.add(TypeGuard(source, RestoreGradMode))
            tx.guards.add(ConstantGuard(AttrSource(source, "previous"), value.previous))
        return grad_mode_exit(tx, value.previous, entered_before=True)
    if value is not exit_nothing:
        raise Unsupported(UNSUPPORTED_CALL, "an unknown builtin function on a `with` block")
    if source is not None:
        tx.guards.add(IdentityGuard(source, value))
    return ContextExit(lambda: None, real_exit=(exit_nothing,))

@variable
class DecoratedVariable(Variable):
    """A function decorated with a context manager instance: runs inside the context."""

    context: Variable
    function: Variable

    def call(self, tx, args, kwargs) -> Variable:
        exit_function, _ = self.context.enter(tx)
        result = self.function.call(tx, args, kwargs)
        exit_function.call(tx, [ConstantVariable(None)] * 3, {})
        return result


def enter_context(tx, manager: Variable) -> tuple[Variable, Variable]:
    """BEFORE_WITH: returns (exit callable, value bound by `as`)."""
    enter = getattr(manager, "enter", None)
    if enter is not None:
        return enter(tx)
    enter_method = tx.lookup_dunder(manager, "__enter__")
    exit_method = tx.lookup_dunder(manager, "__exit__")
    if enter_method is None or exit_method is None:
        raise Unsupported(UNSUPPORTED_OBJECT, f"`with` on {manager.describe()}")
    entered = enter_method.call(tx, [], {})
    return exit_method, entered


def context_for_class(tx, cls: type, args, kwargs) -> Optional[Variable]:
    """Instances of the context-manager classes framejit models natively."""
    if cls is torch.no_grad:
        return GradModeContext(False)
    if cls is torch.enable_grad:
        return GradModeContext(True)
    if cls is torch.set_grad_enabled:
        return set_grad_enabled(tx, bool(tx.constant(args[0], "set_grad_enabled's flag")))
    if cls is torch.inference_mode:
        mode = tx.constant(args[0], "inference_mode's flag") if args else True
        if mode and not torch.is_inference_mode_enabled():
            raise Unsupported(UNSUPPORTED_CALL, "entering inference_mode inside a compiled "
                              "region (wrap the call site instead)")
        return NullContext()
    if cls in (torch.autocast, torch.amp.autocast, torch.cpu.amp.autocast):
        return _autocast(tx, cls, args, kwargs)
    if cls is contextlib.nullcontext:
        return NullContext(args[0] if args else None)
    return None


def _autocast(tx, cls, args, kwargs) -> Variable:
    values = [tx.constant(arg, "autocast's arguments") for arg in args]
    keywords = {key: tx.constant(value, "autocast's arguments") for key, value in kwargs.items()}
    if cls is torch.cpu.amp.autocast:
        keywords.setdefault("device_type", "cpu")
    instance = torch.autocast(*values, **keywords)
    return AutocastContext((instance.device, instance.fast_dtype, instance._enabled,
                            instance._cache_enabled))


def real_context(value: Any) -> Optional[Variable]:
    """A context-manager object made before the frame ran (`@torch.autocast(...)` keeps one
    in the decorated function's closure): modelled by its settings, which it never changes."""
    if type(value) in (torch.autocast, torch.amp.autocast_mode.autocast):
        return AutocastContext((value.device, value.fast_dtype, value._enabled,
                                value._cache_enabled))
    return None  # grad-mode objects are traced through torch's own decorator code


def context_for_function(tx, function, args, kwargs) -> Optional[Variable]:
    return None


@variable
class AppliedGradMode(Variable):
    """`torch.set_grad_enabled(flag)`: applied when called; a `with` restores the old mode."""

    previous: bool

    def enter(self, tx) -> tuple[Variable, Variable]:
        return grad_mode_exit(tx, self.previous), ConstantVariable(None)


def set_grad_enabled(tx, enabled: bool) -> Variable:
    previous = torch.is_grad_enabled()
    _set_grad(tx, enabled)  # bare, it stays on an error (ExceptionPath.grad_left_differs)
    return AppliedGradMode(previous)


# -- errors raised by the graph when it runs (program fuzzer P42) -----------------------------
def check_exception_path(tx, before: int) -> None:
    """After an instruction of `tx` that may have recorded operations (the graph had
    `before` nodes): break the graph where an error in them could not be handled by the glue
    (see the module docstring). Nodes an inlined call's own checks saw are skipped."""
    nodes = tx.graph.graph.nodes
    path = tx.side_effects.exception_path
    count = len(nodes)
    new = count - max(before, min(path.checked, count))
    path.checked = count
    if new <= 0:
        return
    inputs = None
    lasting = ""
    raising = False  # a new node may raise when the graph runs
    for node in itertools.islice(reversed(nodes), new):
        if cannot_raise(node) or (node.op == "call_function" and node.target in _RESTORED):
            continue
        raising = True
        if inputs is None and node.meta.get("mutates"):
            inputs = memory_of_inputs(nodes)
        effect = effect_of(node, inputs or set())
        lasting = effect.reason if effect.kind == "lasting" else lasting
    path.raised = path.raised or raising
    exposed = raising and (path.effects or path.mode_changes > 0 or path.grad_left_differs()
                           or bool(tx.side_effects.deferred_calls) or runs_code_on_error(tx))
    if (exposed and (path.lasting or lasting)) or (lasting and path.exposed):
        why = path.lasting or lasting
        raise Unsupported(UNSUPPORTED_CALL, "a tensor operation that may raise when the graph "
                          "runs, in a graph that cannot run again (" + why + "), where an "
                          "error would run Python code or skip a change to a Python object "
                          "(a `with` block of a user context manager, `try`, an earlier "
                          "write): it runs eagerly", exact_frames=True)
    path.exposed = path.exposed or exposed
    path.lasting = path.lasting or lasting


_RESTORED = (torch._C._set_grad_enabled, torch.amp._enter_autocast, torch.amp._exit_autocast)


def runs_code_on_error(tx) -> bool:
    """Whether an error raised by the current instruction of `tx` would run Python code of
    the traced frames before leaving them: an `except` or `finally` clause, or the
    `__exit__` of a context manager other than the modelled ones (grad mode, autocast,
    `nullcontext`: the glue puts their modes back itself)."""
    frame = tx
    while frame is not None:
        instruction = getattr(frame, "current", None)
        handler = getattr(instruction, "handler", None)
        while handler is not None:
            runs_code, handler = _next_handler(frame, handler)
            if runs_code:
                return True
        frame = frame.parent
    return False


def _next_handler(frame, handler) -> tuple[bool, Any]:
    """(whether `handler` runs Python code, the handler an error out of it reaches)."""
    instructions = frame.decoded.instructions
    names = [instruction.opname for instruction in instructions[handler.target:
                                                                 handler.target + 2]]
    first = instructions[handler.target]
    if names == ["PUSH_EXC_INFO", "WITH_EXCEPT_START"]:
        stack = frame.stack
        exit_function = stack[handler.depth - 1] if 0 < handler.depth <= len(stack) else None
        if not isinstance(exit_function, ContextExit):
            return True, None
        return False, first.handler  # the block's cleanup, then what covers the `with`
    for instruction in instructions[handler.target:handler.target + 8]:
        if instruction.opname == "RERAISE":  # a cleanup: POP_EXCEPT, a local put back (3.12
            return False, instruction.handler  # comprehensions), then on to what covers it
        if instruction.opname not in _CLEANUP:
            break
    return True, None


_CLEANUP = frozenset({"COPY", "SWAP", "POP_TOP", "POP_EXCEPT", "STORE_FAST", "LOAD_FAST",
                      "LOAD_CONST", "NOP"})
