"""Handlers of jumps, loops, `with`, `match`, `raise` and `assert`."""
from __future__ import annotations

from dynamo.breaks import UNSUPPORTED_BYTECODE, UNSUPPORTED_OBJECT
from dynamo.trace.handlers.registry import handler
from dynamo.variables.base import NULL
from dynamo.variables.constant import ConstantVariable
from dynamo.variables import operators
from dynamo.variables.builtins import _isinstance, length, python_type
from dynamo.variables.containers import DictVariable, TupleVariable
from dynamo.variables.contexts import enter_context
from dynamo.variables.iterators import GeneratorVariable, IteratorVariable, get_iterator
from dynamo.variables.objects import tx_getattr


@handler()
def JUMP(tx, instruction):
    tx.jump(instruction.target)


def _is_none(tx, value) -> bool:
    return operators.identity(tx, value, ConstantVariable(None))


@handler()
def POP_JUMP_IF_TRUE(tx, instruction):
    if tx.truth(tx.pop()):
        tx.jump(instruction.target)


@handler()
def POP_JUMP_IF_FALSE(tx, instruction):
    if not tx.truth(tx.pop()):
        tx.jump(instruction.target)


@handler()
def POP_JUMP_IF_NONE(tx, instruction):
    if _is_none(tx, tx.pop()):
        tx.jump(instruction.target)


@handler()
def POP_JUMP_IF_NOT_NONE(tx, instruction):
    if not _is_none(tx, tx.pop()):
        tx.jump(instruction.target)


@handler(until=(3, 12))
def JUMP_IF_TRUE_OR_POP(tx, instruction):
    if tx.truth(tx.peek()):
        tx.jump(instruction.target)
    else:
        tx.pop()


@handler(until=(3, 12))
def JUMP_IF_FALSE_OR_POP(tx, instruction):
    if not tx.truth(tx.peek()):
        tx.jump(instruction.target)
    else:
        tx.pop()


@handler()
def GET_ITER(tx, instruction):
    tx.push(get_iterator(tx, tx.pop()))


@handler()
def FOR_ITER(tx, instruction):
    iterator = tx.peek()
    if not hasattr(iterator, "next_item"):  # an iterator made before the frame ran
        raise tx.unsupported(UNSUPPORTED_OBJECT, f"iterating over {iterator.describe()}, "
                             "an iterator created outside the compiled region")
    item = iterator.next_item(tx)
    if item is None:
        if tx.decoded.instructions[instruction.target].opname == "END_FOR":
            tx.pop()  # 3.12: FOR_ITER pops the iterator and skips END_FOR
            tx.jump(instruction.target + 1)
        else:
            tx.pop()
            tx.jump(instruction.target)
    else:
        tx.push(item)


@handler(since=(3, 12))
def END_FOR(tx, instruction):
    tx.pop()
    tx.pop()


@handler()
def BEFORE_WITH(tx, instruction):
    manager = tx.pop()
    exit_function, entered = enter_context(tx, manager)
    tx.push(exit_function)
    tx.push(entered)


@handler()
def GET_LEN(tx, instruction):
    tx.push(ConstantVariable(length(tx, tx.peek())))


@handler()
def MATCH_SEQUENCE(tx, instruction):
    kind = python_type(tx, tx.peek())
    import collections.abc
    tx.push(ConstantVariable(issubclass(kind, collections.abc.Sequence) and
                             not issubclass(kind, (str, bytes, bytearray))))


@handler()
def MATCH_MAPPING(tx, instruction):
    import collections.abc
    tx.push(ConstantVariable(issubclass(python_type(tx, tx.peek()), collections.abc.Mapping)))


@handler()
def MATCH_KEYS(tx, instruction):
    keys = tx.constant(tx.peek(), "match keys")
    subject = tx.peek(2)
    if not isinstance(subject, DictVariable):
        raise tx.unsupported(UNSUPPORTED_OBJECT, "mapping pattern on a non-dict")
    if all(key in subject.items for key in keys):
        tx.push(TupleVariable(tuple(subject.items[key] for key in keys)))
    else:
        tx.push(ConstantVariable(None))


_SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


@handler()
def MATCH_CLASS(tx, instruction):
    """`case Class(p0, p1, name=p2)`: a tuple of the matched attributes, or None."""
    names = tx.constant(tx.pop(), "class pattern keywords")
    cls_variable = tx.pop()
    subject = tx.pop()
    cls = tx.constant(cls_variable, "the class of a class pattern")
    if not _isinstance(tx, subject, cls_variable).as_constant():
        tx.push(ConstantVariable(None))
        return
    count = instruction.arg
    if count == 1 and cls in _SELF_MATCHING:
        positional = [subject]
    else:
        match_args = getattr(cls, "__match_args__", ())
        if count > len(match_args):
            raise tx.unsupported(UNSUPPORTED_OBJECT, f"{cls.__name__}() accepts {len(match_args)}"
                                 f" positional sub-patterns ({count} given) (TypeError)")
        positional = [tx_getattr(tx, subject, name) for name in match_args[:count]]
    keywords = []
    for name in names:
        if not subject.has_attribute(tx, name):
            tx.push(ConstantVariable(None))
            return
        keywords.append(tx_getattr(tx, subject, name))
    tx.push(TupleVariable(tuple(positional + keywords)))


@handler()
def LOAD_BUILD_CLASS(tx, instruction):
    raise tx.unsupported(UNSUPPORTED_BYTECODE, "a class statement inside a compiled function")


@handler()
def YIELD_VALUE(tx, instruction):
    if not tx.is_generator:
        raise tx.unsupported(UNSUPPORTED_BYTECODE, "yield")
    tx.yielded = tx.pop()
    tx.push(ConstantVariable(None))  # what `next()` sends back in


@handler()
def GET_YIELD_FROM_ITER(tx, instruction):
    if not isinstance(tx.peek(), IteratorVariable):
        tx.push(get_iterator(tx, tx.pop()))


@handler()
def SEND(tx, instruction):
    """`yield from` / `await`: the receiver's next value, or its return value at the end."""
    sent = tx.peek()
    receiver = tx.peek(2)
    if not (sent.is_constant() and sent.as_constant() is None):
        raise tx.unsupported(UNSUPPORTED_BYTECODE, "sending a value into a generator")
    item = receiver.next_item(tx)
    if item is not None:
        tx.stack[-1] = item
        return
    returned = receiver.returned_value() if isinstance(receiver, GeneratorVariable) else None
    tx.pop()
    if _SEND_POPS_RECEIVER:
        tx.pop()
    tx.push(returned if returned is not None else ConstantVariable(None))
    tx.jump(instruction.target)


_SEND_POPS_RECEIVER = __import__("sys").version_info < (3, 12)


@handler(since=(3, 12))
def END_SEND(tx, instruction):
    value = tx.pop()
    tx.pop()
    tx.push(value)


@handler()
def RETURN_GENERATOR(tx, instruction):
    if not tx.is_generator:
        raise tx.unsupported(UNSUPPORTED_BYTECODE, "a generator")
    tx.push(ConstantVariable(None))  # popped by the POP_TOP that follows


@handler()
def SETUP_ANNOTATIONS(tx, instruction):
    raise tx.unsupported(UNSUPPORTED_BYTECODE, "annotations in a function body")


del NULL
