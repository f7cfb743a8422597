"""User objects and modules (stage: guard; input: an object seen at capture and the parts of it a
trace relied on; output: checks that the object was not mutated since, and readable reasons).

`ModuleTrainingGuard` checks an `nn.Module`'s `training` flag. `ObjectSnapshotGuard` checks an
`ObjectSnapshot`: selected entries of an object's instance `__dict__` (or of a dict inside it,
such as a module's `_parameters` or `_forward_hooks`), each expected absent, present, equal to a
constant, or the same object; and selected dicts whose keys must be unchanged, in order. The
tracer records an absence wherever a read went past the instance dict to the class (a method, a
class default, a missing attribute): an instance attribute set later shadows it.

The snapshot compares what is stored in `__dict__`, not what `getattr` returns, so it sees an
instance attribute shadowing a class attribute. It is pure data (paths and expectations), so a C
implementation (say, one using dict watchers on 3.12) can replace `emit` without changing how
snapshots are taken.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Hashable, Iterable

from guards import messages
from guards.kinds.base import RANK_OBJECT, RANK_VALUE, Guard
from guards.kinds.constants import (constant_conditions, constant_key, constants_match,
                                    emit_native_constant, is_constant, show_difference)
from guards.kinds.values import HeldObject, identity_reason
from guards.sources import Source

MODULE_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks",
                     "_backward_hooks")
"""Per-module hook registries: a hook added after capture must make the check fail."""


class ModuleTrainingGuard(Guard):
    """An `nn.Module`'s `training` flag is `training` (train mode True, eval mode False)."""

    rank = RANK_VALUE

    def __init__(self, source: Source, training: bool) -> None:
        self.source = source
        self.training = bool(training)

    def key(self) -> Hashable:
        return self.training

    def emit(self, writer: Any) -> None:
        variable = writer.value(self.source)
        training = writer.derive(variable, "attribute", "training", f"{variable}_training")
        writer.check_is(training, self.training, repr(self.training))

    def reason(self, value: Any) -> str | None:
        got = value.training
        if got is self.training:
            return None
        return messages.mismatch(f"{self.source.name()}.training", _mode(self.training),
                                 _mode(got) if type(got) is bool else messages.show(got))

    def describe(self) -> str:
        return f"{self.source.name()}.training is {self.training}"


def _mode(training: bool) -> str:
    return f"{training} ({'train' if training else 'eval'} mode)"


ABSENT = "absent"
PRESENT = "present"
CONSTANT = "constant"
SAME = "same object"
KEYS = "keys"


@dataclasses.dataclass(frozen=True, eq=False)
class SnapshotEntry:
    """One expectation on `__dict__[path[0]][path[1]]...` of the snapshotted object."""

    path: tuple[str, ...]
    kind: str
    value: Any = None
    held: HeldObject | None = None

    def key(self) -> Hashable:
        if self.kind == CONSTANT:
            return (self.path, self.kind, constant_key(self.value))
        if self.kind == SAME:
            return (self.path, self.kind, self.held.object_id)
        return (self.path, self.kind, self.value)

    def subject(self, owner: str) -> str:
        """How the entry reads: `L['self'].scale`, `L['self']._forward_hooks.keys()`."""
        if self.kind == KEYS:
            parts = self.path or ("__dict__",)
            return owner + "".join("." + part for part in parts) + ".keys()"
        parts = [part for part in self.path if part not in _REGISTRIES]
        return owner + "".join("." + part for part in parts)


_REGISTRIES = ("_parameters", "_buffers", "_modules")


def _lookup(namespace: dict, path: tuple[str, ...]) -> Any:
    value = namespace
    for part in path:
        value = value[part]
    return value


def _entry_for(namespace: dict, path: tuple[str, ...]) -> SnapshotEntry:
    try:
        value = _lookup(namespace, path)
    except (KeyError, TypeError):
        return SnapshotEntry(path, ABSENT)
    if is_constant(value):
        return SnapshotEntry(path, CONSTANT, value=value)
    return SnapshotEntry(path, SAME, held=HeldObject(value))


def _as_path(name: str | tuple[str, ...]) -> tuple[str, ...]:
    return (name,) if isinstance(name, str) else tuple(name)


@dataclasses.dataclass(frozen=True, eq=False)
class ObjectSnapshot:
    """What a trace relied on about one object's instance dict (see the module docstring)."""

    entries: tuple[SnapshotEntry, ...]

    @classmethod
    def capture(cls, target: Any, attributes: Iterable[str | tuple[str, ...]] = (),
                key_sets: Iterable[str | tuple[str, ...]] = ()) -> ObjectSnapshot:
        """Snapshot `attributes` (names, or paths into dicts held in `__dict__`) by value or
        identity, and the keys of the dicts at `key_sets` (the empty path: `__dict__` itself)."""
        namespace = vars(target)
        entries = []
        for path in map(_as_path, key_sets):
            entries.append(SnapshotEntry(path, KEYS, value=tuple(_lookup(namespace, path))))
        entries += [_entry_for(namespace, _as_path(name)) for name in attributes]
        return cls(tuple(entries))

    @classmethod
    def membership(cls, name: str | tuple[str, ...], present: bool) -> ObjectSnapshot:
        """Only that the instance dict (or, for a path, a dict in it: `("_modules", "fc")`)
        has or lacks the name, whatever its value."""
        return cls((SnapshotEntry(_as_path(name), PRESENT if present else ABSENT),))

    @classmethod
    def of_object(cls, target: Any) -> ObjectSnapshot:
        """Every instance attribute of a plain object, and the set of its attribute names."""
        return cls.capture(target, attributes=list(vars(target)), key_sets=[()])

    @classmethod
    def of_module_hooks(cls, module: Any) -> ObjectSnapshot:
        """The keys of a module's own hook registries (empty for most modules)."""
        return cls.capture(module, key_sets=[name for name in MODULE_HOOK_DICTS
                                             if name in vars(module)])

    def key(self) -> Hashable:
        return tuple(entry.key() for entry in self.entries)

    def held_objects(self) -> list[HeldObject]:
        return [entry.held for entry in self.entries if entry.held is not None]

    def first_difference(self, target: Any, owner: str) -> str | None:
        """The reason for the first entry `target` no longer satisfies, else None."""
        namespace = vars(target)
        for entry in self.entries:
            reason = _entry_reason(entry, namespace, owner)
            if reason is not None:
                return reason
        return None


def _entry_reason(entry: SnapshotEntry, namespace: dict, owner: str) -> str | None:
    subject = entry.subject(owner)
    if entry.kind == ABSENT:
        return _absence_reason(entry, namespace, subject)
    if entry.kind == PRESENT:
        try:
            present = entry.path[-1] in _lookup(namespace, entry.path[:-1])
        except (KeyError, TypeError):
            return f"{subject}: could not be read"
        return None if present else messages.mismatch(subject, "present", "absent")
    try:
        value = _lookup(namespace, entry.path)
    except (KeyError, TypeError):
        return messages.mismatch(subject, _show_expected(entry), "absent")
    if entry.kind == KEYS:
        got = tuple(value)
        if got == entry.value:
            return None
        return messages.mismatch(subject, _show_keys(entry.value), _show_keys(got))
    if entry.kind == CONSTANT:
        if constants_match(entry.value, value):
            return None
        return messages.mismatch(subject, *show_difference(entry.value, value))
    return identity_reason(subject, entry.held, value)


def _absence_reason(entry: SnapshotEntry, namespace: dict, subject: str) -> str | None:
    try:
        parent = _lookup(namespace, entry.path[:-1])
        present = entry.path[-1] in parent
    except (KeyError, TypeError):
        return f"{subject}: could not be read"
    if not present:
        return None
    return messages.mismatch(subject, "absent", messages.show(parent[entry.path[-1]]))


def _show_expected(entry: SnapshotEntry) -> str:
    if entry.kind == KEYS:
        return _show_keys(entry.value)
    if entry.kind == CONSTANT:
        return messages.show(entry.value)
    return f"the same object as at capture ({entry.held.text})"


def _show_keys(keys: tuple) -> str:
    return "[" + ", ".join(messages.show(key) for key in keys) + "]"


def _entry_conditions(entry: SnapshotEntry, namespace: str, writer: Any) -> list[str]:
    code = namespace + "".join(f"[{part!r}]" for part in entry.path)
    if entry.kind == ABSENT:
        parent = namespace + "".join(f"[{part!r}]" for part in entry.path[:-1])
        return [f"{entry.path[-1]!r} not in {parent}"]
    if entry.kind == PRESENT:
        return [f"{entry.path[-1]!r} in {namespace}"]
    if entry.kind == KEYS:
        if not entry.value:
            return [f"not {code}"]
        return [f"tuple({code}) == {writer.bind(entry.value, 'keys')}"]
    if entry.kind == CONSTANT:
        return constant_conditions(code, entry.value, writer)
    return [f"id({code}) == {entry.held.object_id}"]


class ObjectSnapshotGuard(Guard):
    """The object's instance dict still matches an `ObjectSnapshot` taken at capture."""

    rank = RANK_OBJECT

    def __init__(self, source: Source, snapshot: ObjectSnapshot) -> None:
        self.source = source
        self.snapshot = snapshot

    @classmethod
    def of(cls, source: Source, target: Any, attributes: Iterable[str | tuple[str, ...]] = (),
           key_sets: Iterable[str | tuple[str, ...]] = ()) -> ObjectSnapshotGuard:
        """Snapshot `target` now (see `ObjectSnapshot.capture`)."""
        return cls(source, ObjectSnapshot.capture(target, attributes, key_sets))

    def key(self) -> Hashable:
        return self.snapshot.key()

    def watch(self, callback: Any) -> None:
        for held in self.snapshot.held_objects():
            held.watch(lambda: callback(self))

    def emit(self, writer: Any) -> None:
        if not self.snapshot.entries:
            return
        variable = writer.value(self.source)
        if writer.native(variable):
            self._emit_native(variable, writer)
            return
        variable = writer.fetch(self.source)
        namespace = writer.assign(f"{variable}.__dict__", f"{variable}_dict")
        conditions = []
        for entry in self.snapshot.entries:
            conditions += _entry_conditions(entry, namespace, writer)
        writer.comment(self.describe())
        writer.require(conditions)

    def _emit_native(self, variable: str, writer: Any) -> None:
        """The entries as native steps, except absences and constants the program cannot
        compare, which stay Python conditions on the exported dict."""
        namespace = writer.derive(variable, "attribute", "__dict__", f"{variable}_dict")
        writer.comment(self.describe())
        empty = tuple(entry.path[0] for entry in self.snapshot.entries
                      if entry.kind == KEYS and not entry.value and len(entry.path) == 1)
        writer.check_falsy_items(namespace, empty)
        for entry in self.snapshot.entries:
            if entry.kind == KEYS and not entry.value and len(entry.path) == 1:
                continue  # among `empty`
            if entry.kind in (ABSENT, PRESENT):
                parent = namespace
                for part in entry.path[:-1]:
                    parent = writer.derive(parent, "item", part, f"{parent}_{part}")
                writer.check_contains(parent, entry.path[-1], entry.kind == PRESENT)
                continue
            target = namespace
            for part in entry.path:
                target = writer.derive(target, "item", part, f"{target}_{part}")
            if entry.kind == KEYS and not entry.value:
                writer.check_falsy(target)
            elif entry.kind == KEYS:
                writer.check_keys(target, entry.value)
            elif entry.kind == SAME:
                writer.check_identity(target, entry.held.object_id)
            elif not emit_native_constant(target, entry.value, writer):
                writer.require(constant_conditions(writer.export(target), entry.value, writer))

    def reason(self, value: Any) -> str | None:
        return self.snapshot.first_difference(value, self.source.name())

    def describe(self) -> str:
        parts = []
        for entry in self.snapshot.entries:
            subject = entry.subject(self.source.name())
            if entry.kind in (ABSENT, PRESENT):
                parts.append(f"{subject} {entry.kind}")
            elif entry.kind == KEYS and not entry.value:
                parts.append(f"{subject.removesuffix('.keys()')} empty")
            else:
                parts.append(f"{subject} == {_show_expected(entry)}")
        return f"{self.source.name()} unchanged since capture: " + "; ".join(parts)
