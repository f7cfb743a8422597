"""Stage "rewrite": the replacement code object of a fully captured frame.

Input: the original code object, the glue function, and which frame locals (and cells) the glue
takes. Output: a code object with the original's names, cells, free variables and prologue that
calls the glue and returns its result:

    MAKE_CELL / COPY_FREE_VARS / RESUME        (copied: cells exist before anything reads them)
    PUSH_NULL; LOAD_CONST glue; LOAD_FAST x; LOAD_DEREF y; [PRECALL n]; CALL n; RETURN_VALUE
"""
from __future__ import annotations

import sys
from types import CodeType
from typing import Callable

from bytecode import Bytecode, CellVar, FreeVar, Instr

from dynamo.instructions.decoding import decode_bytecode as decode
from dynamo.rewrite import PROLOGUE, assemble

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
    body = Bytecode(prologue_of(original) + glue_call(code, glue, parameters, cell_parameters)
                    + [Instr("RETURN_VALUE", lineno=code.co_firstlineno)])
    body._copy_attr_from(original)
    return assemble(body, code)
