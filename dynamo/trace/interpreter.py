"""Stage "trace": the symbolic bytecode interpreter.

Input: a frame view (or, for an inlined call, a function and bound arguments) and its decoded
instructions. Output: the values it returns, with every tensor operation recorded in the shared
`GraphBuilder`, every specialisation recorded as a guard, every mutation of pre-existing state
recorded in `SideEffects`.

`Tracer` holds one frame's state (value stack, locals, cells, instruction pointer) and the
helpers handlers share; handlers, one per normalised opcode, live in `dynamo.trace.handlers`.
A `Tracer` with a `parent` is an inlined call: it shares its parent's graph, guards and side
effects, and its `RETURN_VALUE` hands the value back instead of ending the trace.
"""
from __future__ import annotations

import dataclasses
from types import CodeType
from typing import Any, Optional

from dynamo.breaks import (INLINE_DEPTH, UNSUPPORTED_BYTECODE, UNSUPPORTED_OBJECT, BreakFrame,
                           Unsupported)
from dynamo.instructions import DecodedCode, Instruction, decode
from dynamo.trace.graph import GraphBuilder
from dynamo.trace.handlers.exceptions import unwind
from dynamo.variables.side_effects import SideEffects
from dynamo.variables.base import NULL, NotConstant, Variable
from dynamo.variables.lazy import LazyVariable, realize
from dynamo.variables.exceptions import RaisedInTrace
from guards import GuardSet
from guards.sources import Source
from dynamo import skips
from dynamo.trace.handlers import HANDLERS
from dynamo.variables.builder import wrap, wrap_computed
from dynamo.variables.builtins import truth
from dynamo.variables.contexts import check_exception_path
from dynamo.variables.iterators import GeneratorVariable, iterate_all
from dynamo.variables.objects import lookup_dunder
from dynamo.variables.operators import _UNKNOWN
from dynamo.variables.side_effects import Box


@dataclasses.dataclass
class TraceState:
    """What every tracer of one capture shares."""

    graph: GraphBuilder
    guards: GuardSet
    side_effects: SideEffects
    root_globals: dict
    inline_depth_limit: int = 32
    undo_log: list = dataclasses.field(default_factory=list)  # real state changes to undo
    nested_stop: tuple = ()  # chains of (code, index), compiled frame first: stops in callees
    handled_exception: Optional[Variable] = None  # what `sys.exc_info()` holds in traced code


class Tracer:
    """The state of one frame being traced symbolically."""

    def __init__(self, state: TraceState, code: CodeType, f_globals: dict,
                 locals_: dict[str, Variable], cells: dict[str, Variable],
                 parent: Optional["Tracer"] = None, globals_source: Optional[Source] = None):
        self.state = state
        self.code = code
        self.decoded: DecodedCode = decode(code)
        self.f_globals = f_globals
        self.globals_source = globals_source  # None: the root frame's own globals (`G`)
        self.locals = locals_
        self.stops: frozenset = frozenset()  # root frame: instruction indices to stop before
        self.unbound_marker: Any = None  # a resumed region: the value its unbound locals hold
        self.function: Any = None  # an inlined call: the real function object, when known
        # an inlined call made by a class call (`__init__`): the instance under construction,
        # which the caller receives instead of the call's result (see `constructing`)
        self.constructs: Optional[Variable] = None
        self._pending_construct: Optional[Variable] = None
        # What this frame's CALL instruction calls, until the Python function it runs is
        # entered (see `call_directly`); `direct`: this frame is such a call of its caller's
        # instruction (its result is the instruction's result), not one made by a builtin
        # the instruction called (`list(map(f, xs))`: f's result is not list's)
        self.direct_callee: Any = None
        self.direct = False
        self.stopped: Optional[int] = None  # the stop reached
        self.cells = cells
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.stack: list[Variable] = []
        self.ip = 0
        self.current: Optional[Instruction] = None
        self.returned: Optional[Variable] = None
        self.is_generator = False
        self.yielded: Optional[Variable] = None
        if self.depth > state.inline_depth_limit:
            raise Unsupported(INLINE_DEPTH, f"inlining {code.co_qualname}")

    # -- shared state ----------------------------------------------------------------------
    @property
    def graph(self) -> GraphBuilder:
        return self.state.graph

    @property
    def guards(self) -> GuardSet:
        return self.state.guards

    @property
    def side_effects(self) -> SideEffects:
        return self.state.side_effects

    @property
    def undo_log(self) -> list:
        return self.state.undo_log

    # -- the stack -------------------------------------------------------------------------
    def push(self, value: Variable) -> None:
        self.stack.append(value)

    def pop(self) -> Variable:
        """The top of the stack, realised (see `dynamo.variables.lazy`)."""
        return realize(self, self.stack.pop())

    def popn(self, count: int) -> list[Variable]:
        if count == 0:
            return []
        values = [realize(self, value) for value in self.stack[-count:]]
        del self.stack[-count:]
        return values

    def peek(self, depth: int = 1) -> Variable:
        value = self.stack[-depth]
        if type(value) is LazyVariable:
            value = self.stack[-depth] = value.realize(self)
        return value

    def pop_raw(self) -> Variable:
        """The top of the stack as it is: for instructions that only move values."""
        return self.stack.pop()

    def peek_raw(self, depth: int = 1) -> Variable:
        return self.stack[-depth]

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> Variable:
        """Interpret until the frame returns; returns the returned variable."""
        instructions = self.decoded.instructions
        self.yielded = None
        while self.returned is None and self.yielded is None:
            if self.ip in self.stops:
                self.stopped = self.ip
                return None
            if self.state.nested_stop and self.parent is not None:
                self.check_nested_stop()
            instruction = instructions[self.ip]
            self.current = instruction
            self.ip += 1
            self.graph.location = self.location()
            handler = HANDLERS.get(instruction.opname)
            layout = self.layout()
            try:
                if handler is None:
                    raise self.unsupported(UNSUPPORTED_BYTECODE,
                                           f"the {instruction.opname} instruction")
                before = len(self.graph.graph.nodes)
                handler(self, instruction)
                check_exception_path(self, before)
            except RaisedInTrace as raised:  # to this frame's `except`, or to the caller
                unwind(self, raised)
            except Unsupported as error:
                if error.location is None:
                    error.location = self.location()
                    error.user_frames = self.user_frames()
                    error.chain = self.break_chain(layout)
                if self.parent is None and error.root_index is None:
                    error.root_index, error.root_layout = instruction.index, layout
                raise
        return self.returned

    def layout(self) -> tuple:
        """The stack layout: True where the slot holds NULL."""
        return tuple(value is NULL for value in self.stack)

    def break_chain(self, layout: tuple) -> list:
        """A `BreakFrame` per traced frame, the compiled frame first (see dynamo.resume)."""
        frames, tracer = [], self
        while tracer is not None:
            frames.append(BreakFrame(tracer.code, tracer.current.index, tracer.current.opname,
                                     layout if tracer is self else tracer.layout(),
                                     tracer.function, tracer.is_generator, tracer.direct))
            tracer = tracer.parent
        return frames[::-1]

    def check_nested_stop(self) -> None:
        """Stop inside an inlined call (the break resumes inside it, see dynamo.resume)."""
        for stop in self.state.nested_stop:
            if len(stop) != self.depth + 1 or self.code is not stop[-1][0] or \
                    self.ip != stop[-1][1]:
                continue
            tracer, depth = self.parent, len(stop) - 2
            while tracer is not None and tracer.code is stop[depth][0] and \
                    tracer.current.index == stop[depth][1]:
                tracer, depth = tracer.parent, depth - 1
            if tracer is None:
                raise NestedStopReached(self)

    def user_frames(self) -> list[str]:
        """`file:line` of this frame and every inlining caller, innermost first."""
        frames, tracer = [], self
        while tracer is not None:
            frames.append(tracer.location())
            tracer = tracer.parent
        return frames

    def jump(self, target: int) -> None:
        self.ip = target

    def location(self) -> str:
        line = self.current.lineno if self.current is not None else self.code.co_firstlineno
        return f"{self.code.co_filename}:{line}"

    def unsupported(self, kind, detail: str) -> Unsupported:
        return Unsupported(kind, detail, self.location())

    # -- locals --------------------------------------------------------------------------
    def read_local(self, name: str) -> Optional[Variable]:
        """The local's variable as stored (possibly lazy), or None when unbound."""
        return self.locals.get(name)

    def take_local(self, name: str) -> Optional[Variable]:
        return self.locals.pop(name, None)

    def set_local(self, name: str, value: Variable) -> None:
        self.locals[name] = value

    def delete_local(self, name: str) -> None:
        self.locals.pop(name, None)

    # -- helpers handlers share ------------------------------------------------------------
    def wrap(self, value: Any, source: Optional[Source]) -> Variable:
        """A variable for a real value read from the frame (installs the guards it needs)."""
        return wrap(self, value, source)

    def wrap_result(self, value: Any) -> Variable:
        """A variable for a value computed at trace time (no source, no guards)."""
        return wrap_computed(self, value)

    def truth(self, value: Variable) -> bool:
        return truth(self, value)

    def iterate(self, value: Variable) -> list[Variable]:
        return iterate_all(self, value)

    def real_value(self, value: Variable) -> Any:
        return getattr(value, "value", _UNKNOWN) if getattr(value, "is_real", False) \
            else _UNKNOWN

    def lookup_dunder(self, value: Variable, name: str) -> Optional[Variable]:
        """`type(value).name` bound to `value`, when `value` is a user object defining it."""
        return lookup_dunder(self, value, name)

    def call(self, function: Variable, args: list[Variable],
             kwargs: Optional[dict[str, Variable]] = None) -> Variable:
        return function.call(self, list(args), dict(kwargs or {}))

    def call_directly(self, function: Variable, args: list[Variable],
                      kwargs: dict[str, Variable]) -> Variable:
        """The call a CALL instruction makes: the Python function it reaches through
        `function` (itself, or a method's, a partial's, a module's `forward`, a class's
        `__init__`: `pass_direct`) is traced as a direct call (`take_direct`), which a graph
        break can resume inside (dynamo.resume.nested); functions that builtins call on
        the way (a `map`'s function, a sort key) are not."""
        self.direct_callee = function
        try:
            return function.call(self, list(args), dict(kwargs))
        finally:
            self.direct_callee = None

    def pass_direct(self, wrapper: Any, target: Any) -> None:
        """`wrapper`, the direct callee, calls `target` first and returns its result."""
        if self.direct_callee is not None and self.direct_callee is wrapper:
            self.direct_callee = target

    def take_direct(self, variable: Variable, function: Any) -> bool:
        """Whether `variable` (wrapping Python function `function`) is the direct callee;
        the answer is given once per instruction."""
        callee = self.direct_callee
        if callee is not None and (callee is variable or callee is function):
            self.direct_callee = None
            return True
        return False

    def inline(self, code: CodeType, f_globals: dict, locals_: dict[str, Variable],
               cells: dict[str, Variable], globals_source: Optional[Source],
               function: Any = None, direct: bool = False) -> Variable:
        """Trace a call of `code` inside this trace and return its result (`direct`: see
        `call_directly`)."""
        child = Tracer(self.state, code, f_globals, locals_, cells, parent=self,
                       globals_source=globals_source)
        child.function = function
        child.direct = direct
        child.constructs, self._pending_construct = self._pending_construct, None
        if code.co_flags & _GENERATOR_FLAGS:
            if code.co_flags & _ASYNC_FLAGS:
                raise self.unsupported(UNSUPPORTED_BYTECODE, "a coroutine or async generator")
            child.is_generator = True
            return GeneratorVariable(Box("iterator", child))
        return child.run()

    def constructing(self, instance: Variable, call) -> None:
        """Make `call()`, a class call's `__init__`, knowing that the first call it inlines
        initialises `instance`: a graph break inside it resumes with the instance as the
        class call's value, not `__init__`'s result."""
        self._pending_construct = instance
        try:
            call()
        finally:
            self._pending_construct = None

    def resume(self) -> Optional[Variable]:
        """A generator's next value (None when it returns)."""
        if self.returned is not None:
            return None
        self.run()
        if self.yielded is not None:
            return self.yielded
        return None

    def constant(self, value: Variable, what: str) -> Any:
        try:
            return value.as_constant()
        except NotConstant:
            raise self.unsupported(UNSUPPORTED_OBJECT, f"{what} must be known at trace time, "
                                   f"got {value.describe()}") from None

    def globals_entry_source(self, name: str) -> Optional[Source]:
        """The source of global `name` of the code being traced."""
        from guards.sources import DictItemSource, GlobalSource
        if self.f_globals is self.state.root_globals:
            return GlobalSource(name)
        if skips.is_library_globals(self.f_globals):
            return None
        if self.globals_source is not None:
            return DictItemSource(self.globals_source, name)
        return None


class NestedStopReached(BaseException):
    """The trace reached the stop inside an inlined call; carries that call's tracer."""

    def __init__(self, tracer: Tracer):
        super().__init__("nested stop")
        self.tracer = tracer


_GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coro, async gen
_ASYNC_FLAGS = 0x80 | 0x100 | 0x200


def is_null(value: Variable) -> bool:
    return value is NULL
