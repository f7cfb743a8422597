"""Handlers of operators, comparisons and subscripts."""
from __future__ import annotations

from dynamo.variables import operators
from dynamo.trace.handlers.registry import handler
from dynamo.variables.constant import ConstantVariable


def _symbol(arg) -> str:
    """bytecode's BinaryOp/Compare enums -> the operator's symbol."""
    from bytecode import BinaryOp, Compare
    if isinstance(arg, BinaryOp):
        return _BINARY_SYMBOLS[arg.name]
    if isinstance(arg, Compare):
        return _COMPARE_SYMBOLS[arg.name]
    return arg


_BINARY_SYMBOLS = {
    "ADD": "+", "AND": "&", "FLOOR_DIVIDE": "//", "LSHIFT": "<<", "MATRIX_MULTIPLY": "@",
    "MULTIPLY": "*", "REMAINDER": "%", "OR": "|", "POWER": "**", "RSHIFT": ">>",
    "SUBTRACT": "-", "TRUE_DIVIDE": "/", "XOR": "^",
}
_BINARY_SYMBOLS.update({"INPLACE_" + name: symbol + "=" for name, symbol in
                        list(_BINARY_SYMBOLS.items())})
_COMPARE_SYMBOLS = {"LT": "<", "LE": "<=", "EQ": "==", "NE": "!=", "GT": ">", "GE": ">="}


@handler()
def BINARY_OP(tx, instruction):
    right = tx.pop()
    left = tx.pop()
    tx.push(operators.binary(tx, _symbol(instruction.arg), left, right))


@handler()
def COMPARE_OP(tx, instruction):
    right = tx.pop()
    left = tx.pop()
    tx.push(operators.compare(tx, _symbol(instruction.arg), left, right))


@handler()
def IS_OP(tx, instruction):
    right = tx.pop()
    left = tx.pop()
    same = operators.identity(tx, left, right)
    tx.push(ConstantVariable(same != bool(instruction.arg)))


@handler()
def CONTAINS_OP(tx, instruction):
    container = tx.pop()
    item = tx.pop()
    found = operators.contains(tx, container, item)
    tx.push(ConstantVariable(found != bool(instruction.arg)))


@handler()
def UNARY_NEGATIVE(tx, instruction):
    tx.push(operators.unary(tx, "-", tx.pop()))


@handler(until=(3, 12))
def UNARY_POSITIVE(tx, instruction):
    tx.push(operators.unary(tx, "+", tx.pop()))


@handler()
def UNARY_INVERT(tx, instruction):
    tx.push(operators.unary(tx, "~", tx.pop()))


@handler()
def UNARY_NOT(tx, instruction):
    tx.push(ConstantVariable(not tx.truth(tx.pop())))


@handler()
def BINARY_SUBSCR(tx, instruction):
    index = tx.pop()
    container = tx.pop()
    tx.push(operators.subscript(tx, container, index))


@handler()
def STORE_SUBSCR(tx, instruction):
    index = tx.pop()
    container = tx.pop()
    value = tx.pop()
    operators.store_subscript(tx, container, index, value)


@handler()
def DELETE_SUBSCR(tx, instruction):
    index = tx.pop()
    container = tx.pop()
    operators.delete_subscript(tx, container, index)


@handler()
def BUILD_SLICE(tx, instruction):
    parts = tx.popn(instruction.arg)
    if len(parts) == 2:
        parts.append(ConstantVariable(None))
    tx.push(operators.slice_of(*parts))


@handler(since=(3, 12))
def BINARY_SLICE(tx, instruction):
    stop = tx.pop()
    start = tx.pop()
    container = tx.pop()
    index = operators.slice_of(start, stop, ConstantVariable(None))
    tx.push(operators.subscript(tx, container, index))


@handler(since=(3, 12))
def STORE_SLICE(tx, instruction):
    stop = tx.pop()
    start = tx.pop()
    container = tx.pop()
    value = tx.pop()
    index = operators.slice_of(start, stop, ConstantVariable(None))
    operators.store_subscript(tx, container, index, value)
