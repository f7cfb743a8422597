"""Aliasing between inputs (stage: guard; input: the objects a trace reached and which of them it
treated as one; output: checks that the frame's inputs alias the same way, and reasons).

A trace makes identity-based decisions: one placeholder for a tensor reached through two
sources, one box for a list passed twice, `a is b` folded to a constant, a mutation of one
object not seen through another. Those decisions hold only while the inputs alias as they did
at capture, both ways:

- *same*: two sources the trace merged must still name one object (`AliasGuard`, in
  `values.py`, one per extra source);
- *distinct*: objects the trace kept apart must stay apart where it matters (an object whose
  attributes or items the trace changed, one whose identity it looked at; plain containers
  and user objects always): `PartitionGuard` over the sources of one exact type (objects of
  different types are distinct already, by their type guards);
- *storage*: when the graph mutates an input tensor, which input tensors share a storage (a
  view of another input passed as an argument): `PartitionGuard(by_storage=True)` over every
  input tensor, since the trace ran the mutation on fake tensors that shared storage exactly
  as the inputs did.

`IdentityFacts` collects what the tracer reached (`note`), what mattered (`mark`, and
predicates evaluated when the guard set is compiled, after the trace), and turns them into
partition guards (`guards()`). Checking a partition is O(n) in the number of sources (one native
step: a table from each object or storage to its label).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Hashable

import torch

from guards import messages
from guards.kinds.base import RANK_TENSOR, RANK_VALUE, Guard
from guards.kinds.values import AliasGuard
from guards.sources import Source


def object_labels(*values: Any) -> tuple[int, ...]:
    """Group labels by identity: `object_labels(a, b, a) == (0, 1, 0)`."""
    seen: dict[int, int] = {}
    return tuple(seen.setdefault(id(value), len(seen)) for value in values)


_storage_address = torch._C._storage_address   # the StorageImpl's address: the native key


def storage_key(tensor: Any) -> int:
    """What identifies a tensor's storage (raises for values without one): the address of
    its StorageImpl, as the native partition step compares (`untyped_storage()._cdata`, without
    making a storage object)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(tensor).__name__}")
    return _storage_address(tensor)


def storage_labels(*tensors: Any) -> tuple[int, ...]:
    """Group labels by storage: `storage_labels(x, x[1:], y) == (0, 0, 1)`. Run by guard
    checks whose tensors the native program does not read (an optimizer's state, 600 tensors
    for GPT-2's AdamW step): all storages distinct is answered from a set."""
    try:
        keys = list(map(_storage_address, tensors))   # TypeError for a value not a tensor
    except TypeError:
        keys = [storage_key(tensor) for tensor in tensors]
    if len(set(keys)) == len(keys):
        return tuple(range(len(keys)))
    seen: dict[int, int] = {}
    return tuple(seen.setdefault(key, len(seen)) for key in keys)


def has_storage(tensor: torch.Tensor) -> bool:
    """Whether a tensor has a storage a partition can compare (dense, strided)."""
    if tensor.layout is not torch.strided or tensor.is_nested:
        return False
    try:
        storage_key(tensor)
    except Exception:  # noqa: BLE001  (functional, sparse, or other storage-less tensors)
        return False
    return True


class PartitionGuard(Guard):
    """Sources name one object (or, `by_storage`, tensors share one storage) exactly where
    their labels are equal: `(L['a'], L['b'])` labelled `(0, 1)` must be two objects."""

    def __init__(self, sources: tuple[Source, ...], labels: tuple[int, ...],
                 by_storage: bool = False) -> None:
        if len(sources) != len(labels) or len(sources) < 2:
            raise ValueError("a partition guard needs two or more sources, one label each")
        self.sources = tuple(sources)
        self.source = self.sources[0]
        seen: dict = {}
        self.labels = tuple(seen.setdefault(label, len(seen)) for label in labels)  # canonical
        self.by_storage = bool(by_storage)
        self.rank = RANK_TENSOR if by_storage else RANK_VALUE

    def key(self) -> Hashable:
        return (self.sources, self.labels, self.by_storage)

    def emit(self, writer: Any) -> None:
        variables = [writer.value(source) for source in self.sources]
        writer.comment(self.describe())
        writer.check_partition(variables, self.labels, self.by_storage, self.describe())

    def reason(self, value: Any) -> str | None:
        return None  # needs every source's value: see `reason_in`

    def reason_in(self, value: Any, L: dict, G: dict) -> str | None:
        values = []
        for source in self.sources:
            try:
                values.append(source.fetch(L, G))
            except Exception as error:  # noqa: BLE001  (any error of user code reading it)
                return f"{source.name()}: could not be read ({type(error).__name__})"
        try:
            got = (storage_labels if self.by_storage else object_labels)(*values)
        except Exception as error:  # noqa: BLE001
            return f"{self.describe()}: could not be checked ({type(error).__name__})"
        for i, first in enumerate(self.sources):
            for j in range(i + 1, len(self.sources)):
                expected_same = self.labels[i] == self.labels[j]
                if (got[i] == got[j]) != expected_same:
                    return messages.mismatch(f"{first.name()} and {self.sources[j].name()}",
                                             self._relation(expected_same),
                                             self._relation(not expected_same))
        return None

    def _relation(self, same: bool) -> str:
        if self.by_storage:
            return "one storage" if same else "separate storages"
        return "one object" if same else "distinct objects"

    def describe(self) -> str:
        """`distinct objects: L['a'], L['b']`, or with groups sharing one storage
        `storages as captured: (L['a'] = L['b']), (L['c'])`."""
        groups: dict[int, list[str]] = {}
        for source, label in zip(self.sources, self.labels):
            groups.setdefault(label, []).append(source.name())
        what = "storages" if self.by_storage else "objects"
        if all(len(names) == 1 for names in groups.values()):
            return f"distinct {what}: " + ", ".join(names[0] for names in groups.values())
        return f"{what} as captured: " + ", ".join(f"({' = '.join(names)})"
                                                  for names in groups.values())


@dataclasses.dataclass
class _Reached:
    value: Any
    source: Source
    group: Hashable
    relevant: list  # bools and predicates: whether the object's identity mattered
    others: list = dataclasses.field(default_factory=list)  # further sources, not merged


class IdentityFacts:
    """What a trace assumed about which sources name one object (see the module docstring).

    Holds the objects it was told about until `guards()` runs (when the guard set compiles,
    after the trace); then only the guards remain.
    """

    def __init__(self) -> None:
        self._aliases: dict[Source, Source] = {}  # second source -> first (alias guards)
        self._reached: dict[int, _Reached] = {}
        self._tensors: dict[int, tuple[torch.Tensor, Source, list]] = {}
        self._settled: list[Guard] | None = None

    def note(self, value: Any, source: Source, relevant: bool | Callable[[], bool] = False,
             merged: bool = True) -> Source | None:
        """`value` was reached through `source`; returns the source it was first reached
        through when that is another one and the trace treats the two as one (`merged`: one
        box, one placeholder, one object variable): the caller guards that they stay one
        object. Values the trace does not merge (tuples) get that guard only if their identity
        turns out to matter (`guards()`)."""
        self._settled = None
        known = self._reached.get(id(value))
        if known is not None and known.value is value:
            self._add(known.relevant, relevant)
            if merged:
                return self.alias(source, known.source)
            if source != known.source:
                known.others.append(source)
            return None
        self._reached[id(value)] = _Reached(value, source, ("object", type(value)), [])
        self._add(self._reached[id(value)].relevant, relevant)
        return None

    def alias(self, source: Source, first: Source) -> Source | None:
        """`source` names the object first reached through `first`: returns `first` when that
        needs an alias guard, None when it follows from the alias guards already made (the
        object was reached through an object already known to be the same: a configuration's
        `__dict__` read through every layer's alias of one configuration)."""
        if rebased(source, self._aliases) == rebased(first, self._aliases):
            return None
        self._aliases[source] = first
        return first

    def note_tensor(self, tensor: torch.Tensor, source: Source,
                    mutated: Callable[[], bool]) -> None:
        """An input tensor (first source); `mutated()` tells, after the trace, whether the
        graph wrote to it."""
        self._settled = None
        if id(tensor) not in self._tensors and has_storage(tensor):
            self._tensors[id(tensor)] = (tensor, source, [mutated])

    def mark(self, value: Any, relevant: bool | Callable[[], bool] = True) -> None:
        """The identity of `value` (reached before) matters: an `is`, an `id()`, a dict key, a
        mutation."""
        known = self._reached.get(id(value))
        if known is not None and known.value is value:
            self._settled = None
            self._add(known.relevant, relevant)

    def mark_source(self, source: Source, relevant: bool | Callable[[], bool] = True) -> None:
        """`mark` for the object reached through `source`."""
        reached = self._at(source)
        if reached is not None:
            self._settled = None
            self._add(reached.relevant, relevant)

    def object_at(self, source: Source) -> Any:
        """The object reached through `source` (None if none was noted)."""
        reached = self._at(source)
        return None if reached is None else reached.value

    def _at(self, source: Source) -> _Reached | None:
        for reached in self._reached.values():
            if reached.source == source or source in reached.others:
                return reached
        return None

    @staticmethod
    def _add(flags: list, relevant) -> None:
        if relevant is True or callable(relevant):
            flags.append(relevant)

    def guards(self) -> list[Guard]:
        """The partition guards the trace's identity decisions need (computed once, then the
        objects are let go)."""
        if self._settled is None:
            self._settled = self._object_guards() + self._storage_guards()
            self._reached.clear()
            self._tensors.clear()
        return list(self._settled)

    def _object_guards(self) -> list[Guard]:
        groups: dict[Hashable, list[_Reached]] = {}
        for reached in self._reached.values():
            groups.setdefault(reached.group, []).append(reached)
        found: list[Guard] = []
        for members in groups.values():
            relevant = [member for member in members
                        if any(_holds(flag) for flag in member.relevant)]
            for member in relevant:  # sources of one object the trace did not merge
                found += [AliasGuard(other, member.source) for other in member.others
                          if self.alias(other, member.source) is not None]
            if len(members) > 1 and relevant:
                sources = tuple(member.source for member in members)
                found.append(PartitionGuard(sources, tuple(range(len(sources)))))
        return found

    def _storage_guards(self) -> list[Guard]:
        tensors = list(self._tensors.values())
        if len(tensors) < 2 or not any(_holds(flag) for _, _, flags in tensors
                                       for flag in flags):
            return []
        labels = storage_labels(*(tensor for tensor, _, _ in tensors))
        return [PartitionGuard(tuple(source for _, source, _ in tensors), labels,
                               by_storage=True)]


def rebased(source: Source, aliases: dict, memo: dict | None = None) -> Source:
    """`source` with its deepest aliased prefix replaced by the canonical source (`aliases`
    maps each second source to the first; the first may pass through an alias itself)."""
    memo = {} if memo is None else memo
    found = memo.get(source)
    if found is not None:
        return found
    memo[source] = source    # (a cycle of aliases, not expected, stops here unrewritten)
    if source in aliases:
        result = rebased(aliases[source], aliases, memo)
    elif getattr(source, "base", None) is None:
        result = source
    else:
        base = rebased(source.base, aliases, memo)
        result = source if base is source.base else dataclasses.replace(source, base=base)
    memo[source] = result
    return result


def _holds(flag) -> bool:
    return bool(flag()) if callable(flag) else bool(flag)
