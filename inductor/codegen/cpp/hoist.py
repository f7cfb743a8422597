"""Index inputs that do not vary along an inner loop nest, computed once before it.

Input: the loads, integer expressions and indirect indices a kernel body asks for inside an
inner loop nest (an inner stage, a reduction's lane blocks and tail). Output: those whose
inputs do not depend on the nest's variables are declared once at a mark before the nest
(`Lines.insert`), not per element. An embedding's row index `jit_wrap_index(p0[x0], ...)`
depends on the row only; GCC vectorised it per element and did not move it out of the loop
(Llama's embedding + RMSNorm kernels, docs/performance-notes.md).

What moves: a load at an index free of the nest's variables and of indices computed inside
it, from a buffer the kernel does not store; integer and bool expressions of moved values
only; an indirect index of a moved value, with its bounds check (the check ORs into the
flag of the enclosing loop, and the kernel raises after it as before). Nothing under a mask
moves (masked lanes read 0 and may make any index). The nest runs at least once: a moved
check raises only where a check inside the nest would have.
"""
from __future__ import annotations

import re

import torch

from inductor.codegen.cpp.expressions import storage_type
from inductor.codegen.cpp.lines import Lines

_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_KEYWORDS = frozenset({"static_cast", "int64_t", "int32_t", "int16_t", "int8_t", "uint8_t",
                       "bool", "true", "false"})


class Hoist:
    """The mark before one inner loop nest and what has been declared there."""

    def __init__(self, lines: Lines, variables: list, stored, prefix: str):
        self.lines = lines
        self.mark = lines.mark()
        self.variant = {str(variable) for variable in variables}
        self.stored = frozenset(stored)
        self.prefix = prefix
        self.cache: dict = {}
        self.invariant: set = set()
        self.count = 0

    def add_variant(self, name: str) -> None:
        """An indirect index computed inside the nest: indices using it vary."""
        self.variant.add(name)

    def takes_load(self, name: str, index) -> bool:
        if name in self.stored:
            return False
        symbols = getattr(index, "free_symbols", ())
        return not any(str(symbol) in self.variant for symbol in symbols)

    def takes_expression(self, text: str, dtype: torch.dtype) -> bool:
        """An integer or bool expression of moved values only (no loop variable, no
        temporary of the nest, no call)."""
        if dtype.is_floating_point or "(" in text.replace("static_cast<", "").replace(">(", ""):
            return False
        words = set(_WORD.findall(text)) - _KEYWORDS
        return bool(words) and words <= self.invariant

    def value(self, text: str, dtype: torch.dtype, make):
        """The moved value of `text` (declared at the mark once)."""
        key = (text, dtype)
        if key not in self.cache:
            name = f"{self.prefix}{self.count}"
            self.count += 1
            self.lines.insert(self.mark, f"const {storage_type(dtype)} {name} = {text};")
            self.invariant.add(name)
            self.cache[key] = make(name, dtype)
        return self.cache[key]
