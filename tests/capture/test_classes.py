"""Corpus: user classes — methods, properties, `staticmethod`/`classmethod`, `super()`,
objects created in the frame (returned, stored, compared), dunder methods (`__call__`,
`__getitem__`, `__len__`, `__iter__`, `__contains__`, `__add__`, `__eq__`, `__bool__`),
`__getattr__`, `__setattr__` and `__getattribute__` overrides, dataclasses, class attributes,
pre-existing objects read and mutated."""
import dataclasses

import torch

from tests.capture.differential import check

x4 = torch.randn(4)
m34 = torch.randn(3, 4)


class Scaler:
    factor_default = 2.0

    def __init__(self, factor=None):
        self.factor = factor if factor is not None else self.factor_default
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return x * self.factor

    def apply(self, x, shift=0.0):
        return self(x) + shift

    @property
    def doubled(self):
        return self.factor * 2

    @doubled.setter
    def doubled(self, value):
        self.factor = value / 2

    @staticmethod
    def clamp(x):
        return x.clamp(-1, 1)

    @classmethod
    def default(cls):
        return cls(cls.factor_default)


class Shifted(Scaler):
    def __init__(self, factor, shift):
        super().__init__(factor)
        self.shift = shift

    def __call__(self, x):
        return super().__call__(x) + self.shift


class Bag:
    def __init__(self, *items):
        self.items = list(items)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]

    def __iter__(self):
        return iter(self.items)

    def __contains__(self, value):
        return value in self.items

    def __bool__(self):
        return bool(self.items)


class Vector:
    def __init__(self, data):
        self.data = data

    def __add__(self, other):
        if isinstance(other, Vector):
            return Vector(self.data + other.data)
        return Vector(self.data + other)

    def __radd__(self, other):
        return Vector(other + self.data)

    def __mul__(self, other):
        return Vector(self.data * other)

    def __eq__(self, other):
        return isinstance(other, Vector) and self.data.shape == other.data.shape

    def __neg__(self):
        return Vector(-self.data)


class Lazy:
    def __init__(self):
        self.known = 1.0

    def __getattr__(self, name):
        if name.startswith("w_"):
            return float(len(name))
        raise AttributeError(name)


class Recorded:
    def __init__(self):
        object.__setattr__(self, "log", [])

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value)


class Aliased:
    aliases = {"size": "width"}

    def __init__(self, width):
        self.width = width

    def __getattribute__(self, name):
        aliases = object.__getattribute__(self, "aliases")
        return object.__getattribute__(self, aliases.get(name, name))


@dataclasses.dataclass
class Config:
    hidden: int = 4
    dropout: float = 0.0
    names: tuple = ("a", "b")

    def scale(self):
        return self.hidden ** -0.5


@dataclasses.dataclass(frozen=True)
class Frozen:
    value: float


def test_method_call_on_new_object():
    check(lambda x: Scaler(3.0).apply(x, shift=1.0), x4)


def test_callable_object_and_state():
    def f(x):
        scaler = Scaler()
        y = scaler(x) + scaler(x)
        return y, scaler.calls
    check(f, x4)


def test_pre_existing_object_call_mutates_state():
    check(lambda x, scaler: scaler(x), x4, Scaler(0.5))


def test_property_get_and_set():
    def f(x, scaler):
        scaler.doubled = 8.0
        return x * scaler.doubled, scaler.factor
    check(f, x4, Scaler(1.0))


def test_staticmethod_and_classmethod():
    def f(x):
        return Scaler.clamp(x * 3) + Scaler.default()(x) + Scaler().clamp(x)
    check(f, x4)


def test_inheritance_and_super_chain():
    def f(x):
        shifted = Shifted(2.0, 0.5)
        return shifted(x), shifted.apply(x), isinstance(shifted, Scaler), shifted.calls
    check(f, x4)


def test_object_returned_from_frame_is_rebuilt():
    def f(x):
        scaler = Shifted(2.0, x.sum())
        scaler.extra = [x * 2]
        return scaler
    check(f, x4)


def test_objects_returned_keep_identity_between_references():
    def f(x):
        scaler = Scaler()
        return scaler, [scaler], scaler.factor * x
    import dynamo
    first, listed, _ = dynamo.jit(f, backend="eager")(x4)
    assert listed[0] is first and isinstance(first, Scaler)


def test_container_protocol_dunders():
    def f(x):
        bag = Bag(x, x + 1, x + 2)
        total = sum(t for t in bag)
        return total + bag[1], len(bag), bool(bag), bool(Bag()), 3 in Bag(1, 2, 3)
    check(f, x4)


def test_pre_existing_container_like_object():
    def f(bag):
        return [t * i for i, t in enumerate(bag)], len(bag)
    check(f, Bag(x4, x4 * 2))


def test_arithmetic_dunders_and_reflected():
    def f(x):
        v = Vector(x) + Vector(x) * 2
        w = 1.0 + v
        u = -w
        return u.data, v == w, v == 3
    check(f, x4)


def test_getattr_fallback():
    def f(x, lazy):
        return x * lazy.known + lazy.w_abc + getattr(lazy, "w_x", 0)
    check(f, x4, Lazy())


def test_getattr_fallback_raising_is_caught_by_hasattr_style_code():
    def f(x, lazy):
        try:
            extra = lazy.missing
        except AttributeError:
            extra = 5.0
        return x * extra
    check(f, x4, Lazy())


def test_setattr_override_runs():
    def f(x):
        recorded = Recorded()
        recorded.a = x
        recorded.b = x * 2
        return recorded.a + recorded.b, recorded.log
    check(f, x4)


def test_setattr_override_on_pre_existing_object():
    def f(x, recorded):
        recorded.scale = 3.0
        return x * recorded.scale
    check(f, x4, Recorded())


def test_getattribute_override():
    def f(x, aliased):
        return x * aliased.size + aliased.width
    check(f, x4, Aliased(3.0))


def test_dataclass_defaults_methods_and_equality():
    def f(x, config):
        local = Config(hidden=16)
        same = local == Config(16)
        return x * local.scale() * config.scale(), same, dataclasses.astuple(config)
    check(f, x4, Config())


def test_frozen_dataclass_created_and_read():
    def f(x):
        frozen = Frozen(2.5)
        return x * frozen.value, frozen
    check(f, x4)


def test_class_attribute_read_through_instance_and_class():
    def f(x, scaler):
        return x * scaler.factor_default + Scaler.factor_default + type(scaler).factor_default
    check(f, x4, Scaler())


def test_class_attribute_shadowed_by_instance_attribute():
    def f(x):
        scaler = Scaler()
        scaler.factor_default = 10.0
        return x * scaler.factor_default, Scaler.factor_default
    check(f, x4)


def test_isinstance_and_type_of_new_objects():
    def f(x):
        obj = Shifted(1.0, 0.0)
        return x * (isinstance(obj, Shifted) + isinstance(obj, Scaler) + (type(obj) is Shifted))
    check(f, x4)


def test_bound_method_stored_and_called_later():
    def f(x):
        method = Scaler(4.0).apply
        return method(x), method.__self__.factor
    check(f, x4)


def test_methods_called_through_the_class():
    def f(x, scaler):
        return Scaler.apply(scaler, x), Scaler.__call__(scaler, x)
    check(f, x4, Scaler(1.5))


def test_object_attribute_deleted():
    def f(x, scaler):
        del scaler.calls
        return x * scaler.factor, hasattr(scaler, "calls")
    check(f, x4, Scaler(2.0))


def test_object_holding_tensors_as_input():
    def f(holder):
        return holder.factor * holder.items[0]
    holder = Scaler(torch.tensor(2.0))
    holder.items = [x4]
    check(f, holder)


def test_slots_class_read():
    class Pointed:
        __slots__ = ("x", "y")

        def __init__(self, x, y):
            self.x = x
            self.y = y

    def f(t, point):
        return t * point.x + point.y
    check(f, x4, Pointed(2.0, 1.0))


def test_enum_members_as_values():
    import enum

    class Mode(enum.Enum):
        FAST = "fast"
        SLOW = "slow"

    def f(x, mode):
        if mode is Mode.FAST:
            return x * 2, mode.value
        return x, mode.name
    check(f, x4, Mode.FAST)


def test_user_context_manager_class():
    class Tracker:
        def __init__(self):
            self.events = []

        def __enter__(self):
            self.events.append("enter")
            return self

        def __exit__(self, *exc):
            self.events.append("exit")
            return False

    def f(x, tracker):
        with tracker as active:
            y = x * len(active.events)
        return y, tracker.events
    check(f, x4, Tracker())


def _jit_results(function, mutations, make):
    """`function(x, obj)` under the jit after each mutation of one object, next to eager."""
    import dynamo
    jitted = dynamo.jit(function)
    obj = make()
    for mutate in mutations:
        mutate(obj)
        torch.testing.assert_close(jitted(x4, obj), function(x4, obj))


class _Plain:
    default = 1.0

    def method(self, x):
        return x + 1


class _Slotted:
    __slots__ = ("value",)


def test_instance_attribute_set_later_shadows_what_the_class_gave():
    """A method, a class default and a missing attribute were read through the class at
    capture; an instance attribute set afterwards must change the result."""
    def call_method(x, obj):
        return obj.method(x)

    def read_default(x, obj):
        return x * obj.default

    def missing_or_not(x, obj):
        try:
            return x + obj.extra
        except AttributeError:
            return x - 1

    def has_it(x, obj):
        return x + 1 if hasattr(obj, "extra") else x - 1

    def method_replaced(obj):
        obj.method = lambda x: x * 10

    def set_extra(obj):
        obj.extra = 5.0

    def del_extra(obj):
        del obj.extra

    def set_default(obj):
        obj.default = 3.0

    nothing = lambda obj: None  # noqa: E731
    _jit_results(call_method, [nothing, method_replaced], _Plain)
    _jit_results(read_default, [nothing, set_default], _Plain)
    _jit_results(missing_or_not, [nothing, set_extra, del_extra], _Plain)
    _jit_results(has_it, [nothing, set_extra, del_extra], _Plain)


def test_unset_slot_raises_attribute_error_in_the_trace():
    """pathlib (3.12) reads a cache slot in `try` and fills it on AttributeError."""
    def read_slot(x, obj):
        try:
            return x + obj.value
        except AttributeError:
            return x - 1

    def set_value(obj):
        obj.value = 2.0

    def del_value(obj):
        del obj.value

    _jit_results(read_slot, [lambda obj: None, set_value, del_value], _Slotted)


def test_pathlib_paths_read_in_a_frame():
    """Once an internal error (3.12's `_tail_cached` slot); paths made in the frame break the
    graph (a C-level constructor), pre-existing ones are read in it."""
    import pathlib
    check(lambda x: x + len(pathlib.PurePosixPath("/a/b/c").parts), x4, graphs=None,
          breaks=None)
    check(lambda x, path: x + len(path.parts), x4, pathlib.PurePosixPath("/a/b"),
          graphs=None, breaks=None)


def test_methods_patched_on_the_class_after_capture():
    """`mock.patch.object(Class, "method")` (or a replaced module `forward`) after a call was
    compiled: the compiled code must not keep calling the old function."""
    from unittest import mock

    import dynamo

    class Net(torch.nn.Module):
        def forward(self, x):
            return x + 1

    class Holder:
        def method(self, x):
            return x * 2

        @property
        def offset(self):
            return 1.0

        @classmethod
        def make(cls, x):
            return x - 3

    def run(x, net, holder):
        return net(x) + holder.method(x) + holder.offset + holder.make(x)

    jitted = dynamo.jit(run)
    net, holder = Net(), Holder()

    def same():
        torch.testing.assert_close(jitted(x4, net, holder), run(x4, net, holder))

    same()
    with mock.patch.object(Holder, "method", lambda self, x: x * 20):
        same()
    same()
    with mock.patch.object(Holder, "offset", property(lambda self: 5.0)):
        same()
    with mock.patch.object(Holder, "make", classmethod(lambda cls, x: x + 30)):
        same()
    with mock.patch.object(Net, "forward", lambda self, x: x - 100):
        same()
    net.forward = lambda x: x * 7  # on the instance
    same()
