"""Property-based tests (hypothesis) of the guard kinds for facts outside a value's own guard:
partitions (which sources name one object or share one storage), dict membership, results of
calls and methods, and objects bound weakly into the check. Native and Python checks both run;
the oracle computes each fact afresh (`is`, storage data pointers, `in`), without the guards'
helpers."""
import gc

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from guard_checking import verdict
from guards import (AttrSource, CallSource, ConstantGuard, ContainsGuard, GuardSet, LocalSource,
                    MethodCallSource, ObjectSource, PartitionGuard, TypeGuard)

NAMES = ("a", "b", "c", "d", "e")
# small spaces: a quarter of the profile's examples each (ci: 50, thorough: 500)
FEW = settings(max_examples=max(20, settings.default.max_examples // 4))


def sources(count):
    return tuple(LocalSource(name) for name in NAMES[:count])


def oracle_same_pattern(values, labels, key) -> bool:
    """Every pair is one thing (by `key`) exactly when its labels are equal."""
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            if (key(values[i]) == key(values[j])) != (labels[i] == labels[j]):
                return False
    return True


def canonical(labels):
    seen = {}
    return tuple(seen.setdefault(label, len(seen)) for label in labels)


objects = [object() for _ in range(5)]


@FEW
@given(st.lists(st.integers(0, 4), min_size=2, max_size=5),
       st.lists(st.integers(0, 4), min_size=5, max_size=5))
def test_object_partition_matches_the_oracle(check_mode, captured, picks):
    count = len(captured)
    guard = PartitionGuard(sources(count), canonical(captured))
    values = [objects[pick] for pick in picks[:count]]
    frame = dict(zip(NAMES, values))
    accepted, _ = verdict([guard], frame)
    assert accepted == oracle_same_pattern(values, canonical(captured), id)


def storage_pointer(tensor):
    return tensor.untyped_storage().data_ptr()  # an independent reading of "one storage"


@FEW
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=2, max_size=5),
       st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=5, max_size=5))
def test_storage_partition_matches_the_oracle(check_mode, captured, picks):
    """Each value is a view (at an offset) of one of three base tensors."""
    bases = [torch.arange(8.0) for _ in range(3)]
    views = lambda pairs: [bases[base][offset:offset + 4] for base, offset in pairs]  # noqa
    at_capture = views(captured)
    labels = canonical([storage_pointer(view) for view in at_capture])
    guard = PartitionGuard(sources(len(captured)), labels, by_storage=True)
    values = views(picks[:len(captured)])
    accepted, _ = verdict([guard], dict(zip(NAMES, values)))
    assert accepted == oracle_same_pattern(values, labels, storage_pointer)
    assert verdict([guard], dict(zip(NAMES, at_capture)))[0]


@FEW
@given(st.sets(st.sampled_from(["max", "len", "tag", "x"])), st.sampled_from(["max", "tag"]),
       st.booleans())
def test_contains_matches_the_oracle(check_mode, keys, key, present):
    namespace = {name: 1 for name in keys}
    guard = ContainsGuard(LocalSource("d"), key, present)
    assert verdict([guard], {"d": namespace})[0] == ((key in namespace) == present)


@FEW
@given(st.integers(0, 3), st.integers(0, 3))
def test_method_call_source_reads_the_fact_now(check_mode, offset, later):
    base = torch.arange(8.0)
    guard = ConstantGuard(MethodCallSource(LocalSource("x"), "storage_offset"), offset)
    assert verdict([guard], {"x": base[offset:]})[0]
    assert verdict([guard], {"x": base[later:]})[0] == (later == offset)


@FEW
@given(st.sampled_from([1, 2]))
def test_call_source_calls_again_on_every_check(check_mode, threads):
    saved = torch.get_num_threads()
    guard = ConstantGuard(CallSource(torch.get_num_threads), saved)
    check = GuardSet([guard]).compile()
    try:
        torch.set_num_threads(threads)
        assert check({}, {}) == (threads == saved)
    finally:
        torch.set_num_threads(saved)
    assert check({}, {})


@FEW
@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
def test_object_source_reads_through_a_weak_reference(check_mode, value, later):
    class Config:
        pass
    Config.scale = value
    guard = ConstantGuard(AttrSource(ObjectSource.of(Config), "scale"), value)
    guard_set = GuardSet([guard, TypeGuard(LocalSource("x"), Config)])
    check = guard_set.compile()
    instance = Config()
    assert check({"x": instance}, {})
    Config.scale = later
    assert check({"x": instance}, {}) == (repr(later) == repr(value))
    del Config, instance
    gc.collect()
    assert not guard_set.alive  # the check held neither the class nor its instance
