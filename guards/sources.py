"""Sources: where a guarded value lives in a frame (stage: guard; input: a frame view; output:
a value).

A frame view is the pair the frame hook hands to every check: `L`, a dict of the frame's locals at
entry (arguments, closure free variables already read out of their cells, raw values of cell
arguments), and `G`, the function's globals dict.

Each source is an immutable, hashable value object that knows three things:

- `name()` / `str()`: readable text for people, e.g. `L['self'].lin.weight`;
- `expr()`: a Python expression over `L` and `G` that evaluates to the value, used by code
  generation (for module members it reads `_modules` / `_parameters` / `_buffers` directly,
  skipping `nn.Module.__getattr__`);
- `fetch(L, G)`: the value itself, for slow paths; it raises when the value cannot be read.

Sources compose: most take a `base` source and apply one step (attribute, item, type...).
Code generation evaluates each step once through `apply(base_code)`, so shared prefixes of many
sources (`L['self']._modules['lin']`) are fetched a single time per check.
"""
from __future__ import annotations

import dataclasses
import keyword
from typing import Any, ClassVar, Hashable

__all__ = [
    "Source", "LocalSource", "GlobalSource", "GlobalModuleSource", "AttrSource", "ItemSource",
    "DictItemSource", "TypeSource", "ClosureCellSource", "SubmoduleSource", "ParamSource",
    "BufferSource", "ConstantSource", "ObjectSource", "GlobalsSource", "CallSource",
    "MethodCallSource", "GlobalStateSource", "literal",
]

_LITERAL_TYPES = (int, str, bytes, bool, type(None))


def literal(value: Hashable) -> str | None:
    """`repr(value)` when it reads back as an equal value of the same type, else None.

    Used for dictionary keys and names embedded in generated code and readable text.
    """
    if type(value) in _LITERAL_TYPES:
        return repr(value)
    if type(value) is float and value == value and value not in (float("inf"), float("-inf")):
        return repr(value)
    return None


class Source:
    """Base of all sources: how to fetch one value from a frame view (`L`, `G`).

    Every source has a `base`: the source it applies one step to, or None for a root.
    """

    __slots__ = ()

    def name(self) -> str:
        """Readable text naming the value, as the user would write it."""
        raise NotImplementedError

    def expr(self) -> str:
        """A Python expression over `L` and `G` that evaluates to the value."""
        if self.base is None:
            return self.apply("")
        return self.apply(self.base.expr())

    def apply(self, base_code: str) -> str:
        """The expression of this step given the expression (or variable) of `base`."""
        raise NotImplementedError

    def fetch(self, L: dict, G: dict) -> Any:
        """The value in the frame view; raises when it cannot be read."""
        raise NotImplementedError

    def root(self) -> Source:
        """The first source of the chain (a local, a global, or a frame-independent source)."""
        source = self
        while source.base is not None:
            source = source.base
        return source

    def chain(self) -> list[Source]:
        """Every source of the chain, root first, this source last."""
        sources = [self]
        while sources[-1].base is not None:
            sources.append(sources[-1].base)
        return sources[::-1]

    def __str__(self) -> str:
        return self.name()


def _step_name(base: Source, suffix: str) -> str:
    return base.name() + suffix


def _attribute_suffix(attribute: str) -> str | None:
    if attribute.isidentifier() and not keyword.iskeyword(attribute):
        return "." + attribute
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class LocalSource(Source):
    """A local of the frame at entry: `L['x']` (arguments, free variables, cell arguments)."""

    local: str
    base: ClassVar[None] = None

    def name(self) -> str:
        return f"L[{self.local!r}]"

    def apply(self, base_code: str) -> str:
        return f"L[{self.local!r}]"

    def fetch(self, L: dict, G: dict) -> Any:
        return L[self.local]


@dataclasses.dataclass(frozen=True, slots=True)
class GlobalSource(Source):
    """A global of the function's module: `G['cfg']`."""

    global_name: str
    base: ClassVar[None] = None

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def apply(self, base_code: str) -> str:
        return f"G[{self.global_name!r}]"

    def fetch(self, L: dict, G: dict) -> Any:
        return G[self.global_name]


@dataclasses.dataclass(frozen=True, slots=True)
class GlobalModuleSource(GlobalSource):
    """A global bound to an imported module (`G['torch']`); rendered like any global."""


@dataclasses.dataclass(frozen=True, slots=True)
class AttrSource(Source):
    """An attribute of another value: `L['self'].lin`; chains render as `L['self'].lin.weight`."""

    base: Source
    attribute: str

    def name(self) -> str:
        suffix = _attribute_suffix(self.attribute)
        if suffix is None:
            return f"getattr({self.base.name()}, {self.attribute!r})"
        return _step_name(self.base, suffix)

    def apply(self, base_code: str) -> str:
        suffix = _attribute_suffix(self.attribute)
        if suffix is None:
            return f"getattr({base_code}, {self.attribute!r})"
        return base_code + suffix

    def fetch(self, L: dict, G: dict) -> Any:
        return getattr(self.base.fetch(L, G), self.attribute)


def _checked_key(key: Hashable) -> str:
    text = literal(key)
    if text is None:
        raise TypeError(f"a source key must be an int, str, bytes, bool, None or finite float, "
                        f"got {type(key).__name__}; guard the container another way")
    return text


@dataclasses.dataclass(frozen=True, slots=True)
class ItemSource(Source):
    """An element of a sequence by integer index: `L['xs'][0]`."""

    base: Source
    index: int

    def __post_init__(self) -> None:
        if type(self.index) is not int:
            raise TypeError(f"ItemSource index must be an int, got {type(self.index).__name__}")

    def name(self) -> str:
        return _step_name(self.base, f"[{self.index!r}]")

    def apply(self, base_code: str) -> str:
        return f"{base_code}[{self.index!r}]"

    def fetch(self, L: dict, G: dict) -> Any:
        return self.base.fetch(L, G)[self.index]


@dataclasses.dataclass(frozen=True, slots=True)
class DictItemSource(Source):
    """A value of a mapping by key: `L['d']['k']` (keys: literals such as str, int, bool, None)."""

    base: Source
    key: Hashable

    def __post_init__(self) -> None:
        _checked_key(self.key)

    def name(self) -> str:
        return _step_name(self.base, f"[{_checked_key(self.key)}]")

    def apply(self, base_code: str) -> str:
        return f"{base_code}[{_checked_key(self.key)}]"

    def fetch(self, L: dict, G: dict) -> Any:
        return self.base.fetch(L, G)[self.key]


@dataclasses.dataclass(frozen=True, slots=True)
class TypeSource(Source):
    """The exact type of another value: `type(L['x'])`."""

    base: Source

    def name(self) -> str:
        return f"type({self.base.name()})"

    def apply(self, base_code: str) -> str:
        return f"type({base_code})"

    def fetch(self, L: dict, G: dict) -> Any:
        return type(self.base.fetch(L, G))


@dataclasses.dataclass(frozen=True, slots=True)
class ClosureCellSource(Source):
    """The content of a function's closure cell: `L['fn'].__closure__[0].cell_contents`.

    The frame's own free variables are plain locals (`LocalSource`); this source reaches into a
    function object held by the frame.
    """

    base: Source
    index: int

    def name(self) -> str:
        return _step_name(self.base, f".__closure__[{self.index}].cell_contents")

    def apply(self, base_code: str) -> str:
        return f"{base_code}.__closure__[{self.index}].cell_contents"

    def fetch(self, L: dict, G: dict) -> Any:
        return self.base.fetch(L, G).__closure__[self.index].cell_contents


@dataclasses.dataclass(frozen=True, slots=True)
class _ModuleMemberSource(Source):
    """A member of an `nn.Module` kept in one of its registries (`_modules`, `_parameters`...).

    Names that are not identifiers (`nn.Sequential`'s `'0'`) render as the registry lookup.
    """

    base: Source
    member: str
    registry: ClassVar[str] = ""

    def name(self) -> str:
        suffix = _attribute_suffix(self.member)
        if suffix is None:
            suffix = f".{self.registry}[{self.member!r}]"
        return _step_name(self.base, suffix)

    def apply(self, base_code: str) -> str:
        return f"{base_code}.{self.registry}[{self.member!r}]"

    def fetch(self, L: dict, G: dict) -> Any:
        return getattr(self.base.fetch(L, G), self.registry)[self.member]


@dataclasses.dataclass(frozen=True, slots=True)
class SubmoduleSource(_ModuleMemberSource):
    """A child module: renders `L['self'].lin`, fetches `L['self']._modules['lin']`."""

    registry: ClassVar[str] = "_modules"


@dataclasses.dataclass(frozen=True, slots=True)
class ParamSource(_ModuleMemberSource):
    """A parameter: renders `L['self'].lin.weight`, fetches `..._parameters['weight']`."""

    registry: ClassVar[str] = "_parameters"


@dataclasses.dataclass(frozen=True, slots=True)
class BufferSource(_ModuleMemberSource):
    """A buffer: renders `L['self'].bn.running_mean`, fetches `..._buffers['running_mean']`."""

    registry: ClassVar[str] = "_buffers"


@dataclasses.dataclass(frozen=True, slots=True)
class ConstantSource(Source):
    """A value that is not in the frame: a named constant bound into the check itself.

    Equality and hashing use the name only; `value` is what `fetch` returns.
    """

    constant_name: str
    value: Any = dataclasses.field(default=None, compare=False, hash=False)
    base: ClassVar[None] = None

    def name(self) -> str:
        return self.constant_name

    def apply(self, base_code: str) -> str:
        raise TypeError(f"constant {self.constant_name!r} has no frame expression; "
                        "code generation binds its value by name")

    def fetch(self, L: dict, G: dict) -> Any:
        return self.value


@dataclasses.dataclass(frozen=True, slots=True)
class ObjectSource(Source):
    """An object that is not in the frame, bound into the check without keeping it alive: a
    class whose attributes the trace read (`class Net 0x55d0...`), a function the trace
    inlined. Held by a `guards.held.HeldObject` (weakly when the object allows it); a guard set
    with a guard on it dies with the object. Equality and hashing use the name only.
    """

    object_name: str
    held: Any = dataclasses.field(default=None, compare=False, hash=False)
    base: ClassVar[None] = None

    @classmethod
    def of(cls, value: Any, name: str | None = None) -> ObjectSource:
        """A source for `value`, named by its kind, name and id unless `name` is given."""
        from guards.held import HeldObject
        if name is None:
            label = getattr(value, "__qualname__", None) or type(value).__name__
            kind = "class" if isinstance(value, type) else type(value).__name__
            name = f"{kind} {label} {id(value):#x}"
        return cls(name, HeldObject(value))

    @property
    def value(self) -> Any:
        return self.held.get()

    def name(self) -> str:
        return self.object_name

    def apply(self, base_code: str) -> str:
        raise TypeError(f"object {self.object_name!r} has no frame expression; code "
                        "generation binds it")

    def fetch(self, L: dict, G: dict) -> Any:
        if not self.held.alive:
            raise ReferenceError(f"{self.object_name} was freed")
        return self.held.get()


@dataclasses.dataclass(frozen=True, slots=True)
class GlobalsSource(Source):
    """The function's globals dict itself: `G` (a builtin the code used must stay unshadowed
    by a global of that name)."""

    base: ClassVar[None] = None

    def name(self) -> str:
        return "G"

    def apply(self, base_code: str) -> str:
        return "G"

    def fetch(self, L: dict, G: dict) -> Any:
        return G


def _call_text(function: Any) -> str:
    module = getattr(function, "__module__", None) or ""
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", "function")
    if module in ("torch._C", "torch._C._VariableFunctions") or module.startswith("torch._C."):
        module = "torch._C"
    return f"{module}.{name}" if module else name


@dataclasses.dataclass(frozen=True, slots=True)
class CallSource(Source):
    """What a function of process state returns now: `torch.get_num_threads()`,
    `torch.initial_seed()`. The check calls it (with constant arguments) on every call; a
    trace that folded such a call guards its result this way. The function is held strongly
    (library functions only: they live as long as the process)."""

    function: Any
    arguments: tuple = ()
    keywords: tuple = ()  # (name, value) pairs
    base: ClassVar[None] = None

    def name(self) -> str:
        parts = [repr(argument) for argument in self.arguments]
        parts += [f"{key}={value!r}" for key, value in self.keywords]
        return f"{_call_text(self.function)}({', '.join(parts)})"

    def apply(self, base_code: str) -> str:
        raise TypeError(f"{self.name()} has no frame expression; code generation binds the "
                        "function")

    def fetch(self, L: dict, G: dict) -> Any:
        return self.function(*self.arguments, **dict(self.keywords))


@dataclasses.dataclass(frozen=True, slots=True)
class MethodCallSource(Source):
    """What a method without arguments returns for another value: `L['x'].storage_offset()`
    (facts of a tensor that its tensor guard does not cover, guarded where they are read)."""

    base: Source
    method: str

    def name(self) -> str:
        return _step_name(self.base, f".{self.method}()")

    def apply(self, base_code: str) -> str:
        return f"{base_code}.{self.method}()"

    def fetch(self, L: dict, G: dict) -> Any:
        return getattr(self.base.fetch(L, G), self.method)()


@dataclasses.dataclass(frozen=True, slots=True)
class GlobalStateSource(Source):
    """The process-wide torch state (grad mode, autocast, default dtype, ...).

    `fetch` returns the current `guards.kinds.state.TorchState`; it does not read the frame.
    """

    base: ClassVar[None] = None

    def name(self) -> str:
        return "torch global state"

    def apply(self, base_code: str) -> str:
        raise TypeError("torch global state has no frame expression; its guard reads torch")

    def fetch(self, L: dict, G: dict) -> Any:
        from guards.kinds.state import TorchState

        return TorchState.current()
