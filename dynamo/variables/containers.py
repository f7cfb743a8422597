"""Containers: tuples (immutable), lists, dicts and sets (contents in a side-effect `Box`),
slices. Methods that read are answered at trace time; methods that write update the box.

Instances of user subclasses of dict, list and tuple (a HuggingFace `ModelOutput` is an
`OrderedDict` subclass and a dataclass) are the same variables with `python_class` set to the
subclass: Python-level overrides are inlined (`lookup_dunder` finds them for subscripts, `in`,
`len` and iteration), builtin behaviour applies otherwise, and their instance attributes live
in a second box (`attributes`; for pre-existing instances, made on the first write).
"""
from __future__ import annotations

import collections
from typing import Any, Optional

from dynamo.breaks import UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.side_effects import Box
from dynamo.variables.base import NotConstant, Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.attributes import MISSING, generic_getattr, generic_hasattr, preexisting_box
from dynamo.variables.guarding import mark_identity


def constant_copy(value: Variable) -> Any:
    """A real Python value equal to `value` when everything in it is known: constants, and
    lists, dicts and sets of constants (fresh copies, for pure functions to read)."""
    if isinstance(value, (ListVariable, TupleVariable)) and not is_subclass_instance(value):
        items = [constant_copy(item) for item in value.items]
        return items if isinstance(value, ListVariable) else value.as_constant()
    if isinstance(value, DictVariable) and value.python_class is dict:
        return {key: constant_copy(item) for key, item in value.items.items()}
    if isinstance(value, SetVariable):
        return value.python_class(constant_copy(item) for item in value.items.values())
    return value.as_constant()


class ObjectKey:
    """A dict/set key standing for an object hashed by identity (a module, a user object, a
    tensor, an object created during the trace); `variable` is the key's variable."""

    __slots__ = ("variable", "identity")

    def __init__(self, variable: Variable, identity: int):
        self.variable = variable
        self.identity = identity

    def __hash__(self) -> int:
        return hash(self.identity)

    def __eq__(self, other) -> bool:
        return isinstance(other, ObjectKey) and other.identity == self.identity


def constant_key(key: Variable) -> Any:
    """A dict/set key: a hashable constant, or an `ObjectKey` for an object hashed by
    identity."""
    try:
        value = key.as_constant()
        if not isinstance(value, type):
            hash(value)
            return value
    except (NotConstant, TypeError):
        pass
    identity = _identity(key)
    if identity is None:
        raise Unsupported(UNSUPPORTED_OBJECT, f"{key.describe()} used as a dict key")
    mark_identity(key)  # the key's identity decides lookups: it is guarded
    return ObjectKey(key, identity)


def _identity(key: Variable) -> Optional[int]:
    """What identifies an identity-hashed object: the real object, a new object's box, a
    tensor's graph node."""
    # here, not at the top: a cycle (variables.tensor -> variables.exceptions -> variables.container
    from dynamo.variables.tensor import TensorVariable
    if isinstance(key, TensorVariable):
        return id(key.node)
    real = getattr(key, "value", None) if getattr(key, "is_real", False) else None
    kind = key.python_type()
    if getattr(kind, "__hash__", None) is not object.__hash__ and not isinstance(real, type):
        return None
    if real is not None:
        return id(real)
    box = getattr(key, "box", None)
    return None if box is None else id(box)


def key_variable(key: Any) -> Variable:
    """The variable for a dict key (the inverse of `constant_key`)."""
    if isinstance(key, ObjectKey):
        return key.variable
    return ConstantVariable(key)


@variable
class TupleVariable(Variable):
    items: tuple
    python_class: type = tuple  # tuple, torch.Size, or a namedtuple class

    def python_type(self) -> type:
        return self.python_class

    def as_constant(self) -> Any:
        values = tuple(item.as_constant() for item in self.items)
        if self.python_class is tuple:
            return values
        if hasattr(self.python_class, "_fields"):
            return self.python_class(*values)
        return self.python_class(values)

    def iterate(self, tx) -> list[Variable]:
        return list(self.items)

    def truth(self, tx) -> bool:
        return bool(self.items)

    def getattr(self, tx, name: str) -> Variable:
        fields = getattr(self.python_class, "_fields", None) or \
            getattr(self.python_class, "__match_args__", ())  # namedtuples, structseqs
        if name in fields:
            return self.items[fields.index(name)]
        if name in ("count", "index"):
            return BoundContainerMethod(self, name)
        if name == "_fields" and fields:
            return ConstantVariable(fields)
        if self.python_class not in (tuple, torch_size()):
            return generic_getattr(tx, self, self.python_class, name, None, MISSING)
        raise Unsupported(UNSUPPORTED_OBJECT, f"attribute {name!r} of a tuple")

    def has_attribute(self, tx, name: str) -> bool:
        return hasattr(self.python_class, name)


@variable
class ListVariable(Variable):
    box: Box
    python_class: type = list
    attributes: Optional[Box] = None  # instance attributes of a new subclass instance

    @staticmethod
    def new(items, source=None) -> "ListVariable":
        return ListVariable(Box("list", list(items)), source=source)

    @property
    def items(self) -> list:
        return self.box.contents

    def python_type(self) -> type:
        return self.python_class

    def as_constant(self) -> Any:
        raise NotConstant("a list is mutable")

    def iterate(self, tx) -> list[Variable]:
        return list(self.items)

    def truth(self, tx) -> bool:
        return bool(self.items)

    def getattr(self, tx, name: str) -> Variable:
        if self.python_class is not list:
            return subclass_getattr(tx, self, name)
        if name in _LIST_METHODS:
            return BoundContainerMethod(self, name)
        raise Unsupported(UNSUPPORTED_OBJECT, f"list attribute {name!r}")

    def has_attribute(self, tx, name: str) -> bool:
        if self.python_class is not list:
            return subclass_hasattr(tx, self, name)
        return hasattr(list, name)

    def attribute_box(self, tx) -> Optional[Box]:
        return subclass_attribute_box(tx, self)

    def pending_attributes(self, tx) -> Optional[Box]:
        return _pending_attributes(tx, self)

    def real_object(self) -> Any:
        return self.box.real if self.box.real is not None else _missing()


_LIST_METHODS = {"append", "extend", "insert", "pop", "remove", "clear", "reverse", "index",
                 "count", "copy", "sort"}


@variable
class DictVariable(Variable):
    box: Box
    python_class: type = dict
    default_factory: Optional[Variable] = None  # defaultdict
    attributes: Optional[Box] = None  # instance attributes of a new subclass instance

    @staticmethod
    def new(items: dict, source=None, python_class=dict, default_factory=None) -> "DictVariable":
        return DictVariable(Box("dict", dict(items)), python_class, default_factory,
                            source=source)

    @property
    def items(self) -> dict:
        return self.box.contents

    def python_type(self) -> type:
        return self.python_class

    def as_constant(self) -> Any:
        raise NotConstant("a dict is mutable")

    def iterate(self, tx) -> list[Variable]:
        return [key_variable(key) for key in self.items]

    def truth(self, tx) -> bool:
        return bool(self.items)

    def getattr(self, tx, name: str) -> Variable:
        if name == "default_factory" and self.default_factory is not None:
            return self.default_factory
        if self.python_class not in ORDERED:
            return subclass_getattr(tx, self, name)
        if name in _DICT_METHODS:
            return BoundContainerMethod(self, name)
        raise Unsupported(UNSUPPORTED_OBJECT, f"dict attribute {name!r}")

    def has_attribute(self, tx, name: str) -> bool:
        if self.python_class not in ORDERED:
            return subclass_hasattr(tx, self, name)
        return hasattr(self.python_class, name)

    def attribute_box(self, tx) -> Optional[Box]:
        return subclass_attribute_box(tx, self)

    def pending_attributes(self, tx) -> Optional[Box]:
        return _pending_attributes(tx, self)

    def real_object(self) -> Any:
        return self.box.real if self.box.real is not None else _missing()


_DICT_METHODS = {"get", "items", "keys", "values", "update", "pop", "setdefault", "clear", "copy",
                 "popitem", "__getitem__", "__contains__", "move_to_end"}
_BUILTIN_CLASSES = (list, tuple, dict, collections.OrderedDict, collections.defaultdict, set,
                    frozenset)


def is_subclass_instance(value: Variable) -> bool:
    """An instance of a user subclass of list, tuple or dict (not a namedtuple's own class,
    whose methods are Python's too: those count)."""
    kind = getattr(value, "python_class", None)
    return kind is not None and kind not in _BUILTIN_CLASSES and \
        isinstance(value, (ListVariable, DictVariable, TupleVariable)) and \
        kind.__module__.split(".")[0] not in ("torch", "builtins")


def subclass_attribute_box(tx, value) -> Optional[Box]:
    """Where a subclass instance's attribute writes go (None for builtin containers)."""
    if value.attributes is not None:
        return value.attributes
    if value.box.real is None or value.python_class in _BUILTIN_CLASSES:
        return None
    return preexisting_box(tx, value.box.real, value.box.source or value.source, "attributes")


def _pending_attributes(tx, value) -> Optional[Box]:
    if value.attributes is not None or value.box.real is None:
        return value.attributes
    return tx.side_effects.box_for(value.box.real, "attributes")


def subclass_getattr(tx, value, name: str) -> Variable:
    """An attribute of a subclass instance: Python's protocol, builtin methods bound to the
    container's builtin behaviour."""
    return generic_getattr(tx, value, value.python_class, name, _pending_attributes(tx, value),
                           value.real_object(), value.source)


def subclass_hasattr(tx, value, name: str) -> bool:
    return generic_hasattr(value.python_class, name, _pending_attributes(tx, value),
                           value.real_object())


def _missing():
    return MISSING


@variable
class DictViewVariable(Variable):
    """`d.keys()`, `d.values()`, `d.items()`: a live view of `owner` (an insertion after the
    view was taken shows in it, as in CPython). Operations other than iteration, `len`, `in`
    and truth work on a snapshot of the contents when they run (`snapshot`)."""

    owner: "DictVariable"
    kind: str  # "keys", "values" or "items"

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())

    def contents(self) -> list[Variable]:
        items = self.owner.items
        if self.kind == "keys":
            return [key_variable(key) for key in items]
        if self.kind == "values":
            return list(items.values())
        return [TupleVariable((key_variable(key), value)) for key, value in items.items()]

    def snapshot(self, set_class: type = frozenset) -> Variable:
        """The contents now: keys as a set of `set_class` (views of keys compare as sets, and
        their `&`, `|`, `-`, `^` make sets), values and items as a tuple."""
        if self.kind == "keys":
            return SetVariable(SetVariable.new(self.contents()).box, set_class)
        return TupleVariable(tuple(self.contents()))

    def contains(self, item: Variable) -> Optional[bool]:
        """`item in view` when it is decided by keys alone (None: compare the contents)."""
        if self.kind == "keys":
            return constant_key(item) in self.owner.items
        return None

    def iterate(self, tx) -> list[Variable]:
        return self.contents()

    def truth(self, tx) -> bool:
        return bool(self.owner.items)

    def describe(self) -> str:
        return f"dict_{self.kind}"

    def rebuild(self, plan) -> str:
        return f"{plan.reconstruct(self.owner)}.{self.kind}()"


@variable
class SetVariable(Variable):
    box: Box
    python_class: type = set

    @staticmethod
    def new(items, source=None) -> "SetVariable":
        return SetVariable(Box("set", {constant_key(item): item for item in items}), source=source)

    @property
    def items(self) -> dict:
        return self.box.contents

    def python_type(self) -> type:
        return self.python_class

    def as_constant(self) -> Any:
        if self.python_class is not frozenset:
            return _mutable()
        return frozenset(item.as_constant() for item in self.items.values())

    def iterate(self, tx) -> list[Variable]:
        return list(self.items.values())

    def truth(self, tx) -> bool:
        return bool(self.items)

    def getattr(self, tx, name: str) -> Variable:
        if name in ("add", "discard", "remove", "update", "union", "intersection", "difference",
                    "issubset", "issuperset", "copy", "pop", "clear"):
            return BoundContainerMethod(self, name)
        raise Unsupported(UNSUPPORTED_OBJECT, f"set attribute {name!r}")


def _mutable():
    raise NotConstant("a set is mutable")


@variable
class SliceVariable(Variable):
    parts: tuple  # (start, stop, step) variables

    def python_type(self) -> type:
        return slice

    def as_constant(self) -> Any:
        return slice(*(part.as_constant() for part in self.parts))


@variable
class BoundContainerMethod(Variable):
    """`container.method`, answered by `dynamo.variables.container_methods`."""

    owner: Variable
    name: str

    def call(self, tx, args, kwargs) -> Variable:
        # here, not at the top: variables.container_methods imports this module (a cycle)
        from dynamo.variables.container_methods import call_container_method
        return call_container_method(tx, self.owner, self.name, list(args), dict(kwargs))

    def describe(self) -> str:
        return f"{self.owner.describe()}.{self.name}"


def new_container(python_class: type, items) -> Variable:
    """A freshly built container of `python_class` holding `items` (variables)."""
    if python_class is list:
        return ListVariable.new(items)
    if python_class in (tuple, torch_size()):
        return TupleVariable(tuple(items), python_class)
    if python_class in (set, frozenset):
        variable_ = SetVariable.new(items)
        return SetVariable(variable_.box, python_class)
    raise Unsupported(UNSUPPORTED_OBJECT, f"building a {python_class.__name__}")


def torch_size() -> type:
    import torch
    return torch.Size


ORDERED = (dict, collections.OrderedDict, collections.defaultdict)
