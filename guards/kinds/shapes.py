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
check with the values read from the frame. Where every read is a tensor's and every condition
is linear (`s1 == 2*s0`, `s0 >= 2`, `(s0 + s1) % 8 == 3`: `linear_relation`), the check runs
them as one step of the native guard program instead (`guards/native/size_relations.h`: no
Python read of `x.shape[0]`, no call of the compiled function); that function stays the
reference the tests compare it with.
"""
from __future__ import annotations

import ast
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

    def native_form(self) -> tuple | None:
        """(sources of the tensors read, reads, relations) as the native program's sizes step
        takes them, or None where a read is not a tensor's or a condition is not linear."""
        if any(read.kind == "value" for _, read in self.bindings):
            return None
        symbols = {symbol: position for position, (symbol, _) in enumerate(self.bindings)}
        relations = [linear_relation(condition, symbols) for condition in self.conditions]
        if None in relations:
            return None
        sources = list(dict.fromkeys(read.source for _, read in self.bindings))
        reads = tuple((sources.index(read.source), READ_KINDS[read.kind], read.index or 0)
                      for _, read in self.bindings)
        return sources, reads, tuple(relations)

    def emit(self, writer: Any) -> None:
        writer.comment(self.describe())
        form = self.native_form() if writer.program is not None else None
        if form is not None:
            sources, reads, relations = form
            variables = [writer.value(source) for source in sources]
            if writer.check_sizes(variables, reads, relations, "shape relations hold"):
                return
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


READ_KINDS = {"size": 0, "stride": 1, "storage_offset": 2}
"""A `SizeRead`'s kind as the native sizes step numbers it (size_relations.h `ReadKind`)."""

COMPARISONS = {ast.Eq: 0, ast.NotEq: 1, ast.GtE: 2, ast.Gt: 3, ast.LtE: 4, ast.Lt: 5}
_INT64 = 2 ** 63


def linear_relation(condition: str, symbols: dict) -> tuple | None:
    """`condition` as (comparison, modulus, constant, terms, right) meaning
    `(sum(coefficient * read) + constant) [% modulus] <comparison> right`, terms being
    (coefficient, read position) and `symbols` mapping names to positions; None where it is
    not of that form (a floor division, a product of symbols, `math.floor`, `and`...)."""
    try:
        tree = ast.parse(condition, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.Compare) or len(tree.ops) != 1 or \
            type(tree.ops[0]) not in COMPARISONS:
        return None
    comparison = COMPARISONS[type(tree.ops[0])]
    left, right = tree.left, tree.comparators[0]
    modulus = 0
    if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod):
        divisor, remainder = _linear(left.right, symbols), _linear(right, symbols)
        if divisor is None or divisor[0] or not divisor[1] or remainder is None or remainder[0]:
            return None
        modulus, left, right = divisor[1], left.left, ast.Constant(remainder[1])
    first, second = _linear(left, symbols), _linear(right, symbols)
    if first is None or second is None:
        return None
    if modulus:
        terms, constant, bound = first[0], first[1], second[1]
    else:   # everything on the left: first - second <comparison> 0
        terms = dict(first[0])
        for position, coefficient in second[0].items():
            terms[position] = terms.get(position, 0) - coefficient
        constant, bound = first[1] - second[1], 0
    numbers = [modulus, constant, bound, *terms.values()]
    if any(not -_INT64 <= number < _INT64 for number in numbers):
        return None
    return (comparison, modulus, constant,
            tuple((coefficient, position) for position, coefficient in sorted(terms.items())
                  if coefficient), bound)


def _linear(node: ast.expr, symbols: dict) -> tuple[dict, int] | None:
    """({read position: coefficient}, constant) of an integer-linear expression, else None."""
    if isinstance(node, ast.Name):
        return ({symbols[node.id]: 1}, 0) if node.id in symbols else None
    if isinstance(node, ast.Constant):
        return ({}, node.value) if type(node.value) is int else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _linear(node.operand, symbols)
        if inner is None or isinstance(node.op, ast.UAdd):
            return inner
        return {key: -value for key, value in inner[0].items()}, -inner[1]
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        return None
    first, second = _linear(node.left, symbols), _linear(node.right, symbols)
    if first is None or second is None:
        return None
    if isinstance(node.op, ast.Mult):
        if first[0] and second[0]:
            return None     # a product of symbols
        scale, (terms, constant) = (first[1], second) if not first[0] else (second[1], first)
        return {key: value * scale for key, value in terms.items()}, constant * scale
    sign = 1 if isinstance(node.op, ast.Add) else -1
    terms = dict(first[0])
    for key, value in second[0].items():
        terms[key] = terms.get(key, 0) + sign * value
    return terms, first[1] + sign * second[1]
