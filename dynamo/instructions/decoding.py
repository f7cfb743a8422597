"""Stage "decode", first half: code objects -> `bytecode.Bytecode` as CPython compiled them.

Input: a `types.CodeType`. Output: a `bytecode.Bytecode` (instructions, labels, try blocks)
whose exception handlers keep the stack depths CPython gave them. The normalised instruction
list of `dynamo.instructions` is built from it, and the rewrite stage copies and re-assembles
it; both sit above this module.
"""
from __future__ import annotations

import dis
from types import CodeType

from bytecode import Bytecode


def decode_bytecode(code: CodeType) -> Bytecode:
    """Decode `code`, keeping each exception handler's stack depth as CPython compiled it.

    The `bytecode` package can recompute those depths, but gets some `try`/`finally` re-raise
    shapes wrong; every rewrite here keeps the stack layout of the original instructions, so
    the original depths stay right. Code we generate ourselves sets depths explicitly.
    """
    return Bytecode.from_code(_entries_from_extended_args(code),
                              conserve_exception_block_stackdepth=True)


_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]


def _entries_from_extended_args(code: CodeType) -> CodeType:
    """`code` with every exception-table entry that starts on an instruction's own opcode,
    after that instruction's EXTENDED_ARG prefixes, started at the prefixes instead (CPython
    starts entries there). The `bytecode` package writes such entries when a jump of a block
    grows a prefix, and decoding one again placed the block's start at the code's end: an
    empty entry, and the instructions after the jump (a `raise` in a `try`) lost their
    handler (program fuzzer on 3.12, eager seed 17032: a region of a region)."""
    entries = dis._parse_exception_table(code)
    raw = code.co_code
    covered = {offset for entry in entries for offset in range(entry.start, entry.end, 2)}
    fixed, changed = [], False
    for entry in entries:
        start = entry.start
        while start >= 2 and raw[start - 2] == _EXTENDED_ARG and start - 2 not in covered:
            start -= 2
        changed |= start != entry.start
        fixed.append((start, entry.end, entry.target, entry.depth, entry.lasti))
    if not changed:
        return code
    table = bytearray()
    for start, end, target, depth, lasti in fixed:
        for value, marker in ((start // 2, 0x80), ((end - start) // 2, 0), (target // 2, 0),
                              ((depth << 1) | lasti, 0)):
            table += _varint(value, marker)
    return code.replace(co_exceptiontable=bytes(table))


def _varint(value: int, marker: int) -> bytes:
    """CPython's exception-table number: 6-bit groups, most significant first, 0x40 on all
    but the last, `marker` (0x80: an entry starts) on the first."""
    groups = [value & 0x3F]
    value >>= 6
    while value:
        groups.append(value & 0x3F)
        value >>= 6
    groups.reverse()
    encoded = [group | (0x40 if index < len(groups) - 1 else 0)
               for index, group in enumerate(groups)]
    encoded[0] |= marker
    return bytes(encoded)
