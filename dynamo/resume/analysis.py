"""Stage "resume", part 1: where a frame with a graph break stops, and what its stack holds.

Input: a code object's normalised instructions (`dynamo.instructions.DecodedCode`) and the
instruction where tracing had to stop. Output: `Stop`s -- the instructions that run eagerly in
the rewritten frame -- with the layout of the value stack on each edge leaving them.

A break outside loops is one stop: the instructions before it are compiled into one graph,
the instruction runs eagerly, and a continuation compiles the rest. A break inside a loop body
would make every iteration a new continuation; instead the loops around it stay loops in the
rewritten frame: their headers become the stops, and each stretch of code between two stops
(one iteration's body, the code after the loop) is compiled on its own.

A stack layout is a tuple of flags, bottom first: True where CPython holds a NULL (the slot
below a callable in a call sequence). NULLs cannot be stored in tuples, so layouts say where to
put them back.
"""
from __future__ import annotations

import dataclasses
import dis
import sys
from typing import Optional

from dynamo.instructions import DecodedCode, Instruction
from dynamo.rewrite import arg_slot_count

PY312 = sys.version_info >= (3, 12)
Layout = tuple  # tuple[bool, ...]: True where the slot holds NULL

_CONDITIONAL = {"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_NONE",
                "POP_JUMP_IF_NOT_NONE"}
_NO_FALLTHROUGH = {"JUMP", "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"}


@dataclasses.dataclass(frozen=True)
class Loop:
    """A loop of the bytecode: `header` is the back edges' target, `end` the last back edge."""

    header: int
    end: int

    def contains(self, index: int) -> bool:
        return self.header <= index <= self.end


def loops(decoded: DecodedCode) -> list[Loop]:
    """Every loop, outermost first (one per header; its end is the furthest back edge)."""
    ends: dict[int, int] = {}
    instructions = decoded.instructions
    for instruction in instructions:
        target = instruction.target
        if target is not None and target <= instruction.index and \
                instruction.opname in ("JUMP", *_CONDITIONAL) and \
                not _returns_straight(instructions, target):
            ends[target] = max(ends.get(target, target), instruction.index)
    found = [Loop(header, end) for header, end in ends.items()]
    return sorted(found, key=lambda loop: (loop.header, -loop.end))


def _returns_straight(instructions: list[Instruction], index: int) -> bool:
    """Whether the code at `index` returns without jumping: a region's exit (a back edge to
    it leaves the region, so there is no loop)."""
    for instruction in instructions[index:]:
        if instruction.opname in ("RETURN_VALUE", "RETURN_CONST"):
            return True
        if instruction.target is not None or instruction.opname in _NO_FALLTHROUGH:
            return False
    return False


def enclosing_loops(decoded: DecodedCode, index: int) -> list[Loop]:
    return [loop for loop in loops(decoded) if loop.contains(index)]


@dataclasses.dataclass(frozen=True)
class InnerFrame:
    """An inlined call a continuation resumes inside: its code, where it goes on, the stack
    layout there (the callee's result slot included for callers)."""

    code: object  # types.CodeType
    start: int
    layout: Layout


@dataclasses.dataclass(frozen=True)
class Edge:
    """Where execution goes after an instruction, with the stack layout there."""

    target: int  # instruction index where the continuation starts
    layout: Layout
    jumps: bool = False  # taken by the instruction's jump (else: falls through)
    inner: tuple = ()  # InnerFrame per inlined call to finish first, outermost first


@dataclasses.dataclass(frozen=True)
class Stop:
    """Instructions that run eagerly in the rewritten frame.

    `first..last` run in place (`first > last` for a loop header that executes nothing: the
    continuation starts right there); `layout` is the stack on arrival; `edges` the ways out.
    """

    first: int
    last: int
    layout: Layout
    edges: tuple
    loop_header: bool = False
    copied: tuple = ()  # instructions of an inlined call to run instead (a nested stop)
    points: tuple = ()  # a nested stop: (code, index) per frame, the compiled frame first

    @property
    def executes(self) -> bool:
        return self.first <= self.last


def stop_at(decoded: DecodedCode, index: int, layout: Layout,
            loop_header: bool = False) -> Optional["Stop"]:
    """The stop for a break at `index` with the stack `layout` (None: not resumable there).
    Code that runs while an exception is being handled (an `except` body, a `with` block's
    cleanup) is never resumable: the rebuilt frame would lack the exception state that
    `PUSH_EXC_INFO` set up (a region resumed after `__exit__` raised crashed CPython)."""
    instructions = decoded.instructions
    instruction = instructions[index]
    counts = handling(decoded)
    if None in layout or counts.get(index, 0):
        return None
    if loop_header and instruction.opname != "FOR_ITER":
        return Stop(index, index - 1, layout, (Edge(index, layout),), loop_header=True)
    last = _span_end(instructions, index, layout)
    if last is None:
        return None
    before = layout
    for position in range(index, last):  # a span: the stack on arrival at its last instruction
        before = _after(instructions[position], before)
        if before is None:
            return None
    edges = _edges(decoded, instructions[last], before)
    if edges is None or any(None in edge.layout for edge in edges):
        return None
    if any(counts.get(edge.target, 0) for edge in edges):
        return None
    return Stop(index, last, layout, edges, loop_header=loop_header)



def untouched_slots(decoded: DecodedCode, stop: Stop) -> int:
    """How many slots at the bottom of the stack no instruction of `stop` pops, swaps or
    rewrites: they reach every way out holding the values they had on arrival (an estimate
    that errs low: an instruction of unknown reach counts one slot more than it pops)."""
    layout = stop.layout
    lowest = len(layout)
    for position in range(stop.first, stop.last + 1):
        instruction = decoded.instructions[position]
        lowest = min(lowest, len(layout) - _reach(instruction))
        layout = _after(instruction, layout)
        if layout is None:
            return 0
    return max(lowest, 0)


def _reach(instruction: Instruction) -> int:
    """Slots from the top of the stack an instruction may pop or rewrite."""
    if instruction.opname in ("CALL", "CALL_FUNCTION_EX"):
        return _call_inputs(instruction)
    if instruction.opname in ("SWAP", "COPY"):
        return instruction.arg
    return max(0, -_effect(instruction)) + 1


def handling(decoded: DecodedCode) -> dict[int, int]:
    """How many exceptions are being handled on arrival at each reachable instruction: the
    `PUSH_EXC_INFO`s minus the `POP_EXCEPT`s on the way there (CPython's compiler gives every
    point one count; an exception edge keeps the count of the instruction that raised)."""
    instructions = decoded.instructions
    counts, pending = {0: 0}, [0]
    while pending:
        index = pending.pop()
        if index >= len(instructions):
            continue
        instruction, count = instructions[index], counts[index]
        after = count + (instruction.opname == "PUSH_EXC_INFO") - \
            (instruction.opname == "POP_EXCEPT")
        targets = [] if instruction.opname in _NO_FALLTHROUGH else [(index + 1, after)]
        if instruction.target is not None:
            targets.append((instruction.target, after))
        if instruction.handler is not None:
            targets.append((instruction.handler.target, count))
        for target, value in targets:
            if target not in counts:
                counts[target] = value
                pending.append(target)
    return counts


def _span_end(instructions: list[Instruction], index: int, layout: Layout) -> Optional[int]:
    """The last instruction that must run eagerly with `instructions[index]`.

    Most breaks are one instruction. A method load (`obj.name` about to be called) pushes
    either (method, self) or (NULL, attribute) depending on the object, so the stack after it
    has no fixed layout: the break then extends to the call that consumes the pair.
    """
    instruction = instructions[index]
    if instruction.opname not in ("LOAD_ATTR", "LOAD_SUPER_ATTR") or not instruction.method:
        return index
    depth = len(layout) + (1 if instruction.opname == "LOAD_ATTR" else -1)
    target_depth = depth - 1  # the pair and its arguments consumed, the result pushed
    for position in range(index + 1, len(instructions)):
        current = instructions[position]
        if current.target is not None or current.opname in _NO_FALLTHROUGH:
            return None
        depth += _effect(current)
        if current.opname in ("CALL", "CALL_FUNCTION_EX") and depth == target_depth:
            return position
    return None


def _edges(decoded: DecodedCode, instruction: Instruction, before: Layout,
           for_stop: bool = True) -> Optional[tuple]:
    """The continuations after `instruction` runs with the stack `before` (a span's last
    instruction gets the layout of the whole span's end); None where it cannot be known."""
    name = instruction.opname
    index = instruction.index
    if name == "FOR_ITER":
        exit_target = instruction.target
        if PY312 and decoded.instructions[exit_target].opname == "END_FOR":
            exit_target += 1
        return (Edge(index + 1, before + (False,)), Edge(exit_target, before[:-1], True))
    if name in _CONDITIONAL:
        after = before[:-1]
        return (Edge(index + 1, after), Edge(instruction.target, after, True))
    if name in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
        return (Edge(index + 1, before[:-1]), Edge(instruction.target, before, True))
    if name == "JUMP":
        return (Edge(instruction.target, before, True),)
    if name in ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"):
        return ()
    if instruction.target is not None or (for_stop and name in _UNRESUMABLE):
        return None
    after = _after(instruction, before)
    return None if after is None else (Edge(index + 1, after),)


def _after(instruction: Instruction, before: Layout) -> Optional[Layout]:
    """The stack layout after a straight-line instruction."""
    name = instruction.opname
    if name in ("CALL", "CALL_FUNCTION_EX"):
        popped = _call_inputs(instruction)
        return None if popped > len(before) else before[:len(before) - popped] + (False,)
    if name == "SWAP":
        flags = list(before)
        flags[-1], flags[-instruction.arg] = flags[-instruction.arg], flags[-1]
        return tuple(flags)
    if name == "COPY":
        return before + (before[-instruction.arg],)
    if name == "PUSH_NULL":
        return before + (True,)
    if name == "LOAD_GLOBAL" and instruction.push_null:
        return before + (True, False)
    if name in ("LOAD_ATTR", "LOAD_SUPER_ATTR") and instruction.method:
        depth = len(before) - (1 if name == "LOAD_ATTR" else 3)
        return before[:depth] + (None, False)  # (NULL, attribute) or (method, self)
    if name == "LOAD_FAST_AND_CLEAR":
        return before + (None,)  # NULL when the local is unbound
    effect = _effect(instruction)
    if len(before) + effect < 0:
        return None
    return before[:len(before) + effect] if effect <= 0 else before + (False,) * effect


def layouts(decoded: DecodedCode) -> dict[int, Optional[Layout]]:
    """The stack layout on arrival at every reachable instruction (None: not fixed).

    CPython's compiler gives every instruction one stack depth; whether a slot holds NULL is
    fixed too, except after method loads and `LOAD_FAST_AND_CLEAR` (flag None).
    """
    instructions = decoded.instructions
    bound = maybe_bound(decoded)
    found: dict[int, Optional[Layout]] = {0: ()}
    pending = [0]
    while pending:
        index = pending.pop()
        before = found[index]
        if before is None or index >= len(instructions):
            continue
        instruction = instructions[index]
        edges = list(_edges(decoded, instruction, before, for_stop=False) or ())
        if instruction.opname == "LOAD_FAST_AND_CLEAR" and edges and \
                instruction.arg not in bound.get(index, ()):
            edges[0] = Edge(edges[0].target, edges[0].layout[:-1] + (True,))  # never bound
        handler = instruction.handler
        if handler is not None and handler.depth <= len(before):
            lasti = (False,) if handler.push_lasti else ()
            edges.append(Edge(handler.target, before[:handler.depth] + lasti + (False,), True))
        for edge in edges:
            merged = _merge(found.get(edge.target, _UNSEEN), edge.layout)
            if merged != found.get(edge.target, _UNSEEN):
                found[edge.target] = merged
                pending.append(edge.target)
    return found


_UNSEEN = object()


def maybe_bound(decoded: DecodedCode) -> dict[int, frozenset]:
    """The plain locals that may hold a value on arrival at each instruction (arguments, and
    names some path has stored to and not deleted or cleared since)."""
    code = decoded.code
    found = {0: frozenset(code.co_varnames[:arg_slot_count(code)])}
    pending = [0]
    instructions = decoded.instructions
    while pending:
        index = pending.pop()
        if index >= len(instructions):
            continue
        instruction = instructions[index]
        names = found[index]
        if instruction.opname == "STORE_FAST":
            names = names | {instruction.arg}
        elif instruction.opname in ("DELETE_FAST", "LOAD_FAST_AND_CLEAR"):
            names = names - {instruction.arg}
        targets = [] if instruction.opname in _NO_FALLTHROUGH else [index + 1]
        if instruction.target is not None:
            targets.append(instruction.target)
        if instruction.handler is not None:
            targets.append(instruction.handler.target)
        for target in targets:
            merged = found.get(target, frozenset()) | names
            if target not in found or merged != found[target]:
                found[target] = merged
                pending.append(target)
    return found


def _merge(known, layout: Layout) -> Optional[Layout]:
    if known is _UNSEEN:
        return layout
    if known is None or len(known) != len(layout):
        return None
    return tuple(a if a == b else None for a, b in zip(known, layout))


# Instructions whose effect on the stack depends on the run (or that open a frame of their own).
_UNRESUMABLE = {"SEND", "YIELD_VALUE", "GET_AWAITABLE", "BEFORE_ASYNC_WITH", "PUSH_EXC_INFO",
                "CHECK_EXC_MATCH", "END_ASYNC_FOR", "RETURN_GENERATOR"}


def _call_inputs(instruction: Instruction) -> int:
    """Stack slots a call consumes, the NULL-or-self slot and the callable included."""
    if instruction.opname == "CALL":
        return instruction.arg + 2
    return 3 + (instruction.arg & 1)  # NULL, callable, args tuple[, kwargs mapping]


def _effect(instruction: Instruction) -> int:
    """Net stack effect of a normalised instruction (jumps not taken)."""
    name = instruction.opname
    if name == "CALL":
        return -(instruction.arg + 1)
    if name == "CALL_FUNCTION_EX":
        return -(2 + (instruction.arg & 1))
    if name == "LOAD_ATTR":
        return 1 if instruction.method else 0
    if name == "LOAD_GLOBAL":
        return 2 if instruction.push_null else 1
    if name in ("JUMP",) or name in _CONDITIONAL:
        return -1 if name in _CONDITIONAL else 0
    opcode = dis.opmap.get(name)
    if opcode is None:
        return 0
    try:
        if opcode < dis.HAVE_ARGUMENT:
            return dis.stack_effect(opcode)
        arg = instruction.arg
        return dis.stack_effect(opcode, arg if isinstance(arg, int) else 0, jump=False)
    except ValueError:
        return 0
