"""Stage "rewrite": the replacement code object of a fully captured frame.

Input: the original code object, the glue function, and which frame locals (and cells) the glue
takes. Output: a code object with the original's names, cells, free variables and prologue that
calls the glue and returns its result:

    MAKE_CELL / COPY_FREE_VARS / RESUME        (copied: cells exist before anything reads them)
    PUSH_NULL; LOAD_CONST glue; LOAD_FAST x; LOAD_DEREF y; [PRECALL n]; CALL n; RETURN_VALUE

A glue that may return `raising.RUN_EAGERLY` (its graph raised) is followed by a test that
then runs the original code, appended unchanged after the prologue, in this same frame.
"""
from __future__ import annotations

import sys
from types import CodeType
from typing import Callable

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label

from dynamo.instructions.decoding import decode_bytecode as decode
from dynamo.rewrite import PROLOGUE, assemble
from dynamo.rewrite.raising import RUN_EAGERLY

PY311 = sys.version_info[:2] == (3, 11)


def prologue_of(body: Bytecode) -> list:
    """The leading MAKE_CELL/COPY_FREE_VARS/RESUME instructions of a decoded body."""
    prologue = []
    for item in body:
        if isinstance(item, Instr) and item.name in PROLOGUE:
            prologue.append(item)
            if item.name == "RESUME":
                break
        elif isinstance(item, Instr):
            break
    return prologue


def load_local(code: CodeType, name: str, lineno: int, as_cell: bool = False) -> Instr:
    """The instruction pushing local `name` (its cell with `as_cell`)."""
    if name in code.co_cellvars:
        return Instr("LOAD_CLOSURE" if as_cell else "LOAD_DEREF", CellVar(name), lineno=lineno)
    if name in code.co_freevars:
        return Instr("LOAD_CLOSURE" if as_cell else "LOAD_DEREF", FreeVar(name), lineno=lineno)
    return Instr("LOAD_FAST", name, lineno=lineno)


def call_instructions(function_loader: list, arguments: list, lineno: int) -> list:
    """PUSH_NULL, the callable, the arguments, then CALL (with PRECALL on 3.11)."""
    count = len(arguments)
    call = [Instr("PRECALL", count, lineno=lineno)] if PY311 else []
    return [Instr("PUSH_NULL", lineno=lineno), *function_loader, *arguments, *call,
            Instr("CALL", count, lineno=lineno)]


def glue_call(code: CodeType, glue: Callable, parameters: list[str],
              cell_parameters: list[str]) -> list:
    """Instructions pushing `glue(*parameters, *cells)` (after the prologue has run)."""
    lineno = code.co_firstlineno
    arguments = [load_local(code, name, lineno) for name in parameters]
    arguments += [load_local(code, name, lineno, as_cell=True) for name in cell_parameters]
    return call_instructions([Instr("LOAD_CONST", glue, lineno=lineno)], arguments, lineno)


def replacement_calling(code: CodeType, glue: Callable, parameters: list[str],
                        cell_parameters: list[str]) -> CodeType:
    """A replacement for `code` that returns `glue(*parameters, *cells)`."""
    original = decode(code)
    prologue = prologue_of(original)
    tail = [Instr("RETURN_VALUE", lineno=code.co_firstlineno)]
    if runs_again(glue):
        start = Label()
        tail = [*if_run_eagerly(start, code.co_firstlineno), *tail, start]
        tail += [item for item in original if not any(item is own for own in prologue)]
    body = Bytecode(prologue + glue_call(code, glue, parameters, cell_parameters) + tail)
    body._copy_attr_from(original)
    return assemble(body, code)


def runs_again(glue: Callable) -> bool:
    """Whether `glue` may return `RUN_EAGERLY` (see `raising`)."""
    path = getattr(glue, "error_path", None)
    return path is not None and path.runs_again


def if_run_eagerly(target: Label, lineno: int) -> list:
    """[result] -> [result], or [] and a jump to `target` when the result is `RUN_EAGERLY`
    (both jumps forward: `target` lies after these instructions)."""
    skip = Label()
    test = "POP_JUMP_FORWARD_IF_FALSE" if PY311 else "POP_JUMP_IF_FALSE"
    return [Instr("COPY", 1, lineno=lineno), Instr("LOAD_CONST", RUN_EAGERLY, lineno=lineno),
            Instr("IS_OP", 0, lineno=lineno), Instr(test, skip, lineno=lineno),
            Instr("POP_TOP", lineno=lineno), Instr("JUMP_FORWARD", target, lineno=lineno), skip]
