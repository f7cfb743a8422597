"""Plain-value guard kinds: holds, fails, and the exact failure reason of each."""
import collections
import gc
import math

import pytest
import torch

from guard_checking import holds, reason
from guards import (ConstantGuard, DictKeysGuard, HasAttrGuard, IdentityGuard, LengthGuard,
                    LocalSource, NoneGuard, TruthGuard, TypeGuard)

X = LocalSource("x")


class Config:
    pass


class OtherConfig:
    pass


def test_type_guard():
    guard = TypeGuard(X, Config)
    assert holds(guard, {"x": Config()})
    assert not holds(guard, {"x": type("Sub", (Config,), {})()})
    assert reason(guard, {"x": {}}) == "type(L['x']): expected Config, got dict"
    assert guard.describe() == "type(L['x']) is Config"


def test_type_guard_names_modules_when_short_names_clash():
    Clash = type("Config", (), {"__module__": "elsewhere"})
    assert (reason(TypeGuard(X, Config), {"x": Clash()})
            == f"type(L['x']): expected {__name__}.Config, got elsewhere.Config")


def test_type_guard_reports_missing_local():
    assert (reason(TypeGuard(X, Config), {})
            == "L['x']: could not be read (KeyError: 'x')")


def test_identity_guard_holds_only_for_the_same_object():
    def f():
        pass

    def g():
        pass

    guard = IdentityGuard(X, f)
    assert holds(guard, {"x": f})
    assert (reason(guard, {"x": g}) == "L['x']: expected the same object as at capture "
            "(function test_identity_guard_holds_only_for_the_same_object.<locals>.f), got a "
            "different object (function test_identity_guard_holds_only_for_the_same_object."
            "<locals>.g)")


def test_identity_guard_dies_with_its_object():
    target = Config()
    guard = IdentityGuard(X, target)
    died = []
    guard.watch(died.append)
    assert guard.held.get() is target
    del target
    gc.collect()
    assert died == [guard]
    assert not guard.held.alive
    assert guard.reason(object()) == (
        "L['x']: the object seen at capture (a Config object) was freed")
    late = []
    guard.watch(late.append)
    assert late == [guard]


def test_identity_guard_holds_unweakrefable_objects_strongly():
    target = [1, 2]
    guard = IdentityGuard(X, target)
    identity = id(target)
    del target
    gc.collect()
    assert guard.held.alive and id(guard.held.get()) == identity
    assert holds(guard, {"x": guard.held.get()})
    assert not holds(guard, {"x": [1, 2]})


@pytest.mark.parametrize("value, other, message", [
    (4, 8, "L['x']: expected 4, got 8"),
    (4, 4.0, "L['x']: expected 4, got 4.0"),
    (1, True, "L['x']: expected 1, got True"),
    (True, False, "L['x']: expected True, got False"),
    (1.5, 2.5, "L['x']: expected 1.5, got 2.5"),
    (math.nan, 1.0, "L['x']: expected nan, got 1.0"),
    (-0.0, 0.0, "L['x']: expected -0.0, got 0.0"),
    (0.0, -0.0, "L['x']: expected 0.0, got -0.0"),
    (math.inf, -math.inf, "L['x']: expected inf, got -inf"),
    (1 + 2j, 1 - 2j, "L['x']: expected (1+2j), got (1-2j)"),
    ("abc", "abd", "L['x']: expected 'abc', got 'abd'"),
    (b"ab", "ab", "L['x']: expected b'ab', got 'ab'"),
    (None, 0, "L['x']: expected None, got 0"),
    ((1, "a"), (1, "b"), "L['x']: expected (1, 'a'), got (1, 'b')"),
    ((1,), [1], "L['x']: expected (1,), got a list object"),
    ((1, (2, 3.0)), (1, (2, 3)), "L['x']: expected (1, (2, 3.0)), got (1, (2, 3))"),
    (torch.float32, torch.float64, "L['x']: expected torch.float32, got torch.float64"),
    (torch.device("cpu"), torch.device("meta"), "L['x']: expected cpu, got meta"),
    (torch.strided, torch.sparse_coo, "L['x']: expected torch.strided, got torch.sparse_coo"),
    (..., None, "L['x']: expected Ellipsis, got None"),
])
def test_constant_guard(value, other, message):
    guard = ConstantGuard(X, value)
    assert holds(guard, {"x": value})
    assert reason(guard, {"x": other}) == message


@pytest.mark.parametrize("value, equal_copy", [
    (math.nan, float("nan")), (-0.0, -1.0 * 0.0), (10**30, 10**30 + 0), ("s" * 50, "s" * 50),
    ((1.5, None, "x"), (1.5, None, "x")), (torch.device("cpu"), torch.device("cpu")),
    (complex(math.nan, -0.0), complex(math.nan, -0.0)),
])
def test_constant_guard_accepts_equal_copies(value, equal_copy):
    assert holds(ConstantGuard(X, value), {"x": equal_copy})


class MyInt(int):
    pass


def test_constant_guard_rejects_subclasses_with_types_in_message():
    guard = ConstantGuard(X, 3)
    assert reason(guard, {"x": MyInt(3)}) == "L['x']: expected 3, got 3 (MyInt)"


def test_constant_guard_refuses_non_constants():
    with pytest.raises(TypeError, match="is not a constant"):
        ConstantGuard(X, [1, 2])


def test_none_guard():
    assert holds(NoneGuard(X, True), {"x": None})
    assert reason(NoneGuard(X, True), {"x": 0}) == "L['x']: expected None, got 0"
    assert holds(NoneGuard(X, False), {"x": torch.ones(1)})
    assert reason(NoneGuard(X, False), {"x": None}) == "L['x']: expected not None, got None"
    assert NoneGuard(X, False).describe() == "L['x'] is not None"


def test_truth_guard():
    assert holds(TruthGuard(X, True), {"x": [0]})
    assert reason(TruthGuard(X, True), {"x": []}) == "bool(L['x']): expected True, got False"
    assert holds(TruthGuard(X, False), {"x": ""})
    assert reason(TruthGuard(X, False), {"x": "a"}) == "bool(L['x']): expected False, got True"


def test_length_guard():
    assert holds(LengthGuard(X, 2), {"x": (1, 2)})
    assert reason(LengthGuard(X, 2), {"x": [1]}) == "len(L['x']): expected 2, got 1"
    assert reason(LengthGuard(X, 2), {"x": 5}) == "len(L['x']): expected 2, got 5 (no length)"

    class Broken:
        def __len__(self):
            raise RuntimeError("boom")

    assert reason(LengthGuard(X, 2), {"x": Broken()}) == (
        "len(L['x']) == 2: could not be checked (RuntimeError: boom)")


def test_dict_keys_guard_checks_order():
    guard = DictKeysGuard(X, ("a", "b"))
    assert holds(guard, {"x": {"a": 1, "b": 2}})
    assert holds(guard, {"x": collections.OrderedDict(a=1, b=2)})
    assert (reason(guard, {"x": {"b": 2, "a": 1}})
            == "L['x'].keys(): expected ['a', 'b'], got ['b', 'a']")
    assert guard.describe() == "list(L['x'].keys()) == ['a', 'b']"


def test_dict_keys_guard_checks_key_types_when_not_all_strings():
    guard = DictKeysGuard(X, (1, "a"))
    assert holds(guard, {"x": {1: None, "a": None}})
    assert (reason(guard, {"x": {True: None, "a": None}})
            == "L['x'].keys(): expected [1, 'a'], got [True, 'a']")


def test_dict_keys_guard_on_a_value_that_is_not_a_mapping():
    assert (reason(DictKeysGuard(X, ("a",)), {"x": 3})
            == "L['x'].keys(): expected ['a'], got 3 (not a mapping)")


def test_hasattr_guard():
    present = Config()
    present.cache = {}
    assert holds(HasAttrGuard(X, "cache", True), {"x": present})
    assert (reason(HasAttrGuard(X, "cache", True), {"x": Config()})
            == "hasattr(L['x'], 'cache'): expected True, got False")
    assert holds(HasAttrGuard(X, "cache", False), {"x": Config()})
    assert (reason(HasAttrGuard(X, "cache", False), {"x": present})
            == "hasattr(L['x'], 'cache'): expected False, got True")
