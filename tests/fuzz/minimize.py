"""Shrinking a failing program to a short repro that fails the same way.

Stage: minimization. Input: a failing `Program`, its `Outcome` and a trial function (source ->
Outcome). Output: a smaller `Program` with the same failure fingerprint (kind, and for raised
errors the jitted exception's class and the first words of its message).

Edits, repeated while any helps: drop calls; delete statements (each deletion also deletes
every statement that uses a name the deleted one bound, so the program stays valid); replace a
compound statement by one of its bodies; drop parameters and the setup lines that change
globals between calls; replace an expression by a sub-expression of the same slot. A candidate
counts only if it fails with the same fingerprint and its eager runs raise no exception class
the original's did not (so a deletion that merely broke the program is not mistaken for the
bug).
"""
from __future__ import annotations

import re
import time
from typing import Callable, Iterator, Optional

from tests.fuzz import slots
from tests.fuzz.tree import CallSpec, Clause, Program, Stmt

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def fingerprint(outcome) -> str:
    """What must stay the same while shrinking: the kind, plus the jitted exception's class
    and the first words of its message for raised-error kinds (a RuntimeError of autograd
    must not shrink into another RuntimeError)."""
    if outcome.status != "fail":
        return outcome.status
    if outcome.kind in ("internal_error", "exception"):
        found = re.search(r"jitted(?: raised:)? (\w+)(?:: ([^(\n]*))?", outcome.detail)
        if not found:
            return outcome.kind
        words = _WORD.findall(found.group(2) or "")[:4]
        return f"{outcome.kind}:{found.group(1)}:{' '.join(words)}"
    return outcome.kind


_WORD = re.compile(r"[A-Za-z_]+")


class Minimizer:
    def __init__(self, program: Program, outcome, trial: Callable, max_trials: int = 400,
                 max_seconds: float = 300.0, log: Optional[Callable] = None):
        self.best = program.clone()
        self.target = fingerprint(outcome)
        self.errors = set(outcome.stats.get("eager_errors", []))
        self.trial = trial
        self.max_trials = max_trials
        self.deadline = time.monotonic() + max_seconds
        self.trials = 0
        self.log = log or (lambda text: None)
        self.last = outcome

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> Program:
        self._drop_later_calls()
        for _ in range(4):
            before = self.best.source()
            for step in (self._delete_top, self._delete_statements, self._unwrap,
                         self._drop_calls, self._drop_params, self._drop_setup,
                         self._simplify_expressions):
                step()
                if self._exhausted():
                    return self.best
            if self.best.source() == before:
                break
        return self.best

    def _exhausted(self) -> bool:
        return self.trials >= self.max_trials or time.monotonic() > self.deadline

    def _accept(self, candidate: Program) -> bool:
        if self._exhausted():
            return False
        self.trials += 1
        outcome = self.trial(candidate)
        raised = set(outcome.stats.get("eager_errors", []))
        if fingerprint(outcome) == self.target and raised <= self.errors:
            self.best, self.last = candidate, outcome
            self.log(f"trial {self.trials}: {candidate.statement_count()} statements")
            return True
        return False

    # -- edits ------------------------------------------------------------------------------
    def _drop_later_calls(self) -> None:
        failing = self.last.call
        if 0 <= failing < len(self.best.calls) - 1:
            candidate = self.best.clone()
            candidate.calls = candidate.calls[:failing + 1]
            self._accept(candidate)

    def _delete_top(self) -> None:
        index = 0
        while index < len(self.best.top):
            stmt = self.best.top[index]
            if not stmt.pinned:
                candidate = self.best.clone()
                removed = candidate.top[index].all_defs()
                del candidate.top[index]
                if prune(candidate, removed) and self._accept(candidate):
                    continue
            index += 1

    def _delete_statements(self) -> None:
        for path in sorted(statement_paths(self.best), key=lambda p: -_size(self.best, p)):
            if self._exhausted():
                return
            if len(path) == 1 or not _still_there(self.best, path):
                continue
            stmt = locate(self.best, path)
            if stmt.pinned:
                continue
            candidate = self.best.clone()
            removed = locate(candidate, path).all_defs()
            replace(candidate, path, [])
            if prune(candidate, removed):
                self._accept(candidate)

    def _unwrap(self) -> None:
        for path in statement_paths(self.best):
            if self._exhausted():
                return
            if len(path) == 1 or not _still_there(self.best, path):
                continue
            stmt = locate(self.best, path)
            if stmt.pinned or not stmt.bodies():
                continue
            for body_index in range(len(stmt.bodies())):
                candidate = self.best.clone()
                target = locate(candidate, path)
                kept = target.bodies()[body_index]
                inner = set().union(*(s.all_defs() for s in kept)) if kept else set()
                removed = target.all_defs() - inner
                replace(candidate, path, list(kept))
                if prune(candidate, removed) and self._accept(candidate):
                    break

    def _drop_calls(self) -> None:
        index = 0
        while index < len(self.best.calls) and len(self.best.calls) > 1:
            candidate = self.best.clone()
            del candidate.calls[index]
            if not self._accept(candidate):
                index += 1

    def _drop_params(self) -> None:
        for param in list(self.best.params):
            if param not in self.best.params:
                continue
            candidate = self.best.clone()
            drop_param(candidate, param)
            if prune(candidate, {param}):
                self._accept(candidate)

    def _drop_setup(self) -> None:
        for call_index in range(len(self.best.calls)):
            line = 0
            while call_index < len(self.best.calls) and \
                    line < len(self.best.calls[call_index].setup):
                candidate = self.best.clone()
                del candidate.calls[call_index].setup[line]
                if not self._accept(candidate):
                    line += 1

    def _simplify_expressions(self) -> None:
        for path in statement_paths(self.best):
            if self._exhausted():
                return
            if not _still_there(self.best, path):
                continue
            stmt = locate(self.best, path)
            for clause_index, clause in enumerate(stmt.clauses):
                for expr_index in range(len(clause.exprs)):
                    self._simplify_expr(path, clause_index, expr_index)

    def _simplify_expr(self, path, clause_index, expr_index) -> None:
        """Replace nodes of one top expression by same-slot descendants, outermost first."""
        progress = True
        while progress and not self._exhausted():
            progress = False
            root = locate(self.best, path).clauses[clause_index].exprs[expr_index]
            for node_path, node in _expr_nodes(root):
                for child_path, child in _expr_nodes(node):
                    if child is node or not _same(child.slot, node.slot):
                        continue
                    candidate = self.best.clone()
                    clause = locate(candidate, path).clauses[clause_index]
                    full = node_path + child_path
                    clause.exprs[expr_index] = _swap(clause.exprs[expr_index], node_path,
                                                     _get(clause.exprs[expr_index], full))
                    if self._accept(candidate):
                        progress = True
                        break
                if progress:
                    break


# -- tree addressing ----------------------------------------------------------------------------
def statement_paths(program: Program) -> list:
    """Paths of every statement: (i,) at top level, then (clause, index) pairs inward."""
    paths = []

    def visit(stmt: Stmt, path: tuple) -> None:
        paths.append(path)
        for clause_index, clause in enumerate(stmt.clauses):
            for index, inner in enumerate(clause.body or []):
                visit(inner, path + (clause_index, index))

    for index, stmt in enumerate(program.top):
        visit(stmt, (index,))
    return paths


def locate(program: Program, path: tuple) -> Stmt:
    stmt = program.top[path[0]]
    for offset in range(1, len(path), 2):
        stmt = stmt.clauses[path[offset]].body[path[offset + 1]]
    return stmt


def _still_there(program: Program, path: tuple) -> bool:
    try:
        locate(program, path)
    except (IndexError, TypeError):
        return False
    return True


def replace(program: Program, path: tuple, stmts: list) -> None:
    if len(path) == 1:
        program.top[path[0]:path[0] + 1] = stmts
        return
    parent = locate(program, path[:-2])
    parent.clauses[path[-2]].body[path[-1]:path[-1] + 1] = stmts


def _size(program: Program, path: tuple) -> int:
    stmt = locate(program, path)
    return 1 + sum(_size_of(inner) for body in stmt.bodies() for inner in body)


def _size_of(stmt: Stmt) -> int:
    return 1 + sum(_size_of(inner) for body in stmt.bodies() for inner in body)


def prune(program: Program, removed: set) -> bool:
    """Delete every statement, call argument and setup line that uses a removed name (and
    what depends on those); False if that would delete the entry function."""
    removed = set(removed)
    changed = True
    while changed:
        changed = False
        for param in list(program.params):
            if param not in removed and any(_mentions(call.args[program.params.index(param)],
                                                      removed) for call in program.calls):
                drop_param(program, param)
                removed.add(param)
                changed = True
        for block in _blocks(program):
            kept = []
            for stmt in block:
                if stmt.head_uses() & removed:
                    if "fn" in stmt.defs:
                        return False
                    removed |= stmt.all_defs()
                    changed = True
                else:
                    kept.append(stmt)
            block[:] = kept
    for call in program.calls:
        call.setup = [(line, names) for line, names in call.setup if not names & removed]
    return True


def _blocks(program: Program) -> Iterator[list]:
    def visit(block: list):
        yield block
        for stmt in list(block):
            for body in stmt.bodies():
                yield from visit(body)
    yield from visit(program.top)


def _mentions(text: str, names: set) -> bool:
    return bool(set(_IDENTIFIER.findall(text)) & names)


def drop_param(program: Program, param: str) -> None:
    index = program.params.index(param)
    del program.params[index]
    for call in program.calls:
        del call.args[index]
    entry = program.entry()
    entry.clauses[-1].head = f"def fn({', '.join(program.params)}):"


def _expr_nodes(expr, path=()):
    yield path, expr
    for index, arg in enumerate(expr.args):
        yield from _expr_nodes(arg, path + (index,))


def _get(expr, path):
    for index in path:
        expr = expr.args[index]
    return expr


def _swap(expr, path, new):
    if not path:
        return new
    parent = _get(expr, path[:-1])
    parent.args[path[-1]] = new
    return expr


def _same(a, b) -> bool:
    return a is not None and b is not None and slots.same_slot(a, b)


__all__ = ["Minimizer", "fingerprint", "prune", "CallSpec", "Clause"]
