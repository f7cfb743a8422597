"""The native global-state step (guards/native/global_state.h) against the Python conditions.

Part one: for pairs of states (the one captured, the one at the call), the check compiled with the
native step and the one compiled with Python conditions give the same verdict, and the slow
path's reasons agree with both; every setting is flipped alone from several bases, then random
pairs. Part two: through `dynamo.jit` on both backends with the native step on, flipping each
setting between calls recompiles (or, where it changes the result, still matches eager), and
flipping back reuses the first entry.
"""
import contextlib
import random

import pytest
import torch

import dynamo
from dynamo import hook
from guards import GlobalStateGuard, GuardSet, TorchState, native

OTHER_AUTOCAST_DEVICES = ("xpu", "hpu", "mps", "mtia")
"""Devices whose autocast only the "any autocast" part sees; mps is outside torch 2.14's
`_is_any_autocast_enabled` list, so the native step's fallback call answers there."""

BASE = dict(grad=True, inference=False, cpu=None, cuda=None, other=None,
            default_dtype=torch.float32, deterministic=False, warn_only=False,
            precision="highest", cublas_tf32=False, cudnn_tf32=True)

CHOICES = dict(grad=[True, False], inference=[False, True],
               cpu=[None, torch.bfloat16, torch.float16], cuda=[None, torch.float16],
               other=[None, *OTHER_AUTOCAST_DEVICES],
               default_dtype=[torch.float32, torch.float64],
               deterministic=[False, True], warn_only=[False, True],
               precision=["highest", "high", "medium"], cublas_tf32=[False, True],
               cudnn_tf32=[True, False])


def _saved():
    devices = ("cpu", "cuda", *OTHER_AUTOCAST_DEVICES)
    return dict(grad=torch.is_grad_enabled(), default_dtype=torch.get_default_dtype(),
                deterministic=(torch.are_deterministic_algorithms_enabled(),
                               torch.is_deterministic_algorithms_warn_only_enabled()),
                precision=torch.get_float32_matmul_precision(),
                cudnn_tf32=torch._C._get_cudnn_allow_tf32(),
                autocast={device: (torch.is_autocast_enabled(device),
                                   torch.get_autocast_dtype(device)) for device in devices})


def _restore(saved):
    torch._C._set_grad_enabled(saved["grad"])
    torch.set_default_dtype(saved["default_dtype"])
    torch.use_deterministic_algorithms(saved["deterministic"][0],
                                       warn_only=saved["deterministic"][1])
    torch.set_float32_matmul_precision(saved["precision"])
    torch._C._set_cudnn_allow_tf32(saved["cudnn_tf32"])
    for device, (enabled, dtype) in saved["autocast"].items():
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)


@contextlib.contextmanager
def applied(settings):
    """Torch's global state set to `settings` (BASE's keys) inside; everything restored after."""
    saved = _saved()
    with contextlib.ExitStack() as stack:
        if settings["inference"]:
            stack.enter_context(torch.inference_mode())
        try:
            torch._C._set_grad_enabled(settings["grad"])
            for device in ("cpu", "cuda"):
                dtype = settings[device]
                torch.set_autocast_enabled(device, dtype is not None)
                if dtype is not None:
                    torch.set_autocast_dtype(device, dtype)
            for device in OTHER_AUTOCAST_DEVICES:
                torch.set_autocast_enabled(device, settings["other"] == device)
            torch.set_default_dtype(settings["default_dtype"])
            torch.use_deterministic_algorithms(settings["deterministic"],
                                               warn_only=settings["warn_only"])
            torch.set_float32_matmul_precision(settings["precision"])
            # torch couples the flag with the precision (it sets "high"); after "medium", torch
            # 2.14's getters raise ("a mix of the legacy and new APIs"): not a state to check
            if settings["cublas_tf32"] and settings["precision"] != "medium":
                torch._C._set_cublas_allow_tf32(True)
            torch._C._set_cudnn_allow_tf32(settings["cudnn_tf32"])
            yield
        finally:
            _restore(saved)


def _compiled(state, use_native):
    saved = native.enabled()
    native.set_enabled(use_native)
    try:
        guard_set = GuardSet([GlobalStateGuard(state)])
        return guard_set, guard_set.compile()
    finally:
        native.set_enabled(saved)


@pytest.fixture(scope="module")
def native_step():
    module = native.load()
    if module is None or not getattr(module, "HAS_STATE_STEP", False):
        pytest.skip(f"native state step unavailable: {native.unavailable_reason()}")


def _agree(captured, now_settings):
    """Compile for `captured` both ways, call both under `now_settings`: same verdict, and the
    slow path's reasons empty exactly when they accept."""
    with applied(captured):
        state = TorchState.current()
    native_set, native_check = _compiled(state, True)
    python_set, python_check = _compiled(state, False)
    assert "torch_state_matches()" in native_check.source_text
    assert "torch_state_matches()" not in python_check.source_text
    with applied(now_settings):
        by_native, by_python = bool(native_check({}, {})), bool(python_check({}, {}))
        reasons = python_set.failures({}, {})
        now = TorchState.current()
    assert by_native == by_python, (captured, now_settings, reasons)
    assert by_python == (not reasons), (captured, now_settings, reasons)
    if now == state:
        assert by_native
    return by_native


BASES = [BASE, dict(BASE, cpu=torch.bfloat16), dict(BASE, grad=False, deterministic=True,
                                                     warn_only=True, precision="medium"),
         dict(BASE, inference=True, cuda=torch.float16, default_dtype=torch.float64,
              cudnn_tf32=False, other="xpu")]
FLIPS = [(index, name, value) for index, _ in enumerate(BASES) for name, values in CHOICES.items()
         for value in values if value != BASES[index][name]]


@pytest.mark.parametrize("base, name, value", FLIPS,
                         ids=[f"base{index}-{name}={value}" for index, name, value in FLIPS])
def test_one_setting_flipped(native_step, base, name, value):
    captured = BASES[base]
    changed = dict(captured, **{name: value})
    assert _agree(captured, captured)
    _agree(captured, changed)
    _agree(changed, captured)


def test_random_pairs(native_step):
    rng = random.Random(25)
    held = 0
    for _ in range(60):
        captured = {name: rng.choice(values) for name, values in CHOICES.items()}
        near = dict(captured, **{name: rng.choice(values) for name, values in
                                 rng.sample(sorted(CHOICES.items()), 2)})
        far = {name: rng.choice(values) for name, values in CHOICES.items()}
        held += _agree(captured, near) + _agree(captured, far) + _agree(captured, captured)
    assert held >= 60  # each state holds against itself


def test_warn_only_counts_only_while_deterministic(native_step):
    captured = dict(BASE, deterministic=False, warn_only=True)
    assert _agree(captured, dict(captured, warn_only=False))
    deterministic = dict(BASE, deterministic=True, warn_only=True)
    assert not _agree(deterministic, dict(deterministic, warn_only=False))


def test_autocast_dtype_counts_only_while_enabled(native_step):
    with applied(BASE):
        torch.set_autocast_dtype("cpu", torch.float16)
        state = TorchState.current()
    _, check = _compiled(state, True)
    with applied(BASE):
        torch.set_autocast_dtype("cpu", torch.bfloat16)
        assert check({}, {})
    with applied(dict(BASE, cpu=torch.bfloat16)):
        assert not check({}, {})


# ---- through dynamo.jit -----------------------------------------------------------------------

def _matmul(x, y):
    return x @ y


def _scaled(x, y):
    return x * 2 + y


def _with_ones(x, y):
    return x + torch.ones(3, 3)


SETTINGS = {
    # setting: (function, value changing it from BASE)
    "grad": (_scaled, False),
    "inference": (_scaled, True),
    "cpu": (_matmul, torch.bfloat16),
    "cpu dtype": (_matmul, None),  # cpu autocast float16 at capture, bfloat16 after
    "default_dtype": (_with_ones, torch.float64),
    "deterministic": (_scaled, True),
    "warn_only": (_scaled, None),  # deterministic at capture, warn-only after
    "precision": (_matmul, "medium"),
    "cublas_tf32": (_matmul, True),
    "cudnn_tf32": (_scaled, False),
}


def _settings_pair(name, value):
    if name == "cpu dtype":
        return dict(BASE, cpu=torch.float16), dict(BASE, cpu=torch.bfloat16)
    if name == "warn_only":
        return dict(BASE, deterministic=True), dict(BASE, deterministic=True, warn_only=True)
    return BASE, dict(BASE, **{name: value})


def _same(expected, actual):
    assert actual.dtype == expected.dtype and actual.requires_grad == expected.requires_grad
    assert actual.is_inference() == expected.is_inference()
    torch.testing.assert_close(actual, expected, atol=1e-2, rtol=1e-2)


CASES = [(name, backend) for name in SETTINGS for backend in ("eager", "inductor")]


@pytest.mark.parametrize("name, backend", CASES)
def test_flipping_a_setting_between_calls_recompiles(native_step, backend, name):
    function, value = SETTINGS[name]
    first, second = _settings_pair(name, value)
    counting = dynamo.CountingBackend(dynamo.backends.lookup_backend(backend))
    jitted = dynamo.jit(function, backend=counting)
    x = torch.randn(3, 3, requires_grad=name == "grad")
    y = torch.randn(3, 3)
    saved = native.enabled()
    native.set_enabled(True)
    try:
        for step, settings in enumerate([first, second, first, second]):
            with applied(settings):
                _same(function(x, y), jitted(x, y))
            assert counting.frame_count == min(step + 1, 2), (step, name)
        checks = [check for check, _ in hook.entries(function.__code__)]
        assert len(checks) == 2
        assert all("torch_state_matches()" in check.source_text for check in checks)
    finally:
        native.set_enabled(saved)
        dynamo.reset()
