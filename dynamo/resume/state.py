"""Stage "resume", tracing side: the state a region starts from and hands back, as variables.

Input: a region's `__state` argument (stack items, locals) and the calls of its prologue
(`dynamo._frame_state.enter`) and exits (`leave`). Output: the tracer's locals and stack.
At import it registers those helpers and `resume_calls` with `dynamo.variables.registry`, so
the builder wraps them without importing this stage, and lets inlining trace regions.

Locals and stack items are `LazyVariable`s, like the arguments of an ordinary frame: a value
the region only moves installs no guard and is handed back through its source; reading a
local guards that it is bound (`check_bound`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from dynamo import _frame_state
from dynamo.breaks import UNSUPPORTED_CALL, Unsupported
from dynamo.resume.nested import resume_calls
from dynamo.resume.regions import region_info, state_names
from dynamo.variables import registry
from dynamo.variables.base import Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import TupleVariable
from dynamo.variables.functions import UserFunctionVariable, globals_source_for, inline_function
from dynamo.variables.lazy import LazyVariable
from guards.sources import ItemSource, Source

HELPERS = {_frame_state.enter: "enter", _frame_state.leave: "leave"} \
    if _frame_state.SUPPORTED else {}


@dataclasses.dataclass(frozen=True, slots=True)
class ResumedSource(Source):
    """A local or stack value a region starts with, named as the user knows it: a region's
    `L['x']` is `__state[1][i]` in the code, but guard failures should say `L['x']`."""

    base: Source  # the region's `__state` argument (or an inner call's state)
    part: int  # 0: the stack, 1 (2 for an inner call): the locals
    index: int
    label: str  # the local's name, or "stack[i]"

    def name(self) -> str:
        return f"<{self.label} at the graph break>" if self.part == 0 else f"L[{self.label!r}]"

    def apply(self, base_code: str) -> str:
        return f"{base_code}[{self.part}][{self.index}]"

    def fetch(self, L: dict, G: dict) -> Any:
        return self.base.fetch(L, G)[self.part][self.index]


@variable
class RegionStateVariable(Variable):
    """A region's `__state` argument, before `enter` unpacks it: its stack items and locals
    (in `state_names` order) as variables, most of them lazy."""

    stack: tuple
    values: tuple


def region_state(code, state: Any, source: Source) -> RegionStateVariable:
    """The variable for a region frame's real `__state` argument."""
    raw = region_info(code).raw_items
    stack_items, values = state
    stack = tuple(
        RawValueVariable(item, source=ItemSource(ItemSource(source, 0), index))
        if index in raw else
        LazyVariable.of(item, ResumedSource(source, 0, index, f"stack[{index}]"))
        for index, item in enumerate(stack_items))
    locals_ = tuple(LazyVariable.of(value, ResumedSource(source, 1, index, name))
                    for index, (name, value) in enumerate(zip(state_names(code), values)))
    return RegionStateVariable(stack, locals_, source=source)


@variable
class RawValueVariable(Variable):
    """A real value handed to framejit's own helpers untouched (no guards, no wrapping)."""

    value: Any
    is_real: bool = True  # rebuilt from its source


@variable
class FrameStateHelper(Variable):
    """`enter` or `leave` of `dynamo._frame_state`, called by region code."""

    name: str

    def call(self, tx, args, kwargs) -> Variable:
        if self.name == "enter":
            return _enter(tx, args[0])
        return _leave(tx, args[0], args[1])


def _enter(tx, state: Variable) -> Variable:
    if not isinstance(state, RegionStateVariable):
        raise Unsupported(UNSUPPORTED_CALL, "a region state that is not the region's argument")
    for name, value in zip(state_names(tx.code), state.values):
        tx.locals[name] = value
    tx.unbound_marker = _frame_state.UNBOUND
    return TupleVariable(state.stack)


@variable
class ResumeCallsVariable(Variable):
    """`dynamo.resume.nested.resume_calls`: finish the inlined calls of a nested stop. Traced
    by inlining each call's region, innermost first, so the rest of every call and of the
    compiled frame become one graph."""

    def rebuild(self, plan) -> str:
        return plan.bind(resume_calls, "resume_calls")

    def call(self, tx, args, kwargs) -> Variable:
        inner, stack, codes = args[0], args[1], tx.constant(args[2], "region codes")
        if not isinstance(inner, RawValueVariable) or not isinstance(stack, RawValueVariable):
            raise Unsupported(UNSUPPORTED_CALL, "a nested resume outside its region")
        function, below, values, constructs = inner.value[0]
        frame_source = ItemSource(inner.source, 0)
        function_variable = tx.wrap(function, ItemSource(frame_source, 0))
        if not isinstance(function_variable, UserFunctionVariable):  # a torch method, traced
            function_variable = UserFunctionVariable(function, source=ItemSource(frame_source, 0))
        if len(inner.value) == 1:
            items = tuple(LazyVariable.of(item, ItemSource(stack.source, index))
                          for index, item in enumerate(stack.value))
        else:  # the call's region finishes the calls inside it: their states stay raw
            items = tuple(LazyVariable.of(item, ItemSource(ItemSource(frame_source, 1), index))
                          for index, item in enumerate(below))
            items += (RawValueVariable(inner.value[1:], source=_Rest(inner.source)), stack)
        names = state_names(codes[0])
        locals_ = tuple(LazyVariable.of(item, ResumedSource(frame_source, 2, index, name))
                        for index, (name, item) in enumerate(zip(names, values)))
        arguments = [RegionStateVariable(items, locals_)]
        if codes[0].co_argcount == 2:  # slot 0's placeholder
            arguments.insert(0, ConstantVariable(None))
        result = inline_function(
            tx, codes[0], function.__globals__, globals_source_for(tx, function.__globals__),
            function.__qualname__, arguments, {}, (), {}, function_variable._closure(tx))
        value = result.items[1].items[0]
        if constructs:  # an `__init__` called by a class call: the caller gets the instance
            if not (isinstance(value, ConstantVariable) and value.value is None):
                raise Unsupported(UNSUPPORTED_CALL, "__init__ returning a value")
            value = LazyVariable.of(constructs[0], ItemSource(ItemSource(frame_source, 3), 0))
        return value


@dataclasses.dataclass(frozen=True, slots=True)
class _Rest(Source):
    """`inner[1:]`: the states of the calls inside the one a nested resume finishes."""

    base: Source

    def name(self) -> str:
        return f"{self.base.name()}[1:]"

    def apply(self, base_code: str) -> str:
        return f"{base_code}[1:]"

    def fetch(self, L: dict, G: dict) -> Any:
        return self.base.fetch(L, G)[1:]


def _leave(tx, stack: Variable, tag: Variable) -> Variable:
    values = [tx.locals[name] if name in tx.locals else ConstantVariable(_frame_state.UNBOUND)
              for name in state_names(tx.code)]
    return TupleVariable((tag, stack, TupleVariable(tuple(values))))


for _helper, _name in HELPERS.items():
    registry.register_value(_helper, lambda name=_name: FrameStateHelper(name))
registry.register_value(resume_calls, ResumeCallsVariable)
registry.register_traceable_code(lambda code: region_info(code) is not None)
registry.register_frame_source(ResumedSource)
