"""Relations between symbolic sizes (stage: guard; input: the size, stride and storage-offset
reads a trace made symbolic and the relations it learned about them; output: one grouped
condition and the first relation that fails).

A compiled entry traced with symbolic sizes serves every call whose sizes satisfy what the trace
relied on: each symbol is read from one tensor entry (its *binding*, `L['x'].size()[0]` for `s0`),
and the conditions are Python expressions over the symbols (`s0 >= 2`, `s0 % 8 == 0`,
`s1 == 2*s0`: another entry's read must equal an expression of the bound symbols). The tracer
(`dynamo.shapes`) writes the conditions and checks, before handing them over, that they hold for
the values it traced with; the tensor match guard of each tensor leaves the bound entries free
(`TensorProperties.relax`) and keeps every other property exact.

The conditions are compiled once into one function of the bound values (`math` and `torch` are
in its namespace: the printer writes `math.floor(...)`, `torch.sym_float(...)`), called from the
check with the values read from the frame.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Hashable

import torch

from guards.kinds.base import RANK_TENSOR, Guard
from guards.sources import Source


@dataclasses.dataclass(frozen=True)
class SizeRead:
    """One integer property of a tensor (`kind` "size", "stride" or "storage_offset") or an
    int of the frame itself (`kind` "value", whose type a `TypeGuard` checks first)."""

    source: Source
    kind: str
    index: int | None = None

    def text(self) -> str:
        """How the user reads it: `L['x'].size()[0]`, `L['x'].storage_offset()`, `L['n']`."""
        if self.kind == "value":
            return self.source.name()
        if self.kind == "storage_offset":
            return f"{self.source.name()}.storage_offset()"
        return f"{self.source.name()}.{self.kind}()[{self.index}]"

    def code(self, variable: str) -> str:
        """The read, applied to the variable holding the tensor (or int) in a check."""
        if self.kind == "value":
            return variable
        if self.kind == "storage_offset":
            return f"{variable}.storage_offset()"
        if self.kind == "size":
            return f"{variable}.shape[{self.index}]"
        return f"{variable}.stride({self.index})"

    def read(self, tensor: torch.Tensor) -> int:
        if self.kind == "value":
            return tensor
        if self.kind == "storage_offset":
            return tensor.storage_offset()
        if self.kind == "size":
            return tensor.shape[self.index]
        return tensor.stride(self.index)


def _compile(symbols: tuple[str, ...], conditions: tuple[str, ...]) -> Callable[..., bool]:
    body = " and ".join(f"({condition})" for condition in conditions) or "True"
    return eval(f"lambda {', '.join(symbols)}: {body}", {"math": math, "torch": torch})


class ShapeGuard(Guard):
    """Every condition holds for the symbols read through `bindings` (symbol name, read)."""

    rank = RANK_TENSOR  # after the tensor match guards, which check each tensor's dim first

    def __init__(self, bindings: tuple[tuple[str, SizeRead], ...],
                 conditions: tuple[str, ...]) -> None:
        if not bindings:
            raise ValueError("a shape guard binds at least one symbol")
        self.bindings = bindings
        self.conditions = conditions
        self.source = bindings[0][1].source
        symbols = tuple(symbol for symbol, _ in bindings)
        self._holds = _compile(symbols, conditions)
        self._each = [_compile(symbols, (condition,)) for condition in conditions]

    def key(self) -> Hashable:
        return (self.bindings, self.conditions)

    def holds_for(self, values: list[int]) -> bool:
        """Whether the conditions hold for these values of the bound reads, in order."""
        return bool(self._holds(*values))

    def emit(self, writer: Any) -> None:
        writer.comment(self.describe())
        values = []
        for symbol, read in self.bindings:
            tensor = writer.fetch(read.source)
            values.append(writer.assign(read.code(tensor), symbol))
        holds = writer.bind(self._holds, "shape_relations")
        writer.require([f"{holds}({', '.join(values)})"])

    def reason(self, value: Any) -> str | None:
        return None     # reads other sources too: see `reason_in`

    def reason_in(self, value: Any, L: dict, G: dict) -> str | None:
        values = []
        for _, read in self.bindings:
            try:
                values.append(read.read(read.source.fetch(L, G)))
            except Exception as error:  # noqa: BLE001  (a source gone or of another kind)
                return f"{read.text()}: could not be read ({type(error).__name__})"
        for condition, holds in zip(self.conditions, self._each):
            if not holds(*values):
                shown = ", ".join(f"{read.text()} = {number}"
                                  for (_, read), number in zip(self.bindings, values))
                return f"{self._readable(condition)} does not hold ({shown})"
        return None

    def _readable(self, condition: str) -> str:
        """`condition` with each symbol written as the read it binds."""
        text = condition
        for symbol, read in sorted(self.bindings, key=lambda item: -len(item[0])):
            text = _replace_name(text, symbol, read.text())
        return text

    def describe(self) -> str:
        return "shapes: " + "; ".join(self._readable(condition) for condition in self.conditions)


def _replace_name(text: str, name: str, replacement: str) -> str:
    """`text` with the identifier `name` (not a longer one containing it) replaced."""
    out, position = [], 0
    while True:
        found = text.find(name, position)
        if found < 0:
            return "".join(out) + text[position:]
        end = found + len(name)
        before = text[found - 1] if found else " "
        after = text[end] if end < len(text) else " "
        if before.isalnum() or before == "_" or after.isalnum() or after == "_":
            out.append(text[position:end])
        else:
            out.append(text[position:found] + replacement)
        position = end
