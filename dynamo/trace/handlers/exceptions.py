"""Handlers of `raise`, `try`/`except`/`finally` and exceptions leaving `with` blocks.

An exception raised in traced code travels as `RaisedInTrace`; the interpreter hands it to
`unwind`, which jumps to the handler the exception table names for the current instruction
(with the value stack cut to the handler's depth), or passes it to the calling frame. The root
frame turns an uncaught exception into a reason to run the frame eagerly, where it raises.
"""
from __future__ import annotations

from dynamo.breaks import RAISE, UNSUPPORTED_OBJECT, Unsupported
from dynamo.trace.handlers.registry import handler
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.exceptions import ExceptionVariable, RaisedInTrace, is_exception_class
from dynamo.variables.objects import ClassVariable


def unwind(tx, raised: RaisedInTrace) -> None:
    """Deliver `raised` to this frame's innermost handler, or re-raise it to the caller."""
    covering = tx.current.handler if tx.current is not None else None
    if covering is None:
        if tx.parent is None:
            raise Unsupported(RAISE, f"{raised.exception.message()} is raised and not caught "
                              "inside the compiled region", tx.location()) from None
        raise raised
    del tx.stack[covering.depth:]
    if covering.push_lasti:
        tx.push(ConstantVariable(tx.current.index))
    tx.push(raised.exception)
    tx.jump(covering.target)


def _as_exception(tx, value) -> ExceptionVariable:
    """`raise X` accepts an exception class (instantiated with no arguments) or instance."""
    if isinstance(value, ExceptionVariable):
        return value
    cls = value.as_constant() if value.is_constant() else None
    if is_exception_class(cls):
        result = tx.call(value, [], {})
        if isinstance(result, ExceptionVariable):
            return result
    raise tx.unsupported(UNSUPPORTED_OBJECT, f"raising {value.describe()}")


@handler()
def RAISE_VARARGS(tx, instruction):
    if instruction.arg == 0:
        current = tx.state.handled_exception
        if current is None:
            raise tx.unsupported(RAISE, "a bare `raise` with no active exception")
        raise RaisedInTrace(current)
    cause = tx.pop() if instruction.arg == 2 else None
    exception = _as_exception(tx, tx.pop())
    context = tx.state.handled_exception
    if context is not None and context is not exception:
        exception.state.contents["__context__"] = context
    if cause is not None:
        exception.state.contents["__cause__"] = cause if cause.is_constant() and \
            cause.as_constant() is None else _as_exception(tx, cause)
        exception.state.contents["__suppress_context__"] = ConstantVariable(True)
    raise RaisedInTrace(exception)


@handler()
def RERAISE(tx, instruction):
    exception = tx.pop()
    if not isinstance(exception, ExceptionVariable):
        raise tx.unsupported(RAISE, "re-raising a value that is not an exception")
    raise RaisedInTrace(exception)


@handler()
def PUSH_EXC_INFO(tx, instruction):
    exception = tx.pop()
    previous = tx.state.handled_exception
    tx.push(previous if previous is not None else ConstantVariable(None))
    tx.state.handled_exception = exception
    tx.push(exception)


@handler()
def POP_EXCEPT(tx, instruction):
    previous = tx.pop()
    tx.state.handled_exception = None if previous.is_constant() and \
        previous.as_constant() is None else previous


@handler()
def CHECK_EXC_MATCH(tx, instruction):
    classes = tx.constant(tx.pop(), "the class in an `except` clause")
    exception = tx.peek()
    tx.push(ConstantVariable(issubclass(exception.python_type(), classes)))


@handler()
def WITH_EXCEPT_START(tx, instruction):
    exception = tx.peek()
    exit_function = tx.peek(4)
    arguments = [ClassVariable(exception.python_type()), exception, ConstantVariable(None)]
    tx.push(tx.call(exit_function, arguments, {}))
