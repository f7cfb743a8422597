"""An exception-table entry that starts on an instruction's opcode, after its EXTENDED_ARG
prefix (the `bytecode` package writes such entries when a block's first jump grows a prefix),
decoded again put the block's start at the code's end: an empty entry, so the instructions
after the jump lost their handler. A region built from a region on 3.12 let a `raise` inside
`try` escape its `except` (program fuzzer, eager seed 17032). Decoding starts such entries
at the prefix, as CPython does."""
import dis
import types

import pytest

import torch

from dynamo.instructions.decoding import _varint
from dynamo.instructions.decoding import decode_bytecode as decode
from tests.capture.differential import check

PER_SIZE = ("sizes change between calls: inductor compiles one static variant per size until "
            "its kernels take sizes as arguments (issue 23, docs/inductor.md 'Symbolic sizes')")


def _shifted(code: types.CodeType) -> types.CodeType:
    """`code` with each entry that starts on an EXTENDED_ARG started after the prefix."""
    table = bytearray()
    for entry in dis._parse_exception_table(code):
        start = entry.start
        if code.co_code[start] == dis.opmap["EXTENDED_ARG"]:
            start += 2
        for value, marker in ((start // 2, 0x80), ((entry.end - start) // 2, 0),
                              (entry.target // 2, 0), ((entry.depth << 1) | entry.lasti, 0)):
            table += _varint(value, marker)
    return code.replace(co_exceptiontable=bytes(table))


def _with_many_locals():
    names = ", ".join(f"c{index}" for index in range(300))
    values = ", ".join(f"{index}.5" for index in range(300))
    source = (f"def f(x):\n    {names} = {values}\n"  # c299's slot needs a prefix
              f"    try: y = c299 + x; raise ValueError(y)\n"
              f"    except ValueError:\n        return x\n")
    space: dict = {}
    exec(compile(source, "<many constants>", "exec"), space)
    return space["f"]


def test_a_block_starting_on_a_prefixed_instruction_keeps_its_handler():
    f = _with_many_locals()
    code = f.__code__
    assert any(code.co_code[entry.start] == dis.opmap["EXTENDED_ARG"]
               for entry in dis._parse_exception_table(code)), "the test needs such a block"
    shifted = _shifted(code)
    rebuilt = decode(shifted).to_code(compute_exception_stack_depths=False)
    covered = [(entry.start, entry.end) for entry in dis._parse_exception_table(rebuilt)]
    assert all(start < end for start, end in covered), covered
    raising = next(instruction.offset for instruction in dis.get_instructions(rebuilt)
                   if instruction.opname == "RAISE_VARARGS")
    assert any(start <= raising < end for start, end in covered), covered
    assert types.FunctionType(rebuilt, {"ValueError": ValueError})(7) == 7


def looping_then_raising_in_try(a):
    try:
        t = a.mean(-2)
        for _ in range(a.shape[0]):
            _u = (torch.add(t @ a.T, a.amax(1), alpha=0.5) * a.select(1, -2))
            t = t * 0.5
            k = 0
            while a.abs().sum() > 1 and k < 3:
                _d = dict(w=a.matmul(t.matmul(a.T)), h=t.sin())
                a = a * 0.5
                k += 1
        raise ZeroDivisionError("no key")
    except ZeroDivisionError:
        pass

    def inner(b):
        pass
    return inner(a), 1.0


def fuzz_17032(y):
    r, s = looping_then_raising_in_try(y)
    return r, s


@pytest.mark.expect_fallback("per_size", reason=PER_SIZE)
def test_raise_in_try_after_loops_with_graph_breaks(backend):
    x = (torch.arange(9.0).reshape(3, 3) - 4) / 4
    check(fuzz_17032, x, graphs=None, breaks=None, calls=2, backend=backend)
