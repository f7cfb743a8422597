"""Guard sets (stage: guard; input: the guards installed while tracing one frame; output: one check
callable `check(L, G) -> bool`, readable failure reasons, and descriptions).

A `GuardSet` keeps guards deduplicated in insertion order and runs them by rank: type and
identity checks first, then constants and other plain values, object snapshots, all tensors
together (in one native call when `guards.native` is available), and torch global state once.
`compile()` generates one straight-line function (see `guards.codegen`); `failures()` is the
slow path that explains a rejection guard by guard.

When an object held by an identity guard dies, the set dies with it: its check's code is swapped
for one that rejects every frame (so the fast path pays nothing for liveness), and the callbacks
registered with `on_invalidate` run once, letting the cache drop the entry.
"""
from __future__ import annotations

import copy
import logging
import sys
from typing import Callable, Iterable, Iterator

from guards.codegen import REJECT_CODE, CheckWriter
from guards.kinds.aliasing import IdentityFacts, rebased
from guards.kinds.base import Guard
from guards.kinds.tensors import TensorMatchGuard, emit_together
from guards.kinds.values import AliasGuard
from guards.native import program as native_program
from guards.sources import Source

log = logging.getLogger("framejit.guards")

Check = Callable[[dict, dict], bool]


class GuardSet:
    """An ordered, deduplicated collection of guards that compiles to one check."""

    def __init__(self, guards: Iterable[Guard] = ()) -> None:
        self._guards: dict[Guard, None] = {}
        self._check: Check | None = None
        self._compiled: list[Check] = []
        self._callbacks: list[Callable[[GuardSet], None]] = []
        self._watched: set[int] = set()  # ids of held objects of sources already watched
        self.alive = True
        self.identities = IdentityFacts()
        """Which sources a trace treated as one object; compiled into partition guards."""
        self.extend(guards)

    def add(self, guard: Guard) -> bool:
        """Add `guard` unless an equal one is present; returns whether it was added."""
        if not isinstance(guard, Guard):
            raise TypeError(f"expected a Guard, got {type(guard).__name__}")
        if guard in self._guards:
            return False
        self._guards[guard] = None
        self._check = None
        guard.watch(self._guard_died)
        for step in guard.source.chain():  # objects bound into the check (`ObjectSource`)
            held = getattr(step, "held", None)
            if held is not None and id(held) not in self._watched:
                self._watched.add(id(held))
                held.watch(lambda guard=guard: self._guard_died(guard))
        return True

    def extend(self, guards: Iterable[Guard]) -> int:
        """Add every guard; returns how many were new."""
        return sum(self.add(guard) for guard in guards)

    def __len__(self) -> int:
        self._settle()
        return len(self._guards)

    def __iter__(self) -> Iterator[Guard]:
        return iter(self.ordered())

    def __contains__(self, guard: object) -> bool:
        return guard in self._guards

    def ordered(self) -> list[Guard]:
        """The guards in check order: by rank, then in the order they were added; guards read
        through an aliased source are read through its canonical one (see `AliasGuard`)."""
        self._settle()
        return sorted(_through_canonical(list(self._guards)), key=lambda guard: guard.rank)

    def _settle(self) -> None:
        """Add the partition guards the identity facts call for (see `guards.kinds.aliasing`)."""
        self.extend(self.identities.guards())

    def compile(self) -> Check:
        """The check function `check(L, G) -> bool` (built once, until guards are added).

        It has the attributes `guard_set` (this set) and `source_text` (its Python source).
        """
        self._settle()
        if self._check is not None:
            return self._check
        try:
            check, text = self._write(native_program.builder())
        except (TypeError, ValueError, OverflowError) as error:  # a value the program rejects
            log.debug("guards kept in Python: %s", error)
            check, text = self._write(None)
        check.guard_set = self
        check.source_text = text
        if not self.alive:
            check.__code__ = REJECT_CODE
        self._check = check
        self._compiled.append(check)
        log.debug("compiled %d guards:\n%s", len(self), text)
        return check

    def _write(self, program) -> tuple[Check, str]:
        writer = CheckWriter(program)
        ordered = self.ordered()
        tensors = [guard for guard in ordered if isinstance(guard, TensorMatchGuard)]
        together = False
        for guard in ordered:
            if isinstance(guard, TensorMatchGuard):
                if guard is tensors[0]:
                    together = emit_together(tensors, writer)
                if together:
                    continue
            guard.emit(writer)
        return writer.build()

    def failures(self, L: dict, G: dict) -> list[str]:
        """The reason of every guard that does not hold for the frame view, first failing first.

        Empty when every guard holds. Never raises. Once a guard on a source fails, guards on
        that source and on sources reached through it are not evaluated (their reasons would
        be noise, and reading them could run arbitrary code on an unexpected object).
        """
        reasons: dict[str, None] = {}
        failed: set[Source] = set()
        for guard in self.ordered():
            if failed and not failed.isdisjoint(guard.source.chain()):
                continue
            reason = _guard_failure(guard, L, G)
            if reason is not None:
                reasons[reason] = None
                failed.add(guard.source)
        return list(reasons)

    def describe(self) -> list[str]:
        """One readable line per guard, in check order."""
        return [guard.describe() for guard in self.ordered()]

    def on_invalidate(self, callback: Callable[[GuardSet], None]) -> None:
        """Call `callback(self)` once when the set dies (at once if it already has)."""
        if not self.alive:
            callback(self)
        else:
            self._callbacks.append(callback)

    def invalidate(self) -> None:
        """Make every check of this set reject from now on and run the invalidation callbacks."""
        if not self.alive:
            return
        self.alive = False
        for check in self._compiled:
            check.__code__ = REJECT_CODE
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("guard set invalidation callback failed")

    # bound on the class: at the very end the module's globals are None, `_finalizing` too
    # (33 "Exception ignored ... 'NoneType' object is not callable" at pytest workers' exit)
    _is_finalizing = staticmethod(sys.is_finalizing)

    def _guard_died(self, guard: Guard) -> None:
        if self._is_finalizing():  # objects die while the interpreter tears modules down
            return
        log.debug("guard died: %s", guard.describe())
        self.invalidate()

    def __repr__(self) -> str:
        state = "" if self.alive else ", dead"
        return f"<GuardSet of {len(self)} guards{state}>"




def _through_canonical(guards: list[Guard]) -> list[Guard]:
    """`guards` with every source that passes through an aliased source rebuilt on its
    canonical one, and the duplicates this makes dropped (first kept). Alias guards keep their
    own sources: each reads both of its sources as written, so that every alias the rewriting
    relies on is checked on its own (rewritten alias checks could vouch for each other)."""
    aliases = {guard.source: guard.canonical for guard in guards if isinstance(guard, AliasGuard)}
    if not aliases:
        return guards
    rebuilt: dict[Source, Source] = {}
    kept: dict[Guard, None] = {}
    for guard in guards:
        if not isinstance(guard, AliasGuard):
            source = rebased(guard.source, aliases, rebuilt)
            if source is not guard.source:
                guard = copy.copy(guard)
                guard.source = source
        kept.setdefault(guard, None)
    return list(kept)


def _guard_failure(guard: Guard, L: dict, G: dict) -> str | None:
    try:
        value = guard.source.fetch(L, G)
    except Exception:
        return _fetch_failure(guard.source, L, G)
    try:
        return guard.reason_in(value, L, G)
    except Exception as error:
        return f"{guard.describe()}: could not be checked ({type(error).__name__}: {error})"


def _fetch_failure(source: Source, L: dict, G: dict) -> str:
    """Why `source` cannot be read, naming the first step of its chain that fails."""
    for step in source.chain():
        try:
            step.fetch(L, G)
        except Exception as error:
            return f"{step.name()}: could not be read ({type(error).__name__}: {error})"
    return f"{source.name()}: could not be read"
