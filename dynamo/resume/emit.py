"""Stage "resume", part 2: small instruction sequences shared by skeletons and regions.

Input: what to emit (a call of a helper on values already on the stack, a stack layout to
rebuild from a tuple, a jump). Output: lists of `bytecode.Instr`. Jumps are emitted as
`Jump` placeholders and resolved once the final order of instructions is known, because
CPython 3.11 spells forward and backward jumps differently and 3.12 has no backward
conditional jump.
"""
from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any, Optional

from bytecode import Compare, Instr, Label, TryBegin, TryEnd

PY311 = sys.version_info[:2] == (3, 11)


@dataclasses.dataclass(eq=False)
class Jump:
    """A jump whose direction is decided at layout time (`condition`: None, True, False)."""

    target: Label
    condition: Optional[bool] = None
    lineno: Optional[int] = None


def resolve_jumps(items: list) -> list:
    """Replace `Jump` placeholders with real jump instructions for the running CPython."""
    positions = {id(item): index for index, item in enumerate(items) if isinstance(item, Label)}
    resolved = []
    for index, item in enumerate(items):
        if not isinstance(item, Jump):
            resolved.append(item)
            continue
        forward = positions[id(item.target)] > index
        resolved.append(_jump_instruction(item, forward))
    return resolved


def _jump_instruction(jump: Jump, forward: bool) -> Instr:
    direction = "FORWARD" if forward else "BACKWARD"
    if jump.condition is None:
        return Instr(f"JUMP_{direction}", jump.target, lineno=jump.lineno)
    truth = "TRUE" if jump.condition else "FALSE"
    if PY311:
        return Instr(f"POP_JUMP_{direction}_IF_{truth}", jump.target, lineno=jump.lineno)
    if not forward:
        raise AssertionError("CPython 3.12 has no backward conditional jump")
    return Instr(f"POP_JUMP_IF_{truth}", jump.target, lineno=jump.lineno)


def call(count: int, lineno: int) -> list:
    """Call with `count` arguments: [NULL, callable, args...] -> [result]."""
    precall = [Instr("PRECALL", count, lineno=lineno)] if PY311 else []
    return [*precall, Instr("CALL", count, lineno=lineno)]


def transparent_call(call_instructions: list, lineno: int) -> tuple[list, list]:
    """`call_instructions` (a call of another frame of the same function: a region) inside a
    `try` whose handler takes this frame's entry off the exception's traceback and re-raises,
    so a traceback through a frame with graph breaks shows the user's function once, at the
    line that raised, as in eager. Returns (the wrapped call, the handler for the tail)."""
    handler, cleanup = Label(), Label()
    outer = TryBegin(handler, push_lasti=False, stack_depth=0)  # nothing below is needed
    inner = TryBegin(cleanup, push_lasti=True, stack_depth=1)
    wrapped = [outer, *call_instructions, TryEnd(outer)]
    tail = [handler, Instr("PUSH_EXC_INFO", lineno=lineno), inner,
            Instr("COPY", 1, lineno=lineno),
            *call_helper_on_top(drop_own_traceback_entry, (), lineno),
            Instr("POP_TOP", lineno=lineno), Instr("RERAISE", 0, lineno=lineno), TryEnd(inner),
            cleanup, Instr("COPY", 3, lineno=lineno), Instr("POP_EXCEPT", lineno=lineno),
            Instr("RERAISE", 1, lineno=lineno)]
    return wrapped, tail


def drop_own_traceback_entry(error: BaseException) -> None:
    """Take the calling frame's entry off the head of `error`'s traceback (RERAISE adds none
    back)."""
    entry = error.__traceback__
    if entry is not None and entry.tb_frame is sys._getframe(1):
        error.__traceback__ = entry.tb_next


def guarded_copy(copied: list, exit_jump: Jump, active: Optional[TryBegin], line_of_call,
                 calls: tuple) -> tuple[list, Optional[TryBegin]]:
    """A nested stop's copied callee instructions inside a `try` whose handler puts the
    inlined calls' frames back into the exception's traceback (`restore_inlined_frames`)
    and re-raises where the compiled frame's call is, inside the frame's own `try` blocks:
    `active` (the user's block covering the call, or None) is split around the copy and
    continued by the block returned. `line_of_call` is the call's (line, end line, column,
    end column); `calls` holds (code, line) of each inlined call, outermost first."""
    handler = Label()
    lineno = line_of_call[0]
    depth = 0 if active is None else active.stack_depth  # what the frame's handler keeps
    mine = TryBegin(handler, push_lasti=False, stack_depth=depth)
    items = [] if active is None else [TryEnd(active)]
    items += [mine, *copied, TryEnd(mine)]
    resumed = None
    if active is not None:
        resumed = TryBegin(active.target, push_lasti=active.push_lasti,
                           stack_depth=active.stack_depth)
        items.append(resumed)
    items += [exit_jump, handler, Instr("COPY", 1, lineno=lineno),
              *call_helper_on_top(restore_inlined_frames, (line_of_call, calls), lineno),
              Instr("POP_TOP", lineno=lineno), Instr("RERAISE", 0, lineno=lineno)]
    return items, resumed


def restore_inlined_frames(error: BaseException, line_of_call: tuple, calls: tuple) -> None:
    """An exception out of a nested stop's copied instructions: the calling frame's entry
    (at the callee's line) becomes the frame's own call line followed by one entry per
    inlined call, so the traceback lists the frames eager would (program fuzzer P15). The
    inlined calls' entries hold stand-in frames of their names and files."""
    entry = error.__traceback__
    frame = sys._getframe(1)
    if entry is None or entry.tb_frame is not frame:
        return
    rest = entry.tb_next
    for code, line in reversed(calls):
        rest = types.TracebackType(rest, _stand_in_frame(code, line), 0, line)
    lasti = next((2 * index for index, position in enumerate(frame.f_code.co_positions())
                  if position == line_of_call), entry.tb_lasti)
    error.__traceback__ = types.TracebackType(rest, frame, lasti, line_of_call[0])


_STAND_IN = compile("def stand_in(): return getframe()\n", "<framejit>", "exec").co_consts[0]


def _stand_in_frame(code: types.CodeType, line: int) -> types.FrameType:
    """A finished frame whose code carries `code`'s name and file and starts at `line`."""
    named = _STAND_IN.replace(co_name=code.co_name, co_qualname=code.co_qualname,
                              co_filename=code.co_filename, co_firstlineno=line)
    return types.FunctionType(named, {"getframe": sys._getframe})()


def call_helper_on_top(helper: Any, extra_constants: tuple, lineno: int) -> list:
    """[..., value] -> [..., helper(value, *extra_constants)]."""
    return [Instr("PUSH_NULL", lineno=lineno), Instr("SWAP", 2, lineno=lineno),
            Instr("LOAD_CONST", helper, lineno=lineno), Instr("SWAP", 2, lineno=lineno),
            *[Instr("LOAD_CONST", value, lineno=lineno) for value in extra_constants],
            *call(1 + len(extra_constants), lineno)]


def call_helper(helper: Any, arguments: list, lineno: int) -> list:
    """[...] -> [..., helper(*arguments)] where `arguments` are instruction lists."""
    loaded = [instr for argument in arguments for instr in argument]
    return [Instr("PUSH_NULL", lineno=lineno), Instr("LOAD_CONST", helper, lineno=lineno),
            *loaded, *call(len(arguments), lineno)]


def push_layout(holder: str, layout: tuple, lineno: int) -> list:
    """Push a stack from the tuple in local `holder`: its items in order, NULL where the layout
    says so (the tuple holds only the non-NULL items)."""
    code, position = [], 0
    for is_null in layout:
        if is_null:
            code.append(Instr("PUSH_NULL", lineno=lineno))
            continue
        code += [Instr("LOAD_FAST", holder, lineno=lineno),
                 Instr("LOAD_CONST", position, lineno=lineno),
                 Instr("BINARY_SUBSCR", lineno=lineno)]
        position += 1
    return code


def pop_null(lineno: int) -> list:
    """[..., NULL] -> [...]: a NULL can only leave the stack as the callable slot of a call."""
    return [Instr("LOAD_CONST", _nothing, lineno=lineno), *call(0, lineno),
            Instr("POP_TOP", lineno=lineno)]


def _nothing():
    return None


def pack_layout(layout: tuple, lineno: int) -> list:
    """[..., the stack of `layout`] -> [..., (items without NULLs,)].

    NULLs cannot go into a tuple: each run of items above a NULL is packed, the NULL swapped
    on top and called away, and the nested tuples are flattened at the end.
    """
    code, runs, run = [], [], 0
    for is_null in layout:
        if is_null:
            runs.append(run)
            run = 0
        else:
            run += 1
    if not runs:
        return [Instr("BUILD_TUPLE", len(layout), lineno=lineno)]
    code.append(Instr("BUILD_TUPLE", run, lineno=lineno))  # the top run
    for below in reversed(runs):
        code += [Instr("SWAP", 2, lineno=lineno), *pop_null(lineno)]
        code.append(Instr("BUILD_TUPLE", below + 1, lineno=lineno))  # (*run, nested)
    return code + call_helper_on_top(flatten, (len(runs) + 1,), lineno)


def flatten(nested: tuple, levels: int) -> tuple:
    """(a, (b, c, (d,))) with 3 levels -> (a, b, c, d): undo `pack_layout`'s nesting."""
    items: list = []
    for _ in range(levels - 1):
        items.extend(nested[:-1])
        nested = nested[-1]
    items.extend(nested)
    return tuple(items)


def tag_test(tag: int, handler: Label, lineno: int) -> list:
    """[..., tag] -> [..., tag], jumping to `handler` when it equals `tag`."""
    return [Instr("COPY", 1, lineno=lineno), Instr("LOAD_CONST", tag, lineno=lineno),
            Instr("COMPARE_OP", Compare.EQ, lineno=lineno), Jump(handler, True, lineno)]
