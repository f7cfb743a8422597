"""Stage "rewrite": build replacement code objects that the frame hook can run.

Input: an original code object and a list of instructions (`bytecode.Instr`, labels, try
blocks). Output: a `types.CodeType` with the original's names, cells, free variables, line
numbers and prologue, whose signature takes every argument slot positionally — the hook
calls it with the slots of the intercepted frame: positional parameters, keyword-only
parameters, then `*args` and `**kwargs`, exactly as CPython bound them.
"""
from __future__ import annotations

import weakref
from types import CodeType

from bytecode import Bytecode, CompilerFlags, Instr, Label, TryBegin, TryEnd

from dynamo import _C, hook, logs, skips
from dynamo.instructions.decoding import decode_bytecode
from dynamo.settings import config

_VARIADIC = CompilerFlags.VARARGS | CompilerFlags.VARKEYWORDS
_STARTS_WITH_SENT = (CompilerFlags.GENERATOR | CompilerFlags.COROUTINE
                     | CompilerFlags.ASYNC_GENERATOR)

# Instruction pairs nothing may be placed between. CPython 3.11 specialises PRECALL into forms
# that perform the call and skip the CALL they assume follows; 3.12's FOR_ITER (and SEND)
# jump to their target plus one, skipping the END_FOR (END_SEND) they assume sits there.
GLUED_TO_NEXT = frozenset({"PRECALL"})
GLUED_TO_JUMP_TARGET = frozenset({"END_FOR", "END_SEND"})
# The prologue: zero-argument super() finds `self` through the cell MAKE_CELL made, and
# CPython checks that MAKE_CELL/COPY_FREE_VARS come first; generated code keeps them first.
PROLOGUE = frozenset({"MAKE_CELL", "COPY_FREE_VARS", "RESUME"})


def arg_slot_count(code: CodeType) -> int:
    """How many local slots hold bound arguments (what the hook passes positionally)."""
    flags = code.co_flags
    return (code.co_argcount + code.co_kwonlyargcount
            + bool(flags & CompilerFlags.VARARGS) + bool(flags & CompilerFlags.VARKEYWORDS))


def positional_signature(body: Bytecode, original: CodeType) -> Bytecode:
    """Give `body` (decoded from `original`) the all-positional signature the hook calls."""
    body.argcount = arg_slot_count(original)
    body.posonlyargcount = 0
    body.kwonlyargcount = 0
    body.flags = CompilerFlags(body.flags & ~_VARIADIC)
    return body


# Stack slots generated code may add on top of the original's deepest point: a helper call
# on packed stack items (NULL, the helper, two constants) or a rebuilt stack plus a call.
GENERATED_STACK = 8


def assemble(body: Bytecode, original: CodeType, stacksize: int | None = None) -> CodeType:
    """Assemble `body` into a replacement for `original` (stack size, exception table).
    `stacksize`: known already (the original's, for its own instructions unchanged), else
    computed by `stack_size`, and never less than the original's plus `GENERATED_STACK`."""
    body = positional_signature(body, original)
    if stacksize is None:
        stacksize = max(stack_size(body), original.co_stacksize + GENERATED_STACK)
    code = body.to_code(stacksize=stacksize, compute_exception_stack_depths=False)
    return code.replace(co_name=original.co_name, co_qualname=original.co_qualname,
                        co_filename=original.co_filename,
                        co_firstlineno=original.co_firstlineno)


def stack_size(body: Bytecode) -> int:
    """The deepest value stack `body` reaches, walked from its first instruction; an
    instruction reached inside a `try` block makes its handler reachable, at the depth its
    `TryBegin` gives (the original's, which `decode` keeps; generated code sets its own), as
    CPython's compiler does.

    The `bytecode` package cannot be asked: it sizes a handler from the smallest depth seen
    on the path that reached the `try` block, and generated code enters `try` blocks in
    their middle (a skeleton's jump to a stop, a region's prologue) from paths that were at
    depth 0 -- a handler undersized (an `except` body overran the stack: a callee got
    internal objects as arguments, or CPython crashed), or, where the stop is a `raise`,
    sized below zero ("Failed to compute stacksize, got negative size": fuzzer P9).
    An instruction reached at two depths is sized for the deeper (as the `bytecode` package
    does; program fuzzer seed 61's generated code reached one label at depths 1 and 2, and
    ran as eager does once sized for 2). Raises RuntimeError for code that pops an empty
    stack: generated code that is wrong, never to be run."""
    items, handler_of = _with_handlers(body)
    where = {item: index for index, item in enumerate(items) if isinstance(item, Label)}
    # generators and coroutines start with one object on the stack (what `send` passes)
    start = int(bool(body.flags & _STARTS_WITH_SENT))
    work, depth_at, deepest = [(0, start)], {}, 0  # depth_at: on arrival at each item
    while work:
        index, depth = work.pop()
        while index < len(items):
            if index in depth_at and depth_at[index] >= depth:
                break
            if depth > _DEEPEST:
                raise RuntimeError(f"generated code's stack grows without end at "
                                   f"{items[index]}")
            depth_at[index] = depth
            item, handler = items[index], handler_of[index]
            index += 1
            if handler is not None:
                work.append((where[handler.target],
                             handler.stack_depth + handler.push_lasti + 1))
            if not isinstance(item, Instr):
                continue
            if item.has_jump():
                work.append((where[item.arg], _after(item, depth, True)))
            if item.is_final() or item.is_uncond_jump():
                break
            depth = _after(item, depth, False)
        deepest = max(deepest, depth)  # past the last item
    return max(deepest, *depth_at.values(), 0)


_DEEPEST = 1 << 16  # beyond this, a loop in generated code grows the stack on every turn


def _with_handlers(body: Bytecode) -> tuple[list, list]:
    """The instructions and labels of `body`, and the `TryBegin` whose handler covers each."""
    items, handlers, active = [], [], None
    for item in body:
        if isinstance(item, TryBegin):
            active = item
        elif isinstance(item, TryEnd):
            active = None
        elif isinstance(item, (Instr, Label)):
            items.append(item)
            handlers.append(active if isinstance(item, Instr) else None)
    return items, handlers


def _after(instruction: Instr, depth: int, jump: bool) -> int:
    depth += instruction.stack_effect(jump=jump)
    if depth < 0:
        raise RuntimeError(f"generated code pops an empty stack at {instruction}")
    return depth


def nop_rewrite(code: CodeType) -> CodeType:
    """The NOP self-test: decode, put a NOP before every instruction, re-assemble.

    A NOP goes *before* an instruction so that none lands in dead code after a jump, where
    the assembler cannot compute exception-handler stack depths; never inside the prologue,
    nor between two instructions glued together (`GLUED_TO_NEXT`, `GLUED_TO_JUMP_TARGET`).
    """
    body = decode_bytecode(code)
    padded, previous, in_prologue = [], None, True
    for item in body:
        if isinstance(item, Instr):
            in_prologue = in_prologue and item.name in PROLOGUE
            if not in_prologue and previous not in GLUED_TO_NEXT \
                    and item.name not in GLUED_TO_JUMP_TARGET:
                padded.append(Instr("NOP", location=item.location))
            previous = item.name
        padded.append(item)
    body[:] = padded
    return assemble(body, code)


class NopRewriteDriver:
    """A frame callback that NOP-rewrites every frame but framejit's own, caching the result
    (used by `python -m dynamo nop-rewrite` and `JIT_NOP_REWRITE`).

    Cache entries live on code objects, shared by every callback; a rewritten entry therefore
    answers only while its `owner` (this driver, or the `jit` driver that delegates to it) is
    the thread's callback. Otherwise a function first run under `nop-rewrite` would keep running
    its NOP copy inside a later `dynamo.jit` call, and never be captured."""

    def __init__(self, owner=None):
        current, owner = _C.get_callback, weakref.ref(self if owner is None else owner)
        self._check = lambda frame_locals, frame_globals: current() is owner()

    def __call__(self, view):
        code = view.f_code
        hook.note_seen(code)
        if skips.is_own(code):
            return hook.SKIP
        try:
            replacement = nop_rewrite(code)
        except Exception as error:
            # The rewriter is Python code too: a program that has, say, deleted a builtin
            # (CPython's test_iter does) can break it. Run this call as is and retry next time.
            if not config.suppress_errors:
                raise
            _report_failure(logs.get("hook"), code, error)
            return None
        hook.add_entry(code, self._check, replacement)
        logs.get("hook").debug("nop-rewrite %s (%s:%d)", code.co_qualname, code.co_filename,
                               code.co_firstlineno)
        return replacement


def _report_failure(log, code: CodeType, error: Exception) -> None:
    try:
        log.warning("nop-rewrite failed for %s (%s:%d), running it as is: %s: %s",
                    code.co_qualname, code.co_filename, code.co_firstlineno,
                    type(error).__name__, error)
    except Exception:  # noqa: BLE001 - the program may have broken logging as well
        pass
