"""Torch global state: the guard flips with each setting and names it; state is always restored."""
import contextlib

import pytest
import torch

from guard_checking import holds, reason, verdict
from guards import GlobalStateGuard, TorchState


@contextlib.contextmanager
def default_dtype(dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@contextlib.contextmanager
def deterministic(enabled, warn_only=False):
    previous = (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])


@contextlib.contextmanager
def matmul_precision(precision):
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


@contextlib.contextmanager
def c_flag(getter, setter, value):
    previous = getter()
    setter(value)
    try:
        yield
    finally:
        setter(previous)


def cuda_tf32(value):
    return c_flag(torch._C._get_cublas_allow_tf32, torch._C._set_cublas_allow_tf32, value)


def cudnn_tf32(value):
    return c_flag(torch._C._get_cudnn_allow_tf32, torch._C._set_cudnn_allow_tf32, value)


@contextlib.contextmanager
def inference_mode_with_grad():
    with torch.inference_mode(), torch.enable_grad():
        yield


FLIPS = [
    (torch.no_grad, "grad mode: expected enabled, got disabled"),
    (lambda: inference_mode_with_grad(), "inference mode: expected disabled, got enabled"),
    (lambda: torch.autocast("cpu"), "autocast (cpu): expected disabled, got enabled"),
    (lambda: c_flag(lambda: torch.is_autocast_enabled("cuda"),
                    lambda on: torch.set_autocast_enabled("cuda", on), True),
     "autocast (cuda): expected disabled, got enabled"),
    (lambda: default_dtype(torch.float64),
     "default dtype: expected torch.float32, got torch.float64"),
    (lambda: deterministic(True), "deterministic algorithms: expected disabled, got enabled"),
    (lambda: matmul_precision("high"), "float32 matmul precision: expected 'highest', got 'high'"),
    # Torch couples this flag with the matmul precision, which is checked first.
    (lambda: cuda_tf32(True), "float32 matmul precision: expected 'highest', got 'high'"),
    (lambda: cudnn_tf32(False), "torch.backends.cudnn.allow_tf32: expected True, got False"),
]


@pytest.fixture
def baseline():
    state = TorchState.current()
    assert state.grad_enabled and not state.inference_mode and not state.any_autocast
    assert state.default_dtype is torch.float32 and not state.deterministic
    assert state.matmul_precision == "highest" and state.cudnn_tf32
    assert not state.cuda_matmul_tf32
    return GlobalStateGuard(state)


@pytest.mark.parametrize("context, message", FLIPS,
                         ids=[message.split(":")[0] for _, message in FLIPS])
def test_each_setting_flips_the_guard(baseline, context, message):
    assert holds(baseline, {})
    with context():
        assert reason(baseline, {}) == message
        inside = GlobalStateGuard()
        assert holds(inside, {})
    assert holds(baseline, {})
    assert not holds(inside, {})


def test_enable_grad_inside_no_grad_is_grad_mode():
    with torch.no_grad():
        guard = GlobalStateGuard()
        with torch.enable_grad():
            assert reason(guard, {}) == "grad mode: expected disabled, got enabled"
        assert holds(guard, {})


def test_autocast_dtype_counts_only_while_enabled():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        guard = GlobalStateGuard()
        assert "autocast cpu torch.bfloat16" in guard.describe()
    with torch.autocast("cpu", dtype=torch.float16):
        assert reason(guard, {}) == (
            "autocast dtype (cpu): expected torch.bfloat16, got torch.float16")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert holds(guard, {})
    assert reason(guard, {}) == "autocast (cpu): expected enabled, got disabled"
    previous = torch.get_autocast_dtype("cpu")
    torch.set_autocast_dtype("cpu", torch.float16)
    try:
        assert holds(GlobalStateGuard(TorchState.current()), {})
        assert GlobalStateGuard() == GlobalStateGuard(TorchState.current())
    finally:
        torch.set_autocast_dtype("cpu", previous)


def test_autocast_on_another_device_fails_when_none_was_enabled(baseline):
    if not torch._C._is_autocast_available("xpu"):
        pytest.skip("autocast is not available for xpu")
    with torch.autocast("xpu"):
        assert reason(baseline, {}) == "autocast (other devices): expected disabled, got enabled"


def test_deterministic_warn_only_counts_only_while_deterministic():
    with deterministic(True, warn_only=True):
        guard = GlobalStateGuard()
    with deterministic(True, warn_only=False):
        assert reason(guard, {}) == (
            "deterministic algorithms warn_only: expected True, got False")
    with deterministic(False, warn_only=True):
        assert reason(guard, {}) == "deterministic algorithms: expected enabled, got disabled"
        assert GlobalStateGuard() == GlobalStateGuard(TorchState.current())


def test_several_changes_report_the_first_in_check_order(baseline):
    with torch.no_grad(), default_dtype(torch.float64):
        accepted, reasons = verdict(baseline, {})
        assert reasons == ["grad mode: expected enabled, got disabled"]
        assert baseline.state.differences(TorchState.current())[1] == (
            "default dtype", "torch.float32", "torch.float64")


def test_cuda_matmul_tf32_is_reported_after_the_precision(baseline):
    with cuda_tf32(True):
        subjects = [difference[0] for difference in
                    baseline.state.differences(TorchState.current())]
    assert subjects == ["float32 matmul precision", "torch.backends.cuda.matmul.allow_tf32"]


def test_description(baseline):
    assert baseline.describe() == (
        "torch global state: grad mode enabled, inference mode disabled, autocast disabled, "
        "default dtype torch.float32, deterministic algorithms disabled, float32 matmul "
        "precision 'highest', cuda matmul tf32 False, cudnn tf32 True")
