"""Property-based tests (hypothesis) on guards built by `install_for` from generated values:
soundness against an independent oracle, stability, and failure reasons naming the difference."""
import dataclasses
import math

from hypothesis import assume, given
from hypothesis import strategies as st

from guard_oracle import same_guarded, tensor_facts
from guard_strategies import (DTYPES, SCALARS, TENSOR_VALUES, VALUES, TensorSpec, build,
                              replace_at, tensor_leaves, tensor_specs)
from guards import (ConstantGuard, GuardSet, LocalSource, TensorMatchGuard, install_for,
                    is_constant)
from guards.kinds.constants import constant_key, constants_match

X = LocalSource("x")


def compiled(value):
    guard_set = GuardSet(install_for(value, X))
    return guard_set, guard_set.compile()


def mutated_spec(spec: TensorSpec, change: str) -> TensorSpec:
    """`spec` with one property changed (the caller assumes the change is possible)."""
    if change == "dtype":
        others = [dtype for dtype in DTYPES if dtype != spec.dtype and
                  (not spec.requires_grad or dtype.is_floating_point or dtype.is_complex)]
        view = spec.view if spec.view != "conj" else "contiguous"
        return dataclasses.replace(spec, dtype=others[0], view=view) if others else spec
    if change == "grow":
        return dataclasses.replace(spec, shape=spec.shape[:-1] + (spec.shape[-1] + 1,))
    if change == "rank":
        return dataclasses.replace(spec, shape=spec.shape + (1,), view="contiguous")
    if change == "requires_grad":
        return dataclasses.replace(spec, requires_grad=not spec.requires_grad)
    return dataclasses.replace(spec, wrapper=change)


@given(VALUES)
def test_stability_the_captured_value_passes(spec):
    value = build(spec)
    guard_set, check = compiled(value)
    assert check({"x": value}, {}) is True
    assert guard_set.failures({"x": value}, {}) == []


@given(VALUES)
def test_stability_an_equal_rebuilt_value_passes(spec):
    _, check = compiled(build(spec))
    assert check({"x": build(spec)}, {}) is True
    assert check({"x": build(spec)}, {}) is True


@given(VALUES, VALUES)
def test_soundness_check_agrees_with_oracle_on_independent_values(check_mode, first, second):
    captured, candidate = build(first), build(second)
    _, check = compiled(captured)
    assert check({"x": candidate}, {}) == same_guarded(captured, candidate)


@given(TENSOR_VALUES, st.data())
def test_soundness_check_agrees_with_oracle_after_one_tensor_change(check_mode, spec, data):
    leaves = tensor_leaves(spec)
    path, leaf = data.draw(st.sampled_from(leaves))
    replacement = data.draw(tensor_specs())
    captured, candidate = build(spec), build(replace_at(spec, path, replacement))
    _, check = compiled(captured)
    assert check({"x": candidate}, {}) == same_guarded(captured, candidate)


@given(VALUES, VALUES)
def test_fast_and_slow_paths_agree(check_mode, first, second):
    guard_set, check = compiled(build(first))
    frame = {"x": build(second)}
    assert check(frame, {}) == (guard_set.failures(frame, {}) == [])


@given(tensor_specs(), st.sampled_from(["dtype", "grow", "rank", "requires_grad", "parameter",
                                        "tensor", "inference"]))
def test_reason_names_the_single_changed_tensor_property(spec, change):
    assume(spec.shape or change != "grow")
    changed = mutated_spec(spec, change)
    assume(changed != spec)
    assume(not (changed.wrapper == "inference" and changed.requires_grad))
    assume(not (changed.requires_grad and not (changed.dtype.is_floating_point
                                               or changed.dtype.is_complex)))
    captured, candidate = spec.build(), changed.build()
    guard_set, check = compiled(captured)
    assume(tensor_facts(captured) != tensor_facts(candidate))
    assert not check({"x": candidate}, {})
    first_reason = guard_set.failures({"x": candidate}, {})[0]
    expected_subject = {
        "dtype": "L['x'].dtype:", "grow": "L['x'].size()[", "rank": "L['x'].dim():",
        "requires_grad": "L['x'].requires_grad:", "parameter": "type(L['x']):",
        "tensor": "type(L['x']):", "inference": "type(L['x']):",
    }[change]
    if change == "inference" and spec.wrapper == "tensor":
        expected_subject = "L['x'].is_inference():"
    if change == "tensor" and spec.wrapper == "inference":
        expected_subject = "L['x'].is_inference():"
    if change == "dtype" and changed.view != spec.view:
        assume(first_reason.startswith("L['x'].dtype:"))
    assert first_reason.startswith(expected_subject), first_reason


@given(tensor_specs(max_dims=3), st.data())
def test_any_size_entries_accept_every_size_there(check_mode, spec, data):
    assume(spec.shape and spec.view == "contiguous")
    dims = data.draw(st.sets(st.integers(0, len(spec.shape) - 1), min_size=1))
    all_dims = range(len(spec.shape))
    guard = TensorMatchGuard.of(X, spec.build()).relaxed(size_dims=dims, stride_dims=all_dims)
    new_shape = tuple(data.draw(st.integers(0, 5)) if dim in dims else size
                      for dim, size in enumerate(spec.shape))
    candidate = dataclasses.replace(spec, shape=new_shape).build()
    check = GuardSet([guard]).compile()
    assert check({"x": candidate}, {})
    other_dims = [dim for dim in all_dims if dim not in dims]
    if other_dims:
        dim = other_dims[0]
        grown = tuple(size + 1 if index == dim else size for index, size in enumerate(new_shape))
        grown_tensor = dataclasses.replace(spec, shape=grown).build()
        assert not check({"x": grown_tensor}, {})
        assert GuardSet([guard]).failures({"x": grown_tensor}, {}) == [
            f"L['x'].size()[{dim}]: expected {spec.shape[dim]}, got {grown[dim]}"]


@given(SCALARS, SCALARS)
def test_constant_guard_is_strict_equality(first, second):
    assert is_constant(first)
    check = GuardSet([ConstantGuard(X, first)]).compile()
    assert check({"x": second}, {}) == same_guarded(first, second)
    assert constants_match(first, second) == same_guarded(first, second)
    assert (constant_key(first) == constant_key(second)) == same_guarded(first, second)


@given(st.floats(allow_nan=True), st.floats(allow_nan=True))
def test_float_constants_distinguish_signed_zero_and_match_nan(first, second):
    check = GuardSet([ConstantGuard(X, first)]).compile()
    expected = (math.isnan(first) and math.isnan(second)) or (
        first == second and math.copysign(1, first) == math.copysign(1, second))
    assert check({"x": second}, {}) == expected


@given(VALUES, VALUES)
def test_failure_reasons_read_as_expected_and_got(first, second):
    guard_set, _ = compiled(build(first))
    for reason in guard_set.failures({"x": build(second)}, {}):
        assert "\n" not in reason
        assert reason.startswith(("L['x']", "type(L['x']", "len(L['x']", "list(L['x']"))
        assert ": expected " in reason and ", got " in reason or "could not be" in reason


def _with_constant_leaf(parts) -> tuple:
    """(container, key): `others` with the constant `leaf` put at a drawn place."""
    others, leaf, place, keyed = parts
    if keyed:
        spec = dict(others)
        key = place if place not in spec else next(key for key in range(-2, 4) if key not in spec)
        spec[key] = leaf
        return spec, key
    position = min(place % 4, len(others))
    return others[:position] + [leaf] + others[position:], position


# a list or dict with a constant (not None) leaf at a known key, built so: a filter on VALUES
# discarded so many draws that hypothesis's filter_too_much health check failed at times
_CONSTANT_LEAF = SCALARS.filter(lambda value: value is not None and is_constant(value))
_WITH_CONSTANT_LEAF = st.one_of(
    st.tuples(st.lists(VALUES, max_size=2), _CONSTANT_LEAF, st.integers(0, 3), st.just(False)),
    st.tuples(st.dictionaries(st.one_of(st.text(max_size=3), st.integers(-2, 2)), VALUES,
                              max_size=2),
              _CONSTANT_LEAF, st.one_of(st.text(max_size=3), st.integers(-2, 2)), st.just(True)),
).map(_with_constant_leaf)


@given(_WITH_CONSTANT_LEAF, st.data())
def test_reason_names_the_changed_constant_leaf(built, data):
    spec, key = built
    replacement = data.draw(SCALARS.filter(lambda value: not same_guarded(spec[key], value)))
    changed = replace_at(spec, (key,), replacement)
    guard_set, check = compiled(build(spec))
    frame = {"x": build(changed)}
    assert not check(frame, {})
    subject = f"L['x'][{key!r}]"
    assert any(reason.startswith((subject, f"type({subject})"))
               for reason in guard_set.failures(frame, {}))
