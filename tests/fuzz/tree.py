"""The generated program as a tree that renders to Python source.

Stage: generation -> source, and the minimizer's edits. Input: statement and expression nodes
built by the constructs. Output: plain source text (`Program.source()`).

Every reference to a variable, helper, class or global goes through a `Name` expression, so
that each statement knows the names it uses; each statement lists the names it binds first
(`defs`). The minimizer relies on this: deleting a statement deletes every statement that uses
a name it bound, and an expression may be replaced by one of its sub-expressions of the same
slot. Source stays valid by construction through both edits.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Iterator, Optional

INDENT = "    "


@dataclasses.dataclass(eq=False)
class Expr:
    """`fmt.format(*rendered args)`; a leaf has no args (its text must not contain braces)."""

    fmt: str
    args: list
    slot: object
    names: frozenset = frozenset()  # the names this node itself refers to
    view: bool = False  # the value is a view of (or is) args[0]'s value
    contiguous: bool = False  # a tensor value known to be contiguous

    def render(self) -> str:
        if not self.args:
            return self.fmt
        return self.fmt.format(*(arg.render() for arg in self.args))

    def uses(self) -> set:
        found = set(self.names)
        for arg in self.args:
            found |= arg.uses()
        return found

    def walk(self) -> Iterator["Expr"]:
        yield self
        for arg in self.args:
            yield from arg.walk()


def name(text: str, slot=None) -> Expr:
    return Expr(text, [], slot, frozenset([text.split(".")[0]]))


def lit(text: str, slot=None) -> Expr:
    """A literal or fixed text that names no variable (braces are escaped)."""
    return Expr(text, [], slot)


def op(fmt: str, slot, *args: Expr, view: bool = False, contiguous: bool = False) -> Expr:
    return Expr(fmt, list(args), slot, view=view, contiguous=contiguous)


@dataclasses.dataclass(eq=False)
class Clause:
    """One header line (`if c:`, `else:`, `x = f(a)`) and, for compound statements, a body."""

    head: str  # a format string over the rendered exprs (literal braces doubled)
    exprs: list
    body: Optional[list] = None  # None: a simple statement

    def render_head(self) -> str:
        return self.head.format(*(expr.render() for expr in self.exprs))


@dataclasses.dataclass(eq=False)
class Stmt:
    """A statement: clauses rendered one after another (`if`/`else`, `try`/`except`)."""

    clauses: list
    defs: frozenset = frozenset()  # names bound here for the first time
    category: str = ""
    pinned: bool = False  # the minimizer never deletes it by itself (decls, the return)
    note: str = ""  # a comment rendered above it (fixed text)

    def head_uses(self) -> set:
        found = set()
        for clause in self.clauses:
            for expr in clause.exprs:
                found |= expr.uses()
        return found

    def bodies(self) -> list:
        return [clause.body for clause in self.clauses if clause.body is not None]

    def all_defs(self) -> set:
        found = set(self.defs)
        for body in self.bodies():
            for stmt in body:
                found |= stmt.all_defs()
        return found

    def render(self, depth: int, out: list) -> None:
        pad = INDENT * depth
        if self.note:
            out.append(f"{pad}# {self.note}")
        for clause in self.clauses:
            for line in clause.render_head().split("\n"):
                out.append(pad + line)
            if clause.body is not None:
                render_block(clause.body, depth + 1, out)

    def exprs(self) -> Iterator[tuple]:
        """(clause, index) of every top expression of the statement's own clauses."""
        for clause in self.clauses:
            for index in range(len(clause.exprs)):
                yield clause, index


def simple(head: str, *exprs: Expr, defs=(), category: str = "", pinned: bool = False) -> Stmt:
    return Stmt([Clause(head, list(exprs))], frozenset(defs), category, pinned)


def compound(clauses: list, defs=(), category: str = "") -> Stmt:
    """`clauses`: (head, exprs, body) triples."""
    return Stmt([Clause(head, list(exprs), list(body)) for head, exprs, body in clauses],
                frozenset(defs), category)


def render_block(body: list, depth: int, out: list) -> None:
    if not body:
        out.append(INDENT * depth + "pass")
        return
    for stmt in body:
        stmt.render(depth, out)


def walk_blocks(block: list) -> Iterator[list]:
    """Every statement list in `block`'s tree, `block` first."""
    yield block
    for stmt in block:
        for body in stmt.bodies():
            yield from walk_blocks(body)


@dataclasses.dataclass
class CallSpec:
    """One call of the entry function: setup lines (globals and attributes changed before the
    call), local bindings (for aliasing) and one argument expression per parameter."""

    setup: list  # (line, names it refers to)
    bindings: list  # (local name, expression text)
    args: list  # expression text per parameter, in order
    note: str = ""
    context: str = ""  # the mode the call runs in: a key of CALL_CONTEXTS ("": plain)


# The modes a call runs in: name -> (its arguments are made under torch.inference_mode, the
# call runs under: "" plain, "no_grad" or "inference_mode"). Rendered into a program's harness as
# `CONTEXTS = {call: name}` and read by the runner (execution.py) and the repro script.
CALL_CONTEXTS = {
    "": (False, ""),
    "no_grad": (False, "no_grad"),
    "inference_mode": (False, "inference_mode"),
    "inference_tensors": (True, "inference_mode"),
    "inference_tensors_outside": (True, ""),
}


PREAMBLE = '''\
import contextlib
import functools
import types

import torch


def _t(seed, *shape, dtype=torch.float32, grad=False):
    """A deterministic tensor of multiples of 0.25 in [-2, 2]."""
    values = torch.randint(-8, 9, shape, generator=torch.Generator().manual_seed(seed)) / 4
    return values.to(dtype).requires_grad_(grad)


def _tag(tensor, value):
    """The tensor, carrying a Python attribute."""
    tensor.tag = value
    return tensor
'''


@dataclasses.dataclass
class Program:
    """A whole generated program: top-level statements (globals, classes, helpers, the entry
    `fn`), its parameters, and the calls the runner makes."""

    seed: int
    top: list  # top-level statements; the entry function is one of them
    params: list  # parameter names of fn
    calls: list  # CallSpec per call
    features: set = dataclasses.field(default_factory=set)  # constructs used (for stats)
    harness_globals: list = dataclasses.field(default_factory=list)  # rebound by inputs()

    def entry(self) -> Stmt:
        return next(stmt for stmt in self.top if "fn" in stmt.defs)

    def source(self) -> str:
        out = [PREAMBLE]
        for stmt in self.top:
            out.append("")
            if stmt.bodies():
                out.append("")
            stmt.render(0, out)
        out.append("")
        out.append("")
        out.extend(self.harness_lines())
        return "\n".join(out) + "\n"

    def harness_lines(self) -> list:
        contexts = {index: call.context for index, call in enumerate(self.calls) if call.context}
        lines = [f"CALLS = {len(self.calls)}"] + ([f"CONTEXTS = {contexts!r}"] if contexts else [])
        lines += ["", "",
                 "def inputs(call):",
                 f'{INDENT}"""The arguments of call `call` (0..CALLS-1); globals and attributes '
                 'change first."""']
        defined = set().union(*(stmt.defs for stmt in self.top))
        assigned = sorted(name for name in self.harness_globals if name in defined)
        if assigned:
            lines.append(f"{INDENT}global {', '.join(assigned)}")
        for index, call in enumerate(self.calls):
            lines.append(f"{INDENT}if call == {index}:" + (f"  # {call.note}" if call.note else ""))
            for line, _ in call.setup:
                lines.append(INDENT * 2 + line)
            for local, text in call.bindings:
                lines.append(f"{INDENT * 2}{local} = {text}")
            args = ", ".join(call.args)
            lines.append(f"{INDENT * 2}return ({args}{',' if len(call.args) == 1 else ''})")
        lines.append(f"{INDENT}raise IndexError(call)")
        return lines

    def clone(self) -> "Program":
        return copy.deepcopy(self)

    def statement_count(self) -> int:
        return sum(len(block) for stmt in self.top for block in walk_blocks([stmt]))
