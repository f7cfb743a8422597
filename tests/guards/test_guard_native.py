"""The native tensor matcher (`guards.native`): it loads, it answers exactly as the generated
Python conditions and the independent oracle do, and checks fall back to Python without it."""
import dataclasses
import os
import subprocess
import sys

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from guard_oracle import tensor_facts
from guard_strategies import tensor_specs
from guards import GuardSet, LocalSource, TensorMatchGuard, native
from guards.kinds.tensors import TensorProperties

X = LocalSource("x")
NATIVE_OFF = os.environ.get("JIT_NATIVE_GUARDS", "1") in ("0", "false", "no", "off")


def python_check(guards):
    """The generated Python conditions for `guards`, whatever the native switch says."""
    saved = native.enabled()
    native.set_enabled(False)
    try:
        return GuardSet(guards).compile()
    finally:
        native.set_enabled(saved)


@pytest.mark.skipif(NATIVE_OFF, reason="JIT_NATIVE_GUARDS=0")
def test_native_matcher_loads_and_checks_use_it():
    assert native.load() is not None, native.unavailable_reason()
    check = GuardSet([TensorMatchGuard.of(X, torch.ones(2, 3))]).compile()
    assert "tensors_match(x)" in check.source_text
    assert "x.shape" not in check.source_text
    assert check({"x": torch.zeros(2, 3)}, {}) and not check({"x": torch.zeros(3, 2)}, {})


@pytest.mark.skipif(NATIVE_OFF, reason="JIT_NATIVE_GUARDS=0")
@given(st.lists(tensor_specs(), min_size=1, max_size=3), st.lists(tensor_specs(), min_size=1,
                                                                   max_size=3), st.data())
def test_native_matcher_agrees_with_python_conditions_and_oracle(captured, candidates, data):
    expected = [spec.build() for spec in captured]
    properties = [TensorProperties.of(tensor) for tensor in expected]
    relax = data.draw(st.booleans())
    if relax:  # "any" entries, as dynamic shapes will use
        properties = [dataclasses.replace(item, sizes=tuple(None for _ in item.sizes))
                      for item in properties]
    matcher = native.tensor_matcher(properties)
    given_tensors = [spec.build() for spec in candidates]
    given_tensors += expected[len(given_tensors):]
    given_tensors = given_tensors[:len(expected)]
    guards = [TensorMatchGuard(LocalSource(f"t{index}"), item)
              for index, item in enumerate(properties)]
    frame = {f"t{index}": tensor for index, tensor in enumerate(given_tensors)}
    verdict = matcher(*given_tensors)
    assert verdict is all(_matches(item, tensor) for item, tensor in zip(properties,
                                                                          given_tensors))
    assert python_check(guards)(frame, {}) is verdict
    assert (GuardSet(guards).failures(frame, {}) == []) is verdict


def _matches(properties, tensor) -> bool:
    """The oracle's facts compared with expected properties, `None` entries matching anything."""
    facts = tensor_facts(tensor)
    kind, dtype, device, requires_grad, layout, sizes, strides, inference, neg, conj = facts
    fixed = (properties.tensor_type, properties.dtype, properties.device.type,
             properties.requires_grad, properties.layout, properties.inference, properties.neg,
             properties.conj)
    if (kind, dtype, device.type, requires_grad, layout, inference, neg, conj) != fixed:
        return False
    return _entries_match(properties.sizes, sizes) and (
        properties.strides is None or _entries_match(properties.strides, strides))


def _entries_match(expected, got) -> bool:
    return len(expected) == len(got) and all(
        entry is None or entry == value for entry, value in zip(expected, got))


@pytest.mark.skipif(NATIVE_OFF, reason="JIT_NATIVE_GUARDS=0")
def test_native_matcher_rejects_non_tensors_and_checks_its_arguments():
    matcher = native.tensor_matcher([TensorProperties.of(torch.ones(2))])
    assert matcher(torch.ones(2)) is True
    assert matcher([1.0, 1.0]) is False and matcher(None) is False
    assert matcher(torch.nn.Parameter(torch.ones(2))) is False  # exact type
    with pytest.raises(TypeError, match="exactly 1 positional"):
        matcher(torch.ones(2), torch.ones(2))
    with pytest.raises(TypeError, match="tensor spec"):
        native.load().TensorMatcher([(torch.Tensor,)])
    with pytest.raises(TypeError, match="tensor type"):
        native.load().TensorMatcher([(int, *([None] * 9))])


@pytest.mark.skipif(NATIVE_OFF, reason="JIT_NATIVE_GUARDS=0")
def test_native_matcher_on_sparse_and_meta_tensors():
    sparse = torch.eye(3).to_sparse()
    matcher = native.tensor_matcher([TensorProperties.of(sparse)])
    assert matcher(torch.eye(3).to_sparse()) and not matcher(torch.eye(3))
    meta = torch.empty(2, 3, device="meta")
    matcher = native.tensor_matcher([TensorProperties.of(meta)])
    assert matcher(torch.empty(2, 3, device="meta")) and not matcher(torch.empty(2, 3))


def test_properties_the_matcher_cannot_hold_stay_in_python():
    symbolic = dataclasses.replace(TensorProperties.of(torch.ones(2)), sizes=("j1",))
    assert native.tensor_matcher([symbolic]) is None
    check = GuardSet([TensorMatchGuard(X, symbolic)]).compile()
    assert "tensors_match" not in check.source_text and not check({"x": torch.ones(2)}, {})


def test_without_a_compiler_checks_fall_back_to_python(tmp_path):
    code = ("import torch, guards\n"
            "from guards import native\n"
            "check = guards.GuardSet(guards.install_for(torch.ones(2), guards.LocalSource('x')))"
            ".compile()\n"
            "print(native.load() is None, 'tensors_match' in check.source_text,\n"
            "      check({'x': torch.zeros(2)}, {}), check({'x': torch.zeros(3)}, {}))\n")
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path),
                       JIT_CACHE_DIR=str(tmp_path), JIT_CXX=str(tmp_path / "no-compiler"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=environment, timeout=300)
    assert result.stdout.split() == ["True", "False", "True", "False"], result.stderr
    assert result.stderr.count("native guard checks unavailable, using Python checks") == 1
