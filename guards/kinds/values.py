"""Guards on plain Python values (stage: guard; input: a source and what was seen at capture;
output: check conditions and failure reasons).

Kinds: exact type, identity (held by weak reference), None-ness, truthiness, length, dict keys in
order, and presence or absence of an attribute. Constant equality lives in `constants.py`.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable

from guards import messages
from guards.held import HeldObject
from guards.kinds.base import RANK_TYPE, RANK_VALUE, Guard
from guards.sources import Source


class TypeGuard(Guard):
    """The value's type is exactly `expected` (no subclasses): `type(L['cfg']) is Config`.

    Classes defined in Python (heap types) are held weakly (see `guards.held`): the check
    compares the type's id, and the guard dies with the class. A one-off class such as the
    subclass `dynamo.jit(module)` makes would otherwise keep its module alive through the
    entries cached on `forward`'s code.
    """

    rank = RANK_TYPE

    def __init__(self, source: Source, expected: type) -> None:
        self.source = source
        self._name = messages.type_name(expected)
        if expected.__flags__ & _HEAPTYPE:
            self.held: HeldObject | None = HeldObject(expected)
            self._expected = None
        else:
            self.held, self._expected = None, expected

    @property
    def expected(self) -> type | None:
        """The class (None once a weakly held class has died)."""
        return self._expected if self.held is None else self.held.get()

    def watch(self, callback: Callable[[Guard], None]) -> None:
        if self.held is not None:
            self.held.watch(lambda: callback(self))

    def key(self) -> Hashable:
        return self._expected if self.held is None else ("class", self.held.object_id)

    def emit(self, writer: Any) -> None:
        variable = writer.value(self.source)
        if self.held is None:
            writer.check_type(variable, self._expected)
        else:
            writer.check_type_id(variable, self.held.object_id, self._name)

    def reason(self, value: Any) -> str | None:
        expected = self.expected
        if expected is None:
            return f"type({self.source.name()}): the class seen at capture ({self._name}) " \
                "was freed"
        if type(value) is expected:
            return None
        expected_name, got = messages.type_names(expected, type(value))
        return messages.mismatch(f"type({self.source.name()})", expected_name, got)

    def describe(self) -> str:
        return f"type({self.source.name()}) is {self._name}"


_HEAPTYPE = 1 << 9


class IdentityGuard(Guard):
    """The value is the very object seen at capture: `L['fn'] is <function f>`.

    The object is held by a `HeldObject`: weakly when possible, and then the guard dies with it
    and tells its watchers (a `GuardSet` then rejects every frame and notifies the cache).
    """

    rank = RANK_TYPE

    def __init__(self, source: Source, expected: Any) -> None:
        self.source = source
        self.held = HeldObject(expected)

    def watch(self, callback: Callable[[Guard], None]) -> None:
        self.held.watch(lambda: callback(self))

    def key(self) -> Hashable:
        return self.held.object_id

    def emit(self, writer: Any) -> None:
        variable = writer.value(self.source)
        writer.comment(self.describe())
        writer.check_identity(variable, self.held.object_id)

    def reason(self, value: Any) -> str | None:
        return identity_reason(self.source.name(), self.held, value)

    def describe(self) -> str:
        return f"{self.source.name()} is the object seen at capture ({self.held.text})"


def identity_reason(subject: str, held: HeldObject, value: Any) -> str | None:
    """The reason an identity comparison against `held` fails for `value`, or None."""
    if not held.alive:
        return f"{subject}: the object seen at capture ({held.text}) was freed"
    if id(value) == held.object_id:
        return None
    return messages.mismatch(subject, f"the same object as at capture ({held.text})",
                             f"a different object ({messages.show(value)})")


class NoneGuard(Guard):
    """The value is None (`is_none=True`) or is not None (`is_none=False`)."""

    rank = RANK_VALUE

    def __init__(self, source: Source, is_none: bool) -> None:
        self.source = source
        self.is_none = bool(is_none)

    def key(self) -> Hashable:
        return self.is_none

    def emit(self, writer: Any) -> None:
        writer.check_is(writer.value(self.source), None, "None", negate=not self.is_none)

    def reason(self, value: Any) -> str | None:
        if (value is None) == self.is_none:
            return None
        if self.is_none:
            return messages.mismatch(self.source.name(), "None", messages.show(value))
        return messages.mismatch(self.source.name(), "not None", "None")

    def describe(self) -> str:
        return f"{self.source.name()} is {'' if self.is_none else 'not '}None"


class TruthGuard(Guard):
    """The value's truthiness (`bool(value)`) is `expected`, e.g. after `if xs:` on a list."""

    rank = RANK_VALUE

    def __init__(self, source: Source, expected: bool) -> None:
        self.source = source
        self.expected = bool(expected)

    def key(self) -> Hashable:
        return self.expected

    def emit(self, writer: Any) -> None:
        variable = writer.fetch(self.source)
        writer.require([variable if self.expected else f"not {variable}"])

    def reason(self, value: Any) -> str | None:
        got = bool(value)
        if got == self.expected:
            return None
        return messages.mismatch(f"bool({self.source.name()})", str(self.expected), str(got))

    def describe(self) -> str:
        return f"bool({self.source.name()}) is {self.expected}"


class LengthGuard(Guard):
    """`len(value) == expected` (sequences, mappings, anything with `__len__`)."""

    rank = RANK_VALUE

    def __init__(self, source: Source, expected: int) -> None:
        self.source = source
        self.expected = int(expected)

    def key(self) -> Hashable:
        return self.expected

    def emit(self, writer: Any) -> None:
        writer.check_length(writer.value(self.source), self.expected)

    def reason(self, value: Any) -> str | None:
        subject = f"len({self.source.name()})"
        if not hasattr(type(value), "__len__"):
            return messages.mismatch(subject, str(self.expected), f"{messages.show(value)} "
                                     "(no length)")
        got = len(value)
        if got == self.expected:
            return None
        return messages.mismatch(subject, str(self.expected), str(got))

    def describe(self) -> str:
        return f"len({self.source.name()}) == {self.expected}"


def _key_types(keys: tuple) -> tuple | None:
    types = tuple(type(key) for key in keys)
    return None if all(kind is str for kind in types) else types


class DictKeysGuard(Guard):
    """The mapping's keys, in iteration order, equal `keys`.

    Key types are compared too unless every expected key is a `str` (then equality suffices and
    the check is one tuple comparison).
    """

    rank = RANK_VALUE

    def __init__(self, source: Source, keys: tuple) -> None:
        self.source = source
        self.keys = tuple(keys)
        self.key_types = _key_types(self.keys)

    def key(self) -> Hashable:
        return (self.keys, self.key_types)

    def emit(self, writer: Any) -> None:
        variable = writer.value(self.source)
        if self.key_types is None:
            writer.check_keys(variable, self.keys)
            return
        variable = writer.fetch(self.source)
        keys = writer.bind(self.keys, "keys")
        types = writer.bind(self.key_types, "key_types")
        writer.require([f"tuple({variable}) == {keys}",
                        f"tuple(map(type, {variable})) == {types}"])

    def reason(self, value: Any) -> str | None:
        if not hasattr(type(value), "__iter__"):
            return messages.mismatch(f"{self.source.name()}.keys()", _show_keys(self.keys),
                                     f"{messages.show(value)} (not a mapping)")
        got = tuple(value)
        if got == self.keys:
            if self.key_types is None or tuple(map(type, got)) == self.key_types:
                return None
        return messages.mismatch(f"{self.source.name()}.keys()", _show_keys(self.keys),
                                 _show_keys(got))

    def describe(self) -> str:
        return f"list({self.source.name()}.keys()) == {_show_keys(self.keys)}"


def _show_keys(keys: tuple) -> str:
    return "[" + ", ".join(messages.show(key) for key in keys) + "]"


class HasAttrGuard(Guard):
    """`hasattr(value, name)` is `present`: the attribute exists, or is still absent."""

    rank = RANK_VALUE

    def __init__(self, source: Source, attribute: str, present: bool) -> None:
        self.source = source
        self.attribute = attribute
        self.present = bool(present)

    def key(self) -> Hashable:
        return (self.attribute, self.present)

    def emit(self, writer: Any) -> None:
        variable = writer.fetch(self.source)
        test = f"hasattr({variable}, {self.attribute!r})"
        writer.require([test if self.present else f"not {test}"])

    def reason(self, value: Any) -> str | None:
        got = hasattr(value, self.attribute)
        if got == self.present:
            return None
        return messages.mismatch(self._subject(), str(self.present), str(got))

    def _subject(self) -> str:
        return f"hasattr({self.source.name()}, {self.attribute!r})"

    def describe(self) -> str:
        return f"{self._subject()} is {self.present}"


class AliasGuard(Guard):
    """Two sources name one object: `L['self'].bert.config is L['self'].config`.

    The tracer records one when it meets an object it already reached through another source
    (`canonical`, the first). The guard set then reads every other guard through `canonical`
    instead of `source` (`GuardSet.ordered`): a model whose layers each reach one shared
    configuration object reads each of its attributes once per check, not once per layer
    (a class with a Python `__getattribute__`, as transformers' configurations have, costs
    about 1 us a read). The alias guard itself reads both sources as they are.
    """

    rank = RANK_VALUE

    def __init__(self, source: Source, canonical: Source) -> None:
        self.source = source
        self.canonical = canonical

    def key(self) -> Hashable:
        return self.canonical

    def emit(self, writer: Any) -> None:
        first, second = writer.value(self.source), writer.value(self.canonical)
        writer.comment(self.describe())
        writer.check_same(first, second)

    def reason(self, value: Any) -> str | None:
        return None     # needs the other source's value too: see `reason_in`

    def reason_in(self, value: Any, L: dict, G: dict) -> str | None:
        try:
            other = self.canonical.fetch(L, G)
        except Exception as error:  # noqa: BLE001  (any error of user code reading it)
            return f"{self.canonical.name()}: could not be read ({type(error).__name__})"
        if value is other:
            return None
        return messages.mismatch(self.source.name(), f"the object {self.canonical.name()} names",
                                 f"a different object ({messages.show(value)})")

    def describe(self) -> str:
        return f"{self.source.name()} is {self.canonical.name()}"


class ContainsGuard(Guard):
    """`key in value` is `present` for a dict: `'max' not in G` (the builtin a trace used is
    not shadowed by a global defined since), `'tag' in L['x'].__dict__`."""

    rank = RANK_VALUE

    def __init__(self, source: Source, key: Hashable, present: bool) -> None:
        self.source = source
        self.entry = key
        self.present = bool(present)

    def key(self) -> Hashable:
        return (type(self.entry), self.entry, self.present)

    def emit(self, writer: Any) -> None:
        writer.check_contains(writer.value(self.source), self.entry, self.present)

    def reason(self, value: Any) -> str | None:
        got = self.entry in value
        if got == self.present:
            return None
        return messages.mismatch(self.describe().rsplit(" is ", 1)[0], str(self.present),
                                 str(got))

    def describe(self) -> str:
        return f"{self.entry!r} in {self.source.name()} is {self.present}"
