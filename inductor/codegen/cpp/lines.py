"""Indented C++ lines for the kernel printers, with loop-scoped index-error flags.

Input: statements and blocks the kernel printers add in order. Output: the indented lines of
one function body.

An indirect index is checked against its size (eager raises IndexError for an index out of
range). A check that reports through a call with a side effect keeps the compiler from
vectorising the loop (swin_t's relative-position bias: a 512 x 3 x 49 x 49 softmax kernel ran
15.8 ms, against 3.2 ms with no check). So the check ORs into a local flag instead: the
innermost loop or `omp parallel` region around an index statement (or the loop a `collapse`
clause folds it into) gets `{ int jit_index_error = 0;` before it, a
`reduction(|:jit_index_error)` on its pragma, and `if (jit_index_error) jit_fail(...); }`
after it; a statement outside any loop uses a flag declared for the whole function.

An int64 -> float32 conversion is written as the prelude's vectorisable `jit_int64_to_float`
(x86 without AVX-512 DQ has no vector instruction for it), which pays where the loop has other
work to vectorise; in an innermost loop that only loads, converts and stores, the scalar cast
is faster (a C loop of 4096 elements: 0.32 against 0.48 ns each; beside `* 3 + 1`, `/ y`,
sqrt or exp the helper's vector form wins), and such a loop is given the cast back.

float16 conversions: prelude.h's `half_to_float`, `float_to_half`, `half_round`, `half_bits`
and `half_quiet` are integer and float operations, exact, about 15 vector instructions each.
With F16C their `jit_..._f16c` forms are calls that g++ turns into calls of vector variants
using vcvtph2ps/vcvtps2ph (the fp16 `x * 2 + 1` kernel: 1.7 -> 1.0 ms a million elements).
g++ 12 vectorises no loop holding a call and a branch it would have to if-convert (a `?:`,
`&&`, `||`; prelude helpers other than these): an `omp simd` innermost loop is given the
`_f16c` forms only when its statements have none of them (a NaN-propagating max reduction
keeps the software forms, vectorised).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Optional

from inductor.codegen.cpp.vml_blocks import strip_mine

INDEX_ERROR_FLAG = "jit_index_error"
INT64_TO_FLOAT = "jit_int64_to_float"
_COLLAPSE = re.compile(r"collapse\((\d+)\)")
# A load, a conversion of int64 to float32 (and the `+ 0.0f` after it), or a store.
_CONVERSION_ONLY = re.compile(
    rf"const \w+ \w+ = (\w+\[[^\[\]]*\]|\w+ \+ 0\.0f|{INT64_TO_FLOAT}\(\w+\));"
    r"|\w+\[[^\[\]]*\] = (\w+|static_cast<\w+>\(\w+\));")
_HALF_FUNCTIONS = ("half_to_float", "float_to_half", "half_round", "half_bits", "half_quiet")
_HALF_CALL = re.compile(rf"\b({'|'.join(_HALF_FUNCTIONS)})\(")
_CALLED = re.compile(r"\b(\w+)\s*\(")


@dataclasses.dataclass
class _Block:
    start: int                  # position of its first line (its pragma, if any)
    pragma: Optional[int]       # position of its pragma line, or None
    loop: bool                  # a `for` loop (not a bare or parallel block)
    owner: Optional["_Block"]   # the loop a collapse clause folds this one into
    flagged: bool = False       # an index statement inside needs the error flag
    own_vml_blocks: bool = True   # False: the enclosing loop strip-mines it (vml_blocks.py)


@dataclasses.dataclass
class Mark:
    position: int               # where the next inserted line goes
    depth: int                  # its indentation
    blocks: int                 # how many blocks were open


class Lines:
    """Indented C++ lines (see the module docstring)."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 1
        self.blocks: list[_Block] = []
        self.collapsing: Optional[_Block] = None    # the loop owning the next collapsed ones
        self.collapse_left = 0
        self.function_flag = False

    def add(self, *texts: str) -> None:
        for text in texts:
            if INDEX_ERROR_FLAG in text:
                self._flag()
            self.lines.append("  " * self.depth + text)

    def open(self, text: str, own_vml_blocks: bool = True) -> None:
        """Open a block; a loop opened with `own_vml_blocks=False` (a reduction's lane loop)
        is strip-mined with the loop around it, not on its own."""
        previous = self.lines[-1].strip() if self.lines else ""
        pragma = len(self.lines) - 1 if previous.startswith("#pragma omp") else None
        owner = None
        if self.collapse_left > 0:
            owner, self.collapse_left = self.collapsing, self.collapse_left - 1
        block = _Block(pragma if pragma is not None else len(self.lines), pragma,
                       text.startswith("for "), owner, own_vml_blocks=own_vml_blocks)
        if pragma is not None:
            match = _COLLAPSE.search(previous)
            if match:
                self.collapsing, self.collapse_left = block, int(match.group(1)) - 1
        self.blocks.append(block)
        self.add(text + " {")
        self.depth += 1

    def close(self) -> None:
        block = self.blocks.pop()
        self.depth -= 1
        self.add("}")
        if block.loop:
            self._scalar_conversions(block)
            self._f16c_conversions(block)
        if block.loop and block.owner is None and block.own_vml_blocks:
            self._block_vml_calls(block)
        if block.flagged:
            self._declare_flag(block)

    def _scalar_conversions(self, block: _Block) -> None:
        """Cast int64 to float32 with the scalar instruction in a closed loop that does
        nothing but load, convert and store (see the module docstring)."""
        first = block.start + (2 if block.pragma is not None else 1)
        body = self.lines[first:-1]
        if not any(INT64_TO_FLOAT in line for line in body) or \
                not all(_CONVERSION_ONLY.fullmatch(line.strip()) for line in body):
            return
        self.lines[first:-1] = [line.replace(f"{INT64_TO_FLOAT}(", "static_cast<float>(")
                                for line in body]

    def _f16c_conversions(self, block: _Block) -> None:
        """Call the F16C forms of the float16 conversions in a closed `omp simd` innermost
        loop whose statements have no branch to if-convert (see the module docstring)."""
        if block.pragma is None or "simd" not in self.lines[block.pragma]:
            return
        first = block.start + 2
        body = self.lines[first:-1]
        if not any(_HALF_CALL.search(line) for line in body):
            return
        for line in body:
            text = line.strip()
            if not text.endswith(";") or any(mark in text for mark in "?{}#|&") or \
                    text.startswith("for ") or \
                    any(name not in _HALF_FUNCTIONS for name in _CALLED.findall(text)):
                return
        self.lines[first:-1] = [_HALF_CALL.sub(r"jit_\1_f16c(", line) for line in body]

    def _block_vml_calls(self, block: _Block) -> None:
        """Strip-mine a closed innermost loop that calls VML (`vml_blocks.py`)."""
        header = block.start + (1 if block.pragma is not None else 0)
        pragma = self.lines[block.pragma].strip() if block.pragma is not None else None
        body = [line.strip() for line in self.lines[header + 1:-1]]
        if not any("jit_vml_" in line for line in body):
            return
        blocked = strip_mine(pragma, self.lines[header].strip(), body, INDEX_ERROR_FLAG)
        if blocked is None:
            return
        indent = "  " * self.depth
        self.lines[block.start:] = [indent + line for line in blocked]
        block.pragma = block.start if blocked[0].startswith("#pragma omp parallel") else None

    def mark(self) -> "Mark":
        """The current position: `insert` adds lines there later (hoist.py)."""
        return Mark(len(self.lines), self.depth, len(self.blocks))

    def insert(self, mark: "Mark", text: str) -> None:
        """Add `text` at `mark` (after what was inserted there before), in the blocks open
        when the mark was taken; blocks opened since then move down."""
        if INDEX_ERROR_FLAG in text:
            self._flag(self.blocks[:mark.blocks])
        self.lines.insert(mark.position, "  " * mark.depth + text)
        for block in self.blocks[mark.blocks:]:
            if block.start >= mark.position:
                block.start += 1
                block.pragma = None if block.pragma is None else block.pragma + 1
        mark.position += 1

    def function_lines(self) -> list[str]:
        """The body, with a function-wide flag where a statement outside loops needs one."""
        if not self.function_flag:
            return self.lines
        return ([f"  int {INDEX_ERROR_FLAG} = 0;"] + self.lines +
                [f"  if ({INDEX_ERROR_FLAG}) jit_fail(JIT_ERROR_INDEX);"])

    def _flag(self, blocks: Optional[list] = None) -> None:
        for block in reversed(self.blocks if blocks is None else blocks):
            if block.loop or block.pragma is not None:   # a loop, or an `omp parallel` region
                (block.owner or block).flagged = True
                return
        self.function_flag = True

    def _declare_flag(self, block: _Block) -> None:
        first = self.lines[block.start]
        indent = first[:len(first) - len(first.lstrip())]
        if block.pragma is not None:
            self.lines[block.pragma] += f" reduction(|:{INDEX_ERROR_FLAG})"
        # A scope of its own: sibling loops each declare their flag.
        self.lines.insert(block.start, f"{indent}{{ int {INDEX_ERROR_FLAG} = 0;")
        self.lines.append(f"{indent}if ({INDEX_ERROR_FLAG}) jit_fail(JIT_ERROR_INDEX); }}")
