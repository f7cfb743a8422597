"""Stage "resume", part 4: the skeleton -- the replacement code of a frame with graph breaks.

Input: the code object, its stops (`analysis.Stop`), and the instructions that call the
entry glue (the graph of everything before the first stop). Output: a replacement code object:

    prologue               MAKE_CELL / COPY_FREE_VARS / RESUME, as in the original
    entry                  result = glue(args...); jump to DISPATCH
    the original code      unchanged and in place, so exception tables, `with` cleanups and
                           line numbers stay right around the instructions that run here;
                           at each stop: a label before it, and after it a jump to the
                           trampoline of each way out (its jump target is redirected too)
    TRAMPOLINE (one per way out of a stop, outside every `try`)
                           state = pack((stack items...), SLOTS)
                           result = function(region code, CELLS)(state); jump to DISPATCH
    DISPATCH               tag = result[0]; one test per stop of this skeleton;
                           RETURN: return result[1][0] (a region skeleton passes every
                           result it does not own straight back to its own caller)
    HANDLER (one per stop) stack = unpack(result, SLOTS)  # writes the locals back
                           push the stack (NULLs where the layout says); jump to the stop

An entry glue whose graph raised may return `RUN_EAGERLY` (`dynamo.rewrite.raising`): the
original code then runs from its start, in order (jumping around nested stops' copies).

Only the stops run in this frame; everything else runs in graphs: the entry glue's, and the
regions', each compiled when the frame hook first sees it called. A region that raises
propagates out of the trampoline, outside every `try` of this frame, because the region's
own copy of the code already ran the handlers that apply.
"""
from __future__ import annotations

from types import CodeType
from typing import Callable

from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd

from dynamo import _frame_state
from dynamo.instructions import decode
from dynamo.resume import emit
from dynamo.resume.analysis import Edge, Stop
from dynamo.resume.regions import (RETURN_TAG, STACK, STATE, Placeholder, closure_names,
                                   entry_position, patch_constants, region_info, slot_index,
                                   slots_of, state_names, tag_of)
from dynamo.rewrite import assemble
from dynamo.instructions.decoding import decode_bytecode as decode_body
from dynamo.rewrite.raising import RUN_EAGERLY
from dynamo.rewrite.replacement import prologue_of

PY312 = emit.PY311 is False


def build_skeleton(base: CodeType, entry_call: list, stops: dict[int, Stop],
                   region_for: Callable[[Edge], CodeType], runs_again: bool = False
                   ) -> CodeType:
    """The replacement of `base` for one compiled entry (see the module docstring).

    `entry_call` pushes the entry glue's result; `region_for(edge)` gives the region code
    object that continues along `edge`. `runs_again`: the entry glue may return
    `RUN_EAGERLY` (its graph raised): the original code then runs from its start, eagerly up
    to the first stop, compiled from there on, as after the stop of a break.
    """
    decoded = decode(base)
    body = decode_body(base)
    lineno = base.co_firstlineno
    slots, cells = Placeholder("slots"), Placeholder("cells")
    dispatch = Label()
    stop_labels = {index: Label() for index, stop in stops.items() if stop.executes}
    trampolines: dict[tuple, Label] = {}
    tail: list = []

    def trampoline(edge: Edge) -> Label:
        key = (edge.target, edge.layout, edge.inner)
        if key not in trampolines:
            label = trampolines[key] = Label()
            # a traceback through a region shows this frame at the line the region starts
            where = _line_of(decoded, edge.target) or lineno
            call, handler = _call_region(region_for(edge), edge, slots, cells, where)
            tail.extend([label, *call, emit.Jump(dispatch, lineno=where), *handler])
        return trampolines[key]

    prologue = prologue_of(body)
    # a region's skeleton: its `__state` argument is spent once the entry glue has read it
    # (the region's own prologue, which deletes it, does not run here): `locals()` at a stop
    # shows the user's variables only
    spent = [Instr("DELETE_FAST", STATE, lineno=lineno)] if region_info(base) is not None \
        else []
    start, again = Label(), Label()
    rerun = [Instr("COPY", 1, lineno=lineno), Instr("LOAD_CONST", RUN_EAGERLY, lineno=lineno),
             Instr("IS_OP", 0, lineno=lineno), emit.Jump(again, True, lineno)] \
        if runs_again else []
    if runs_again:  # the region's `__state` is still there: its own prologue reads it
        tail.extend([again, Instr("POP_TOP", lineno=lineno), emit.Jump(start, lineno=lineno)])
    items = [*prologue, *entry_call, *rerun, *spent, emit.Jump(dispatch, lineno=lineno), start]
    items += _original_code(decoded, body, stops, stop_labels, trampoline, tail,
                            {id(item) for item in prologue}, runs_again)
    items += [dispatch, *_dispatch(base, stops, stop_labels, trampoline, slots, lineno)]
    items += tail
    skeleton = Bytecode(emit.resolve_jumps(items))
    skeleton._copy_attr_from(body)
    code = assemble(skeleton, base)
    values = {slots: slots_of(code, state_names(base)), cells: _cell_slots(code, base)}
    return patch_constants(code, values)


def _line_of(decoded, index: int):
    instructions = decoded.instructions
    return instructions[index].lineno if index < len(instructions) else None


def _cell_slots(code: CodeType, base: CodeType) -> tuple:
    return tuple(slot_index(code, name) for name in closure_names(base))


def _original_code(decoded, body, stops, stop_labels, trampoline, tail, skip,
                   runs_again: bool = False) -> list:
    """The original instructions with labels before the stops and exits after them
    (`runs_again`: they may run in order from the start: jumps around nested stops' copies)."""
    before = {entry_position(decoded, index): index for index in stop_labels}
    after: dict[int, list] = {}
    redirect: dict[int, Label] = {}
    copies: dict[int, Stop] = {}
    for index, stop in stops.items():
        if stop.copied:  # a nested stop runs the callee's instructions where its call is
            copies[entry_position(decoded, index)] = stop
            continue
        if not stop.executes:
            continue
        last = decoded.instructions[stop.last]
        for edge in stop.edges:
            if edge.jumps:
                redirect[last.origin] = _jump_target(edge, trampoline, tail, last)
            else:
                after.setdefault(last.origin, []).append(emit.Jump(trampoline(edge),
                                                                   lineno=last.lineno))
    items: list = []
    active = opened = None  # the `try` block open here (as continued), as the body has it
    continued = {}  # blocks split by a copy: the body's TryBegin -> the one continuing it
    for position, item in enumerate(body):
        if id(item) in skip:
            continue
        around = Label() if position in copies and runs_again else None
        if around is not None:  # reached in order (the code run from its start): the call
            items.append(emit.Jump(around, lineno=getattr(body[position], "lineno", None)))
        if position in before:
            items.append(stop_labels[before[position]])
        if position in copies:
            copy, resumed = _copy_of(decoded, body, copies[position], trampoline, active)
            items += [*copy, around] if around is not None else copy
            if resumed is not None:
                continued[id(opened)] = active = resumed
        if position in redirect:
            item = Instr(item.name, redirect[position], location=item.location)
        if isinstance(item, TryBegin):
            active = opened = item
        elif isinstance(item, TryEnd):
            item, active = TryEnd(continued.get(id(item.entry), item.entry)), None
        items.append(item)
        items += after.get(position, [])
    return items


def _copy_of(decoded, body, stop: Stop, trampoline, active) -> tuple[list, object]:
    """A nested stop's copied instructions, guarded so that an exception out of them shows
    the inlined calls in its traceback (`emit.guarded_copy`)."""
    call = body[decoded.instructions[stop.first].origin].location
    calls = tuple((code, decode(code).instructions[index].lineno)
                  for code, index in stop.points[1:])
    # the copies run in this frame, whose file is the compiled function's: they take the
    # call's position, so a warning or frame lookup while they run points at the user's
    # call (with the callee's lines it named the callee's line in the caller's file, past
    # its end for fasterrcnn); an exception's traceback gets the callee's lines back from
    # `calls` (`emit.restore_inlined_frames`)
    copied = [Instr(item.name, item.arg, location=call) for item in stop.copied]
    return emit.guarded_copy(copied, emit.Jump(trampoline(stop.edges[0])), active,
                             (call.lineno, call.end_lineno, call.col_offset,
                              call.end_col_offset), calls)


def _jump_target(edge: Edge, trampoline, tail: list, last) -> Label:
    """A label in the tail for the stop's jump: FOR_ITER in 3.12 lands after an END_FOR."""
    label = Label()
    end_for = [Instr("END_FOR", lineno=last.lineno)] if PY312 and last.opname == "FOR_ITER" \
        else []
    tail.extend([label, *end_for, emit.Jump(trampoline(edge), lineno=last.lineno)])
    return label


def _call_region(region: CodeType, edge: Edge, slots, cells, lineno: int) -> tuple:
    """[..., stack of `layout`] -> [..., region(pack(stack, SLOTS))]. A nested stop's edge
    first packs the innermost call's stack, which sits on top. Returns (the instructions,
    their exception handler): an exception out of the region loses this frame's traceback
    entry, since the region's frame already shows the function at the line that raised."""
    # call(function, ...): the region's frame links to this frame's caller (see frame_state.c)
    call, handler = emit.transparent_call(emit.call(region.co_argcount + 1, lineno), lineno)
    inner = emit.pack_layout(edge.inner[-1].layout, lineno) if edge.inner else []
    placeholder = [Instr("LOAD_CONST", None, lineno=lineno), Instr("SWAP", 2, lineno=lineno)] \
        if region.co_argcount == 2 else []  # slot 0 (see regions.first_argument)
    return [*inner, *emit.pack_layout(edge.layout, lineno),
            *emit.call_helper_on_top(_frame_state.pack, (slots,), lineno),
            Instr("PUSH_NULL", lineno=lineno), Instr("SWAP", 2, lineno=lineno),
            Instr("LOAD_CONST", _frame_state.call, lineno=lineno),
            Instr("SWAP", 2, lineno=lineno),
            *emit.call_helper(_frame_state.function,
                              [[Instr("LOAD_CONST", region, lineno=lineno)],
                               [Instr("LOAD_CONST", cells, lineno=lineno)]], lineno),
            Instr("SWAP", 2, lineno=lineno), *placeholder, *call], handler


def _dispatch(base, stops, stop_labels, trampoline, slots, lineno: int) -> list:
    """[result] -> the handler of its tag (see the module docstring)."""
    handlers: list = []
    code = [Instr("COPY", 1, lineno=lineno), Instr("LOAD_CONST", 0, lineno=lineno),
            Instr("BINARY_SUBSCR", lineno=lineno)]
    for index, stop in stops.items():
        label = Label()
        code += emit.tag_test(tag_of(base, index), label, lineno)
        target = stop_labels.get(index) or trampoline(stop.edges[0])
        handlers += [label, Instr("POP_TOP", lineno=lineno),
                     *emit.call_helper_on_top(_frame_state.unpack, (slots,), lineno),
                     Instr("STORE_FAST", STACK, lineno=lineno),
                     *emit.push_layout(STACK, stop.layout, lineno),
                     Instr("DELETE_FAST", STACK, lineno=lineno),
                     emit.Jump(target, lineno=lineno)]
    if region_info(base) is None:
        returned = Label()
        code += emit.tag_test(RETURN_TAG, returned, lineno)
        handlers += [returned, Instr("POP_TOP", lineno=lineno),
                     Instr("LOAD_CONST", 1, lineno=lineno), Instr("BINARY_SUBSCR", lineno=lineno),
                     Instr("LOAD_CONST", 0, lineno=lineno), Instr("BINARY_SUBSCR", lineno=lineno),
                     Instr("RETURN_VALUE", lineno=lineno)]
    code += [Instr("POP_TOP", lineno=lineno), Instr("RETURN_VALUE", lineno=lineno)]
    return code + handlers
