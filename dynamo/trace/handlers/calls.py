"""Handlers of calls and function creation."""
from __future__ import annotations

from dynamo.breaks import UNSUPPORTED_OBJECT
from dynamo.trace.handlers.registry import handler
from dynamo.variables.base import NULL
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import DictVariable, TupleVariable
from dynamo.variables.builder import new_dict_from
from dynamo.variables.functions import NestedFunctionVariable


@handler()
def CALL(tx, instruction):
    argc = instruction.arg
    values = tx.popn(argc)
    second = tx.pop()
    first = tx.pop()
    if first is NULL:
        function, args = second, values
    else:
        function, args = first, [second, *values]
    kw_count = len(instruction.kw_names)
    kwargs = {}
    if kw_count:
        kwargs = dict(zip(instruction.kw_names, args[-kw_count:]))
        args = args[:-kw_count]
    tx.push(tx.call_directly(function, args, kwargs))


@handler()
def CALL_FUNCTION_EX(tx, instruction):
    kwargs_value = tx.pop() if instruction.arg & 1 else None
    args_value = tx.pop()
    function = tx.pop()
    if tx.stack and tx.peek() is NULL:
        tx.pop()
    args = tx.iterate(args_value)
    kwargs = {}
    if kwargs_value is not None:
        mapping = new_dict_from(tx, kwargs_value)
        kwargs = dict(mapping.items)
        if not all(isinstance(key, str) for key in kwargs):
            raise tx.unsupported(UNSUPPORTED_OBJECT, "keywords must be strings (TypeError)")
    tx.push(tx.call_directly(function, args, kwargs))


@handler()
def MAKE_FUNCTION(tx, instruction):
    flags = instruction.arg
    code = tx.pop()
    closure = tx.pop() if flags & 0x08 else None
    annotations = tx.pop() if flags & 0x04 else None
    kwdefaults = tx.pop() if flags & 0x02 else None
    defaults = tx.pop() if flags & 0x01 else None
    code_object = tx.constant(code, "the code of a nested function")
    if defaults is not None and not isinstance(defaults, TupleVariable):  # a constant tuple
        defaults = TupleVariable(tuple(tx.iterate(defaults)))
    tx.push(NestedFunctionVariable(
        code_object, tx.f_globals, tx.globals_source, defaults,
        kwdefaults if isinstance(kwdefaults, DictVariable) else None,
        tuple(closure.items) if closure is not None else (), annotations))


del ConstantVariable
