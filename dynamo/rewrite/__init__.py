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

from bytecode import Bytecode, CompilerFlags, Instr

_VARIADIC = CompilerFlags.VARARGS | CompilerFlags.VARKEYWORDS

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


def decode(code: CodeType) -> Bytecode:
    """Decode `code`, keeping each exception handler's stack depth as CPython compiled it.

    The `bytecode` package can recompute those depths, but gets some `try`/`finally` re-raise
    shapes wrong; every rewrite here keeps the stack layout of the original instructions, so
    the original depths stay right. Code we generate ourselves sets depths explicitly.
    """
    return Bytecode.from_code(code, conserve_exception_block_stackdepth=True)


# Stack slots generated code may add on top of the original's deepest point: a helper call
# on packed stack items (NULL, the helper, two constants) or a rebuilt stack plus a call.
GENERATED_STACK = 8


def assemble(body: Bytecode, original: CodeType, stacksize: int | None = None) -> CodeType:
    """Assemble `body` into a replacement for `original` (stack size, exception table).
    `stacksize`: known already (the original's, for its own instructions unchanged), else
    computed, and never less than the original's plus `GENERATED_STACK` (see
    `safe_stack_size`)."""
    code = positional_signature(body, original).to_code(
        stacksize=stacksize, compute_exception_stack_depths=False)
    if stacksize is None:
        code = safe_stack_size(code, original.co_stacksize)
    return code.replace(co_name=original.co_name, co_qualname=original.co_qualname,
                        co_filename=original.co_filename,
                        co_firstlineno=original.co_firstlineno)


def safe_stack_size(code: CodeType, needed: int) -> CodeType:
    """`code` with a stack of at least `needed + GENERATED_STACK` slots. The `bytecode`
    package walks the code from its first instruction and sizes each exception handler from
    the smallest depth seen so far: code that jumps into the middle of a `try` block (a
    skeleton's jump to a stop, a region's prologue) gets a handler sized from depth 0, and a
    stack too small for it (an `except` body calling a function overran it: the callee got
    the wrong objects as arguments, or CPython crashed). The original code's own size plus
    what generated code adds is always enough."""
    floor = needed + GENERATED_STACK
    return code if code.co_stacksize >= floor else code.replace(co_stacksize=floor)


def nop_rewrite(code: CodeType) -> CodeType:
    """The NOP self-test: decode, put a NOP before every instruction, re-assemble.

    A NOP goes *before* an instruction so that none lands in dead code after a jump, where
    the assembler cannot compute exception-handler stack depths; never inside the prologue,
    nor between two instructions glued together (`GLUED_TO_NEXT`, `GLUED_TO_JUMP_TARGET`).
    """
    body = decode(code)
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
        from dynamo import _C
        current, owner = _C.get_callback, weakref.ref(self if owner is None else owner)
        self._check = lambda frame_locals, frame_globals: current() is owner()

    def __call__(self, view):
        from dynamo import hook, logs, skips
        from dynamo.settings import config

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
