"""GuardSet: dedup, check order, the generated check and its attributes, slow-path reasons,
descriptions, and death with identity-guarded objects."""
import gc

import pytest
import torch

from guards import (ConstantGuard, GlobalStateGuard, GuardSet, IdentityGuard, LengthGuard,
                    LocalSource, NoneGuard, TensorMatchGuard, TypeGuard, install_for)
from guards.kinds.base import RANK_TENSOR

X, Y, N = LocalSource("x"), LocalSource("y"), LocalSource("n")


class Holder:
    pass


def test_equal_guards_are_kept_once():
    guard_set = GuardSet()
    assert guard_set.add(TypeGuard(X, int))
    assert not guard_set.add(TypeGuard(X, int))
    assert guard_set.add(TypeGuard(Y, int))
    assert guard_set.extend([ConstantGuard(N, 2), ConstantGuard(N, 2), ConstantGuard(N, 2.0)]) == 2
    assert guard_set.add(TensorMatchGuard.of(X, torch.ones(2)))
    assert not guard_set.add(TensorMatchGuard.of(X, torch.zeros(2)))
    assert len(guard_set) == 5
    assert TypeGuard(X, int) in guard_set


def test_check_order_is_by_rank_then_insertion():
    guards = [GlobalStateGuard(), TensorMatchGuard.of(X, torch.ones(1)), ConstantGuard(N, 1),
              TensorMatchGuard.of(Y, torch.ones(2)), TypeGuard(Y, torch.Tensor),
              NoneGuard(LocalSource("m"), True), IdentityGuard(LocalSource("f"), print)]
    ordered = GuardSet(guards).ordered()
    kinds = [type(guard).__name__ for guard in ordered]
    assert kinds == ["TypeGuard", "IdentityGuard", "ConstantGuard", "NoneGuard",
                     "TensorMatchGuard", "TensorMatchGuard", "GlobalStateGuard"]
    tensors = [guard for guard in ordered if guard.rank == RANK_TENSOR]
    assert [guard.source for guard in tensors] == [X, Y]


def test_compiled_check_attributes_and_source(python_checks):
    guard_set = GuardSet(install_for(torch.ones(2, 3), X) + install_for(5, N))
    check = guard_set.compile()
    assert check.guard_set is guard_set
    assert check.source_text.startswith("def check(L, G):\n    try:\n")
    assert "n = L['n']" in check.source_text and "x = L['x']" in check.source_text
    assert check.source_text.index("n == 5") < check.source_text.index("x.shape == (2, 3)")
    assert guard_set.compile() is check
    assert check({"x": torch.zeros(2, 3), "n": 5}, {})
    assert not check({"x": torch.zeros(2, 3), "n": 6}, {})
    guard_set.add(LengthGuard(X, 2))
    assert guard_set.compile() is not check


def test_each_source_is_fetched_once():
    source = LocalSource("xs")
    guard_set = GuardSet(install_for([torch.ones(1), torch.ones(2)], source))
    text = guard_set.compile().source_text
    assert text.count("= L['xs']") == 1
    assert text.count("= xs[0]") == 1


def test_check_never_raises():
    class Exploding:
        def __len__(self):
            raise RuntimeError("boom")

        @property
        def shape(self):
            raise RuntimeError("boom")

    guard_set = GuardSet([LengthGuard(X, 2), TensorMatchGuard.of(Y, torch.ones(2))])
    check = guard_set.compile()
    assert check({"x": Exploding(), "y": torch.ones(2)}, {}) is False
    assert check({}, {}) is False
    assert check({"x": [1, 2], "y": Exploding()}, {}) is False
    assert guard_set.failures({"x": Exploding(), "y": Exploding()}, {}) == [
        "len(L['x']) == 2: could not be checked (RuntimeError: boom)",
        "type(L['y']): expected Tensor, got Exploding"]


def test_failures_lists_every_failing_guard_in_check_order():
    guard_set = GuardSet([TensorMatchGuard.of(X, torch.ones(4)), ConstantGuard(N, 3),
                          TypeGuard(Y, str)])
    frame = {"x": torch.ones(5), "n": 4, "y": "ok"}
    assert guard_set.failures(frame, {}) == ["L['n']: expected 3, got 4",
                                             "L['x'].size()[0]: expected 4, got 5"]
    assert guard_set.failures({"x": torch.ones(4), "n": 3, "y": "ok"}, {}) == []


def test_failures_report_a_missing_source_once():
    guard_set = GuardSet(install_for([1, 2], X))
    assert guard_set.failures({}, {}) == ["L['x']: could not be read (KeyError: 'x')"]


def test_describe_is_one_line_per_guard():
    guard_set = GuardSet(install_for({"w": torch.ones(2)}, X))
    assert guard_set.describe() == [
        "type(L['x']) is dict", "list(L['x'].keys()) == ['w']",
        "L['x']['w']: Tensor(torch.float32, cpu, size=[2], stride=[1])"]
    assert len(guard_set.describe()) == len(guard_set)


def test_set_dies_with_an_identity_guarded_object():
    target = Holder()
    guard_set = GuardSet([IdentityGuard(X, target), ConstantGuard(N, 1)])
    check = guard_set.compile()
    dropped = []
    guard_set.on_invalidate(dropped.append)
    frame = {"x": target, "n": 1}
    assert check(frame, {})
    del frame, target
    gc.collect()
    assert dropped == [guard_set]
    assert not guard_set.alive
    assert check({"x": Holder(), "n": 1}, {}) is False
    assert guard_set.failures({"x": None, "n": 1}, {}) == [
        "L['x']: the object seen at capture (a Holder object) was freed"]
    late = []
    guard_set.on_invalidate(late.append)
    assert late == [guard_set]
    assert guard_set.compile()({"x": None, "n": 1}, {}) is False


def test_invalidation_callback_errors_do_not_escape(caplog):
    guard_set = GuardSet([ConstantGuard(N, 1)])
    guard_set.on_invalidate(lambda dead: 1 / 0)
    guard_set.invalidate()
    assert "invalidation callback failed" in caplog.text


def test_only_guards_are_accepted():
    with pytest.raises(TypeError, match="expected a Guard"):
        GuardSet().add("L['x'] == 1")


def test_generated_code_is_visible_to_tracebacks():
    import inspect

    check = GuardSet([ConstantGuard(N, 1)]).compile()
    assert inspect.getsource(check) == check.source_text


def test_failures_skip_guards_reached_through_a_failed_source():
    guard_set = GuardSet(install_for([torch.ones(2), 3], X) + install_for(4, N))
    assert guard_set.failures({"x": "ab", "n": 5}, {}) == [
        "type(L['x']): expected list, got str", "L['n']: expected 4, got 5"]
    assert guard_set.failures({"x": [torch.ones(3), 3, 0], "n": 4}, {}) == [
        "len(L['x']): expected 2, got 3"]


def test_generated_source_is_forgotten_with_its_check():
    import linecache

    guard_set = GuardSet([ConstantGuard(N, 1)])
    filename = guard_set.compile().__code__.co_filename
    assert filename in linecache.cache
    del guard_set
    gc.collect()
    assert filename not in linecache.cache
