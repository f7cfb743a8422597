"""Stage "resume", part 3: regions -- the compiled continuations of a frame with graph breaks.

Input: a code object (the user's function, or itself a region), the instruction where the
continuation starts, the stack layout there, and the stops it must hand control back at.
Output: a region code object, cached per (code, start, layout, exits).

A region is a copy of the code with a new prologue and new ways out:

    prologue   COPY_FREE_VARS; RESUME
               __state = enter(__state, SLOTS)   # writes the locals, returns the stack
               push __state[0], __state[1], ... (PUSH_NULL where the layout has a NULL)
               del __state; jump to the start
    exits      at each loop-header stop:  return leave((stack items...), tag, SLOTS)
               each `return value`:        return leave((value,), RETURN, SLOTS)

`enter`/`leave` (dynamo._frame_state) move locals in and out by slot; a state is
`(stack items, locals)` and a region returns `(tag, stack items, locals)`. The locals are
the original function's plain local variables, in a fixed order (`state_names`), UNBOUND where
unset. Cells are not copied: the original's cell variables become free variables of the region,
and the frame that calls it passes its own cells as the closure.

The frame hook sees a region as an ordinary function and compiles it like one: the tracer
starts at the prologue (it models `enter`/`leave`), so a region is one graph unless it has a
graph break of its own, in which case it gets a skeleton of its own (`skeleton.py`).
"""
from __future__ import annotations

import dataclasses
import weakref
from types import CodeType
from typing import Optional

from bytecode import Bytecode, CellVar, CompilerFlags, FreeVar, Instr, Label, TryBegin, TryEnd

from dynamo import _frame_state
from dynamo.instructions import DecodedCode, decode
from dynamo.resume import emit
from dynamo.resume.analysis import Layout
from dynamo.rewrite import GENERATED_STACK, stack_size
from dynamo.instructions.decoding import decode_bytecode as decode_body
from dynamo.rewrite.replacement import prologue_of
from dynamo.rewrite import arg_slot_count

RETURN_TAG = 0
STATE = "__state"
STACK = "__framejit_stack"


class Placeholder:
    """A constant patched once the final code object (and so its slot numbering) is known."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


@dataclasses.dataclass(frozen=True)
class RegionInfo:
    """What a region code object is a continuation of."""

    base: CodeType  # the code it is a copy of
    origin: CodeType  # the user's function it ultimately comes from
    start: int  # instruction index in `base` where it starts
    layout: Layout
    state_names: tuple  # the locals a state carries, in order
    raw_items: tuple = ()  # stack items handed over untouched (a nested stop's inner state)


_regions: "weakref.WeakKeyDictionary[CodeType, RegionInfo]" = weakref.WeakKeyDictionary()
_cache: "weakref.WeakKeyDictionary[CodeType, dict]" = weakref.WeakKeyDictionary()
_tags: "weakref.WeakKeyDictionary[CodeType, dict]" = weakref.WeakKeyDictionary()
_next_tag = [RETURN_TAG + 1]


def region_info(code: CodeType) -> Optional[RegionInfo]:
    return _regions.get(code)


def origin_of(code: CodeType) -> CodeType:
    info = _regions.get(code)
    return code if info is None else info.origin


def tag_of(code: CodeType, index: int) -> int:
    """The tag a region returns when it reaches stop `index` of `code` (unique per process)."""
    tags = _tags.setdefault(code, {})
    if index not in tags:
        tags[index] = _next_tag[0]
        _next_tag[0] += 1
    return tags[index]


def state_names(code: CodeType) -> tuple:
    """The plain local variables a state of `code` carries (cells travel as closures)."""
    info = _regions.get(code)
    if info is not None:
        return info.state_names
    return tuple(name for name in code.co_varnames if name not in code.co_cellvars)


def closure_names(code: CodeType) -> tuple:
    """The free variables of every region of `code`: its free variables, then its cells."""
    info = _regions.get(code)
    return code.co_freevars if info is not None else code.co_freevars + code.co_cellvars


def slot_index(code: CodeType, name: str) -> int:
    """The index of `name` among the frame's local slots (CPython's localsplus order)."""
    if name in code.co_varnames:
        return code.co_varnames.index(name)
    cells = [cell for cell in code.co_cellvars if cell not in code.co_varnames]
    if name in cells:
        return len(code.co_varnames) + cells.index(name)
    if name in code.co_freevars:
        return len(code.co_varnames) + len(cells) + code.co_freevars.index(name)
    return -1


def slots_of(code: CodeType, names: tuple) -> tuple:
    return tuple(slot_index(code, name) for name in names)


def entry_position(decoded: DecodedCode, index: int) -> int:
    """The position in the decoded body where instruction `index` begins (a 3.11 call begins
    at its KW_NAMES/PRECALL)."""
    return min(origin for origin, owner in decoded.by_origin.items() if owner == index)


def region_for(base: CodeType, start: int, layout: Layout, exits: dict,
               inner: tuple = ()) -> CodeType:
    """The region of `base` starting at instruction `start` (cached). `exits` maps the index
    of each loop-header stop to its (tag, layout). With `inner` (a nested stop's
    `InnerFrame`s, outermost first), the region first finishes the call it made, `inner[0]`,
    whose own region finishes `inner[1]` in turn, and so on: every caller's frame is live
    while its callee finishes, as in eager (tracebacks, `sys._getframe`)."""
    key = (start, layout, tuple(sorted(exits.items())), inner)
    per_code = _cache.setdefault(base, {})
    code = per_code.get(key)
    if code is None:
        codes = ()
        if inner:
            callee, rest = inner[0], inner[1:]
            # a caller's layout ends with its callee's result; a region finishing calls of
            # its own takes their states there instead (two raw items, as this one does)
            callee_layout = callee.layout[:-1] + (False, False) if rest else callee.layout
            codes = (region_for(callee.code, callee.start, callee_layout, {}, rest),)
        code = per_code[key] = _build(base, start, layout, exits, codes)
        raw = (_items(layout[:-2]), _items(layout[:-2]) + 1) if codes else ()
        _regions[code] = RegionInfo(base, origin_of(base), start, layout, state_names(base),
                                    raw)
    return code


def _items(layout: Layout) -> int:
    return sum(1 for is_null in layout if not is_null)


def _build(base: CodeType, start: int, layout: Layout, exits: dict,
           nested: tuple = ()) -> CodeType:
    decoded = decode(base)
    body = decode_body(base)
    is_region = base in _regions
    slots = Placeholder("slots")
    lineno = base.co_firstlineno
    entry = Label()
    exit_at = {entry_position(decoded, index): tag_layout for index, tag_layout in
               exits.items()}
    start_at = entry_position(decoded, start)
    skip = {id(item) for item in prologue_of(body)}
    items: list = []
    for position, item in enumerate(body):
        if id(item) in skip:
            continue
        if position in exit_at:
            tag, exit_layout = exit_at[position]
            items += _exit(tag, exit_layout, slots, _line(item, lineno))
        if position == start_at:
            items.append(entry)
        if isinstance(item, Instr) and not is_region and item.name in ("RETURN_VALUE",
                                                                        "RETURN_CONST"):
            items += _return_exit(item, slots)
        elif isinstance(item, Instr) and not is_region:
            items.append(_free_instead_of_cell(item))
        else:
            items.append(item)
    freevars = closure_names(base)
    prologue = ([Instr("COPY_FREE_VARS", len(freevars), lineno=lineno)] if freevars else []) + \
        [Instr("RESUME", 0, lineno=lineno)] + \
        _enter(layout, slots, lineno, nested, _line(decoded.instructions[start - 1], lineno)
               if nested else lineno,
               _covering(body, entry_position(decoded, start - 1)) if nested else None) + \
        [emit.Jump(entry, lineno=lineno)]
    region = Bytecode(emit.resolve_jumps(prologue + items))
    region._copy_attr_from(body)
    first = first_argument(base)
    region.argnames = [first, STATE] if first else [STATE]  # see first_argument
    region.argcount, region.posonlyargcount, region.kwonlyargcount = len(region.argnames), 0, 0
    region.flags = CompilerFlags(body.flags & ~(CompilerFlags.VARARGS |
                                                CompilerFlags.VARKEYWORDS | CompilerFlags.NOFREE))
    region.cellvars = []
    region.freevars = list(freevars)
    code = _assemble(region, base, layout)
    code = code.replace(co_name=base.co_name, co_qualname=base.co_qualname,
                        co_filename=base.co_filename, co_firstlineno=base.co_firstlineno)
    return patch_constants(code, {slots: slots_of(code, state_names(base))})


def _assemble(region: Bytecode, base: CodeType, layout: Layout) -> CodeType:
    """The region's code object. It runs the original code at the original depths (at most
    `co_stacksize`), its prologue pushes the layout plus a helper call and its exits pack the
    stack and call a helper: never less than that, whatever `rewrite.stack_size` finds."""
    needed = max(base.co_stacksize, len(layout)) + GENERATED_STACK
    return region.to_code(stacksize=max(stack_size(region), needed),
                          compute_exception_stack_depths=False)


def first_argument(base: CodeType):
    """The local a region keeps in slot 0: the original's first argument, because zero-argument
    `super()` reads `self` from the frame's first slot (`enter` overwrites the placeholder the
    caller passes). None when slot 0 holds no plain argument."""
    if base in _regions:
        name = base.co_varnames[0]
        return None if name == STATE else name
    if arg_slot_count(base) == 0 or not base.co_varnames:
        return None
    name = base.co_varnames[0]
    return None if name in base.co_cellvars else name


def call_arguments(region: CodeType) -> int:
    """How many arguments a region takes: its state, after a placeholder for slot 0."""
    return region.co_argcount


def patch_constants(code: CodeType, values: dict) -> CodeType:
    """Replace placeholder constants by their final values."""
    consts = tuple(values.get(const, const) if isinstance(const, Placeholder) else const
                   for const in code.co_consts)
    return code.replace(co_consts=consts)


def _line(item, default: int) -> int:
    return getattr(item, "lineno", None) or default


def _covering(body: Bytecode, position: int) -> Optional[TryBegin]:
    """The `try` block of `body` that covers the item at `position`, or None."""
    active = None
    for item in body[:position + 1]:
        if isinstance(item, TryBegin):
            active = item
        elif isinstance(item, TryEnd):
            active = None
    return active


def _enter(layout: Layout, slots: Placeholder, lineno: int, nested: tuple,
           call_line: int, handler: Optional[TryBegin] = None) -> list:
    """The prologue's state restore; with `nested`, then the inlined calls' finish, at
    `call_line` (the line of the call they finish: a traceback or `f_lineno` through them
    shows the compiled frame there, as in eager), inside `handler`: the `try` block that
    covers the call in the original, so that an exception out of the callee runs this
    frame's `except` bodies and `with` cleanups (the stack below the call is the original's
    by then)."""
    code = [*emit.call_helper(_frame_state.enter, [[Instr("LOAD_FAST", STATE, lineno=lineno)],
                                                   [Instr("LOAD_CONST", slots, lineno=lineno)]],
                              lineno),
            Instr("STORE_FAST", STATE, lineno=lineno)]
    if not nested:
        return code + emit.push_layout(STATE, layout, lineno) + \
            [Instr("DELETE_FAST", STATE, lineno=lineno)]
    # the stack below the call, then resume_calls(inner states, innermost stack, codes);
    # `__state` goes before the call, which a graph break may leave to run on its own
    # here, not at the top: resume.nested imports this module (a cycle)
    from dynamo.resume.nested import resume_calls
    below = _items(layout[:-2])
    code += emit.push_layout(STATE, layout[:-2], lineno)
    call = emit.call_helper(resume_calls, [
        [Instr("LOAD_FAST", STATE, lineno=lineno), Instr("LOAD_CONST", item, lineno=lineno),
         Instr("BINARY_SUBSCR", lineno=lineno)] for item in (below, below + 1)
    ] + [[Instr("LOAD_CONST", nested, lineno=lineno)]], call_line)
    calling = 2 if emit.PY311 else 1  # PRECALL + CALL, or CALL
    covered = [Instr("DELETE_FAST", STATE, lineno=lineno), *call[-calling:]]
    if handler is not None:
        begin = TryBegin(handler.target, handler.push_lasti, handler.stack_depth)
        covered = [begin, *covered, TryEnd(begin)]
    return code + call[:-calling] + covered


def _exit(tag: int, layout: Layout, slots: Placeholder, lineno: int) -> list:
    """[..., the stop's stack] -> return (tag, stack items, locals)."""
    return [*emit.pack_layout(layout, lineno),
            *emit.call_helper_on_top(_frame_state.leave, (tag, slots), lineno),
            Instr("RETURN_VALUE", lineno=lineno)]


def _return_exit(item: Instr, slots: Placeholder) -> list:
    lineno = item.lineno
    value = [Instr("LOAD_CONST", item.arg, lineno=lineno)] if item.name == "RETURN_CONST" else []
    return value + _exit(RETURN_TAG, (False,), slots, lineno)


def _free_instead_of_cell(item: Instr) -> Instr:
    if isinstance(item.arg, CellVar):
        return Instr(item.name, FreeVar(item.arg.name), location=item.location)
    return item
