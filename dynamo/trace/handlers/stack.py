"""Handlers that only move values: the stack, the prologue, returns."""
from __future__ import annotations

from dynamo.trace.handlers.registry import handler
from dynamo.variables.base import NULL
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.functions import CellVariable


@handler()
def NOP(tx, instruction):
    pass


@handler()
def RESUME(tx, instruction):
    pass


@handler()
def COPY_FREE_VARS(tx, instruction):
    pass  # free variables are already in `tx.cells`


@handler()
def MAKE_CELL(tx, instruction):
    name = instruction.arg.name if hasattr(instruction.arg, "name") else instruction.arg
    if name not in tx.cells:
        tx.cells[name] = CellVariable.new(tx.take_local(name))


@handler()
def POP_TOP(tx, instruction):
    tx.pop_raw()


@handler()
def PUSH_NULL(tx, instruction):
    tx.push(NULL)


@handler()
def COPY(tx, instruction):
    tx.push(tx.peek_raw(instruction.arg))


@handler()
def SWAP(tx, instruction):
    depth = instruction.arg
    tx.stack[-1], tx.stack[-depth] = tx.stack[-depth], tx.stack[-1]


@handler()
def RETURN_VALUE(tx, instruction):
    tx.returned = tx.pop_raw()


@handler(since=(3, 12))
def RETURN_CONST(tx, instruction):
    tx.returned = ConstantVariable(instruction.arg)
