"""Handlers that build and unpack containers, and format strings."""
from __future__ import annotations

from dynamo.breaks import UNSUPPORTED_BYTECODE, UNSUPPORTED_OBJECT
from dynamo.trace.handlers.registry import handler
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import (DictVariable, ListVariable, SetVariable, TupleVariable,
                                         constant_key)
from dynamo.variables import operators
from dynamo.variables.builder import new_dict_from
from dynamo.variables.builtins import format_value
from dynamo.variables.exceptions import ExceptionVariable, python_error


@handler()
def BUILD_TUPLE(tx, instruction):
    tx.push(TupleVariable(tuple(tx.popn(instruction.arg))))


@handler()
def BUILD_LIST(tx, instruction):
    tx.push(ListVariable.new(tx.popn(instruction.arg)))


@handler()
def BUILD_SET(tx, instruction):
    tx.push(SetVariable.new(tx.popn(instruction.arg)))


@handler()
def BUILD_MAP(tx, instruction):
    flat = tx.popn(2 * instruction.arg)
    items = {constant_key(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
    tx.push(DictVariable.new(items))


@handler()
def BUILD_CONST_KEY_MAP(tx, instruction):
    keys = tx.constant(tx.pop(), "dict keys")
    values = tx.popn(instruction.arg)
    tx.push(DictVariable.new(dict(zip(keys, values))))


@handler()
def LIST_APPEND(tx, instruction):
    value = tx.pop()
    target = tx.peek(instruction.arg)
    target.box.touch()  # a list carried across a graph break existed before this frame
    target.items.append(value)


@handler()
def SET_ADD(tx, instruction):
    value = tx.pop()
    target = tx.peek(instruction.arg)
    target.box.touch()
    target.items.setdefault(constant_key(value), value)


@handler()
def MAP_ADD(tx, instruction):
    value = tx.pop()
    key = tx.pop()
    target = tx.peek(instruction.arg)
    target.box.touch()
    target.items[constant_key(key)] = value


@handler()
def LIST_EXTEND(tx, instruction):
    values = tx.iterate(tx.pop())
    target = tx.peek(instruction.arg)
    target.box.touch()  # (see LIST_APPEND)
    target.items.extend(values)


@handler()
def SET_UPDATE(tx, instruction):
    values = tx.iterate(tx.pop())
    target = tx.peek(instruction.arg)
    target.box.touch()
    for value in values:
        target.items.setdefault(constant_key(value), value)


@handler()
def DICT_UPDATE(tx, instruction):
    other = new_dict_from(tx, tx.pop())
    target = tx.peek(instruction.arg)
    target.box.touch()
    target.items.update(other.items)


@handler()
def DICT_MERGE(tx, instruction):
    other = new_dict_from(tx, tx.pop())
    target = tx.peek(instruction.arg)
    duplicate = set(target.items) & set(other.items)
    if duplicate:
        raise tx.unsupported(UNSUPPORTED_OBJECT, f"keyword argument {duplicate.pop()!r} given "
                             "twice (TypeError)")
    target.box.touch()
    target.items.update(other.items)


@handler(until=(3, 12))
def LIST_TO_TUPLE(tx, instruction):
    tx.push(TupleVariable(tuple(tx.pop().items)))


@handler(since=(3, 12))
def CALL_INTRINSIC_1(tx, instruction):
    name = getattr(instruction.arg, "name", str(instruction.arg))
    value = tx.pop()
    if name == "INTRINSIC_LIST_TO_TUPLE":
        tx.push(TupleVariable(tuple(value.items)))
    elif name == "INTRINSIC_UNARY_POSITIVE":
        tx.push(operators.unary(tx, "+", value))
    elif name == "INTRINSIC_STOPITERATION_ERROR":  # a generator's exception on its way out
        if isinstance(value, ExceptionVariable) and issubclass(value.python_type(),
                                                               StopIteration):
            value = ExceptionVariable.new(RuntimeError, (ConstantVariable(
                "generator raised StopIteration"),))
        tx.push(value)
    else:
        raise tx.unsupported(UNSUPPORTED_BYTECODE, f"CALL_INTRINSIC_1 {name}")


@handler()
def UNPACK_SEQUENCE(tx, instruction):
    items = tx.iterate(tx.pop())
    if len(items) != instruction.arg:
        if len(items) > instruction.arg:
            raise python_error(ValueError, f"too many values to unpack (expected "
                               f"{instruction.arg})")
        raise python_error(ValueError, f"not enough values to unpack (expected "
                           f"{instruction.arg}, got {len(items)})")
    for item in reversed(items):
        tx.push(item)


@handler()
def UNPACK_EX(tx, instruction):
    items = tx.iterate(tx.pop())
    before, after = instruction.arg & 0xFF, instruction.arg >> 8
    if len(items) < before + after:
        raise python_error(ValueError, f"not enough values to unpack (expected at least "
                           f"{before + after}, got {len(items)})")
    middle = ListVariable.new(items[before:len(items) - after])
    for item in reversed(items[len(items) - after:]):
        tx.push(item)
    tx.push(middle)
    for item in reversed(items[:before]):
        tx.push(item)


@handler()
def FORMAT_VALUE(tx, instruction):
    flags = instruction.arg if isinstance(instruction.arg, int) else 0
    spec = tx.pop() if flags & 0x04 else ConstantVariable("")
    value = tx.pop()
    converter = {0: None, 1: str, 2: repr, 3: ascii}[flags & 0x03]
    tx.push(format_value(tx, value, converter, tx.constant(spec, "a format spec")))


@handler()
def BUILD_STRING(tx, instruction):
    parts = [tx.constant(part, "an f-string part") for part in tx.popn(instruction.arg)]
    tx.push(ConstantVariable("".join(parts)))
