"""install_for: the guards a tracer installs for each kind of value."""
import collections
import enum
import functools
import math
import types

import pytest
import torch

from guard_checking import holds, reason
from guards import (ConstantGuard, DictKeysGuard, GuardSet, IdentityGuard, LengthGuard,
                    LocalSource, ModuleTrainingGuard, NoneGuard, ObjectSnapshotGuard,
                    TensorMatchGuard, TypeGuard, UnguardableValue, install_for)
from guards.install import guards_for
from guards.sources import (AttrSource, BufferSource, DictItemSource, ItemSource, ParamSource,
                            SubmoduleSource)

X = LocalSource("x")


class Color(enum.Enum):
    RED = 1


class Config:
    def __init__(self):
        self.depth = 2


def kinds(guards):
    return [(type(guard).__name__, guard.source.name()) for guard in guards]


@pytest.mark.parametrize("value, expected", [
    (torch.ones(2), [("TensorMatchGuard", "L['x']")]),
    (None, [("NoneGuard", "L['x']")]),
    (3, [("ConstantGuard", "L['x']")]),
    (math.nan, [("ConstantGuard", "L['x']")]),
    ((1, "a", None), [("ConstantGuard", "L['x']")]),
    (torch.float16, [("ConstantGuard", "L['x']")]),
    (print, [("IdentityGuard", "L['x']")]),
    (math, [("IdentityGuard", "L['x']")]),
    (Config, [("IdentityGuard", "L['x']")]),
    (Color.RED, [("IdentityGuard", "L['x']")]),
    ([torch.ones(1), 2], [("TypeGuard", "L['x']"), ("LengthGuard", "L['x']"),
                          ("TensorMatchGuard", "L['x'][0]"), ("ConstantGuard", "L['x'][1]")]),
    ((torch.ones(1),), [("TypeGuard", "L['x']"), ("LengthGuard", "L['x']"),
                        ("TensorMatchGuard", "L['x'][0]")]),
    ({"a": None}, [("TypeGuard", "L['x']"), ("DictKeysGuard", "L['x']"),
                   ("NoneGuard", "L['x']['a']")]),
    (Config(), [("TypeGuard", "L['x']"), ("ObjectSnapshotGuard", "L['x']")]),
])
def test_policy_per_value_kind(value, expected):
    guards = install_for(value, X)
    assert kinds(guards) == expected
    assert holds(guards, {"x": value})


def test_torch_size_is_guarded_item_by_item():
    guards = install_for(torch.Size([2, 3]), X)
    assert kinds(guards)[:2] == [("TypeGuard", "L['x']"), ("LengthGuard", "L['x']")]
    assert holds(guards, {"x": torch.Size([2, 3])})
    assert reason(guards, {"x": (2, 3)}) == "type(L['x']): expected Size, got tuple"


def test_ordered_dict_and_nested_containers():
    value = collections.OrderedDict(a=[torch.ones(2)], b={"c": 1.5})
    guards = install_for(value, X)
    assert holds(guards, {"x": collections.OrderedDict(a=[torch.zeros(2)], b={"c": 1.5})})
    assert reason(guards, {"x": collections.OrderedDict(a=[torch.zeros(3)], b={"c": 1.5})}) == (
        "L['x']['a'][0].size()[0]: expected 2, got 3")
    assert reason(guards, {"x": collections.OrderedDict(a=[], b={"c": 1.5})}) == (
        "len(L['x']['a']): expected 1, got 0")
    assert reason(guards, {"x": dict(value)}) == "type(L['x']): expected OrderedDict, got dict"


def test_module_guards_reach_every_parameter_buffer_and_child():
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    guards = install_for(model, LocalSource("self"))
    sources = {guard.source for guard in guards if isinstance(guard, TensorMatchGuard)}
    first = SubmoduleSource(LocalSource("self"), "0")
    second = SubmoduleSource(LocalSource("self"), "1")
    assert ParamSource(first, "weight") in sources and ParamSource(first, "bias") in sources
    assert BufferSource(second, "running_mean") in sources
    assert BufferSource(second, "num_batches_tracked") in sources
    assert ModuleTrainingGuard(second, True) in guards
    assert TypeGuard(first, torch.nn.Linear) in guards
    assert any(isinstance(guard, ObjectSnapshotGuard) for guard in guards)
    frame = {"self": model}
    assert holds(guards, frame)
    model[1].eval()
    assert reason(guards, frame) == (
        "L['self']._modules['1'].training: expected True (train mode), got False (eval mode)")
    model[1].train()
    model[0].weight.requires_grad_(False)
    assert reason(guards, frame) == (
        "L['self']._modules['0'].weight.requires_grad: expected True, got False")
    model[0].weight.requires_grad_(True)
    model[0].weight.data = model[0].weight.data.double()
    assert reason(guards, frame) == (
        "L['self']._modules['0'].weight.dtype: expected torch.float32, got torch.float64")


def test_module_with_missing_bias_and_hooks():
    model = torch.nn.Linear(2, 2, bias=False)
    guards = install_for(model, X)
    assert NoneGuard(ParamSource(X, "bias"), True) in guards
    model.register_forward_pre_hook(lambda *args: None)
    assert reason(guards, {"x": model}).startswith("L['x']._forward_pre_hooks.keys(): expected []")


def test_bound_method_guards_function_and_object():
    config = Config()
    guards = install_for(types.MethodType(len, config), X)
    assert kinds(guards) == [("TypeGuard", "L['x']"), ("IdentityGuard", "L['x'].__func__"),
                             ("TypeGuard", "L['x'].__self__"),
                             ("ObjectSnapshotGuard", "L['x'].__self__")]


def test_self_containing_list_guards_the_back_reference_by_identity():
    value = [1]
    value.append(value)
    guards = install_for(value, X)
    assert IdentityGuard(ItemSource(X, 1), value) in guards
    assert holds(guards, {"x": value})


def test_unguardable_values_raise():
    with pytest.raises(UnguardableValue, match="cannot guard a set"):
        install_for({1, object()}, X)
    with pytest.raises(UnguardableValue, match="L\\['x'\\]\\[0\\]: cannot guard a bytearray"):
        install_for([bytearray(b"a")], X)


def test_set_of_constants_is_guarded_by_type_and_items():
    guards = install_for({1, 2}, X)
    assert kinds(guards) == [("TypeGuard", "L['x']"), ("DictKeysGuard", "L['x']")]
    assert holds(guards, {"x": {1, 2}})
    assert not holds(guards, {"x": {1, 3}})
    assert not holds(guards, {"x": frozenset({1, 2})})


def test_python_function_guards_its_code_and_defaults_unless_trusted():
    def scale(x, factor=2, *, offset=1):
        return x * factor + offset

    guards = install_for(scale, X)
    assert kinds(guards) == [("IdentityGuard", "L['x']"), ("IdentityGuard", "L['x'].__code__"),
                             ("TypeGuard", "L['x'].__defaults__"),
                             ("LengthGuard", "L['x'].__defaults__"),
                             ("TypeGuard", "L['x'].__kwdefaults__"),
                             ("DictKeysGuard", "L['x'].__kwdefaults__")]
    frame = {"x": scale}
    assert holds(guards, frame)
    code = scale.__code__
    scale.__code__ = (lambda x, factor=2, *, offset=1: x).__code__
    assert reason(guards, frame).startswith("L['x'].__code__: expected the same object")
    scale.__code__ = code
    scale.__defaults__ = ()
    assert reason(guards, frame) == "len(L['x'].__defaults__): expected 1, got 0"
    scale.__defaults__ = (2,)
    scale.__kwdefaults__ = None
    assert reason(guards, frame) == "type(L['x'].__kwdefaults__): expected dict, got NoneType"
    assert kinds(guards_for(scale, X, trusted=True)) == [("IdentityGuard", "L['x']")]


def test_partial_guards_its_function_arguments_and_keywords():
    def add(a, b, c=0):
        return a + b + c

    value = functools.partial(add, 1, c=3)
    guards = install_for(value, X)
    frame = {"x": value}
    assert holds(guards, frame)
    value.keywords["c"] = 4
    assert reason(guards, frame) == "L['x'].keywords['c']: expected 3, got 4"
    value.keywords["d"] = 4
    assert reason(guards, frame) == "L['x'].keywords.keys(): expected ['c'], got ['c', 'd']"
    assert holds(guards, {"x": functools.partial(add, 1, c=3)})
    assert not holds(guards, {"x": functools.partial(add, 2, c=3)})


def test_dict_with_non_literal_keys_is_unguardable():
    with pytest.raises(UnguardableValue):
        install_for({(1, 2): 3}, X)


def test_install_then_compile_round_trip():
    value = {"w": torch.ones(2, 2).t(), "n": 3, "tag": None}
    guard_set = GuardSet(install_for(value, X))
    check = guard_set.compile()
    assert check({"x": {"w": torch.zeros(2, 2).t(), "n": 3, "tag": None}}, {})
    assert not check({"x": {"w": torch.zeros(2, 2), "n": 3, "tag": None}}, {})
    assert DictKeysGuard(X, ("w", "n", "tag")) in guard_set
    assert ConstantGuard(DictItemSource(X, "n"), 3) in guard_set
    assert LengthGuard(X, 3) not in guard_set
    assert AttrSource(X, "w") != DictItemSource(X, "w")
