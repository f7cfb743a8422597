"""Stage "decode": code objects -> instruction lists normalised across CPython 3.11 and 3.12.

Input: a `types.CodeType`. Output: a `DecodedCode` whose `instructions` the symbolic interpreter
walks. Normalisation removes version differences the interpreter should not see:

- 3.11 `PRECALL` disappears and `KW_NAMES` is folded into the `CALL` that follows (`kw_names`);
- `LOAD_METHOD` (3.11) and the method bit of `LOAD_ATTR` (3.12) become `LOAD_ATTR` with
  `method=True`; `LOAD_GLOBAL`'s NULL bit becomes `push_null`;
- forward/backward jump variants become `JUMP`, `POP_JUMP_IF_TRUE/FALSE/NONE/NOT_NONE`;
- `LOAD_FAST_CHECK` becomes `LOAD_FAST`; `CACHE`, `EXTENDED_ARG` and pseudo-instructions go.

Jump targets become instruction indices; every instruction records the exception handler that
covers it (`handler`), and `origin` — its position in the `bytecode.Bytecode` the rewrite stage
copies when it builds resume functions. Decoding is cached per code object (weakly).
"""
from __future__ import annotations

import dataclasses
import sys
import weakref
from types import CodeType
from typing import Any, Optional

from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd

from dynamo.instructions.decoding import decode_bytecode

PY312 = sys.version_info >= (3, 12)

_RENAMED = {
    "JUMP_FORWARD": "JUMP", "JUMP_BACKWARD": "JUMP", "JUMP_BACKWARD_NO_INTERRUPT": "JUMP",
    "POP_JUMP_FORWARD_IF_TRUE": "POP_JUMP_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE": "POP_JUMP_IF_TRUE",
    "POP_JUMP_FORWARD_IF_FALSE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_FALSE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_FORWARD_IF_NONE": "POP_JUMP_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE": "POP_JUMP_IF_NONE",
    "POP_JUMP_FORWARD_IF_NOT_NONE": "POP_JUMP_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE": "POP_JUMP_IF_NOT_NONE",
    "LOAD_FAST_CHECK": "LOAD_FAST", "LOAD_METHOD": "LOAD_ATTR",
}
# opcode names `decode` gives that the running Python's `dis.opmap` may lack (3.11 has no JUMP)
NORMALISED_NAMES = frozenset(_RENAMED.values())
_DROPPED = frozenset({"PRECALL", "CACHE", "EXTENDED_ARG", "KW_NAMES"})


@dataclasses.dataclass(frozen=True)
class Handler:
    """The exception-table entry covering an instruction."""

    target: int  # instruction index of the handler
    depth: int  # value-stack depth the handler starts from
    push_lasti: bool


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One normalised instruction."""

    opname: str
    arg: Any
    index: int
    origin: int  # index of the `bytecode.Instr` in `DecodedCode.body`
    lineno: Optional[int]
    target: Optional[int] = None  # jump target (instruction index)
    method: bool = False  # LOAD_ATTR: push (method, self) or (NULL, attribute)
    push_null: bool = False  # LOAD_GLOBAL: push NULL below the global
    kw_names: tuple = ()  # CALL: names of the trailing keyword arguments
    handler: Optional[Handler] = None

    def __str__(self) -> str:
        arg = "" if self.arg is None else f" {self.arg!r}"
        jump = "" if self.target is None else f" -> {self.target}"
        return f"{self.index:4d} {self.opname}{arg}{jump}"


@dataclasses.dataclass
class DecodedCode:
    """A code object's normalised instructions plus what resume generation needs."""

    code: CodeType
    instructions: list[Instruction]
    body: Bytecode  # the decoded `bytecode` form; treat as read-only
    by_origin: dict[int, int]  # body index -> instruction index (for real instructions)


_cache: "weakref.WeakKeyDictionary[CodeType, DecodedCode]" = weakref.WeakKeyDictionary()


def decode(code: CodeType) -> DecodedCode:
    """The normalised instructions of `code` (cached per code object)."""
    try:
        return _cache[code]
    except (KeyError, TypeError):
        pass
    decoded = _decode(code)
    try:
        _cache[code] = decoded
    except TypeError:
        pass
    return decoded


def _normalise_arg(instr: Instr) -> tuple[str, Any, dict]:
    name = _RENAMED.get(instr.name, instr.name)
    arg, extra = instr.arg, {}
    if instr.name == "LOAD_METHOD":
        extra["method"] = True
    elif instr.name == "LOAD_ATTR" and isinstance(arg, tuple):
        extra["method"], arg = arg
    elif instr.name == "LOAD_GLOBAL" and isinstance(arg, tuple):
        extra["push_null"], arg = arg
    elif instr.name == "LOAD_SUPER_ATTR" and isinstance(arg, tuple):
        extra["method"], arg = arg[0], arg[2]
    return name, arg, extra


def _decode(code: CodeType) -> DecodedCode:
    body = decode_bytecode(code)
    pending, label_index, jumps, instructions = [], {}, [], []
    by_origin: dict[int, int] = {}
    active_try: Optional[TryBegin] = None
    kw_names: tuple = ()
    for origin, item in enumerate(body):
        if isinstance(item, Label):
            pending.append(item)
            continue
        if isinstance(item, TryBegin):
            active_try = item
            continue
        if isinstance(item, TryEnd):
            active_try = None
            continue
        if not isinstance(item, Instr):
            continue
        if item.name == "KW_NAMES":
            kw_names = tuple(code.co_consts[item.arg] if isinstance(item.arg, int) else item.arg)
        if item.name in _DROPPED:
            pending_jump_target = len(instructions)
            for label in pending:
                label_index[label] = pending_jump_target
            pending = []
            by_origin[origin] = len(instructions)
            continue
        index = len(instructions)
        for label in pending:
            label_index[label] = index
        pending = []
        name, arg, extra = _normalise_arg(item)
        if name == "CALL":
            extra["kw_names"], kw_names = kw_names, ()
        instruction = Instruction(name, None if isinstance(arg, Label) else arg, index, origin,
                                  item.lineno, **extra)
        if isinstance(arg, Label):
            jumps.append((index, arg))
        if active_try is not None:
            jumps.append((index, active_try))
        instructions.append(instruction)
        by_origin[origin] = index
    for label in pending:
        label_index[label] = len(instructions)
    _link(instructions, jumps, label_index)
    return DecodedCode(code, instructions, body, by_origin)


def _link(instructions: list, jumps: list, label_index: dict) -> None:
    """Resolves each jump's label to its target index and each instruction inside a `try` to
    its exception handler, in place."""
    for index, link in jumps:
        instruction = instructions[index]
        if isinstance(link, Label):
            instructions[index] = dataclasses.replace(instruction, target=label_index[link])
        else:
            handler = Handler(label_index[link.target], link.stack_depth, link.push_lasti)
            instructions[index] = dataclasses.replace(instruction, handler=handler)
