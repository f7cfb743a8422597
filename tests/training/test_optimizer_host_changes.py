"""A jitted `optimizer.step()` against eager when things change between steps on the host.

The compiled step keeps host-side work per call (the step's scalars computed from
`param_groups`, step counters counted on the host, state tensors fetched from
`optimizer.state`, version counters moved as eager's in-place ops would). Each test runs the
same steps eagerly and through `dynamo.jit` (backends "eager" and "inductor"), makes the same
change on both sides between steps (learning rate by hand or by a scheduler, betas,
`load_state_dict`, a hand-written step counter, `optimizer.state.clear()`, `add_param_group`,
`zero_grad(set_to_none=True)` then a step with absent gradients), and compares params and
state bitwise: values, dtypes, devices, version counters, and whether each state tensor is
the object the previous step left (eager updates in place).
"""
from __future__ import annotations

import copy

import pytest
import torch

import dynamo
import inductor

BACKENDS = ["eager", "inductor"]
STEPS = 5
CHANGE_AT = 2   # the change is made before this step

OPTIMIZERS = {
    "adam": lambda params: torch.optim.Adam(params, lr=0.01, foreach=False),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1),
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
}


@pytest.fixture(autouse=True)
def _no_silent_fallback(monkeypatch):
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))


def _set_grads(params, step: int) -> None:
    generator = torch.Generator().manual_seed(100 + step)
    for param in params:
        param.grad = torch.randn(param.shape, generator=generator)


def _step(optimizer):
    optimizer.step()


class Side:
    """One model and optimizer, stepped eagerly or through `dynamo.jit`."""

    def __init__(self, model, optimizer_name: str, backend: str | None):
        self.model = model
        self.params = list(model.parameters())
        self.optimizer = OPTIMIZERS[optimizer_name](self.params)
        self.step = _step if backend is None else dynamo.jit(_step, backend=backend)
        self.extra: list = []
        self.base = {id(param): param._version for param in self.params}   # deepcopy: 0
        self.saved = None
        self.scheduler = None

    def state_objects(self) -> dict:
        return {(index, name): value
                for index, param in enumerate(self.params + self.extra)
                for name, value in self.optimizer.state.get(param, {}).items()}


def _snapshot(side: Side) -> dict:
    return {key: (value, value._version) if isinstance(value, torch.Tensor) else (value, None)
            for key, value in side.state_objects().items()}


def _compare(eager: Side, jitted: Side, step: int, before: tuple) -> None:
    for index, (a, b) in enumerate(zip(eager.params + eager.extra,
                                       jitted.params + jitted.extra)):
        assert torch.equal(a.detach(), b.detach()), f"step {step}: param {index}"
        assert a._version - eager.base[id(a)] == b._version - jitted.base[id(b)], \
            f"step {step}: param {index}'s version"
        assert (a.grad is None) == (b.grad is None), f"step {step}: param {index}'s grad"
    ours, theirs = eager.state_objects(), jitted.state_objects()
    assert ours.keys() == theirs.keys(), f"step {step}: state keys"
    for key, value in ours.items():
        other = theirs[key]
        if not isinstance(value, torch.Tensor):
            assert value == other, f"step {step}: state {key}"
            continue
        assert isinstance(other, torch.Tensor), f"step {step}: state {key}"
        assert (value.dtype, value.device, value.shape) == \
            (other.dtype, other.device, other.shape), f"step {step}: state {key}'s meta"
        assert torch.equal(value, other), f"step {step}: state {key}: {value} != {other}"
        kept = [key in snapshot and snapshot[key][0] is current
                for snapshot, current in ((before[0], value), (before[1], other))]
        assert kept[0] == kept[1], f"step {step}: state {key} kept in place {kept}"
        if kept[0]:   # eager's in-place updates of this step
            assert value._version - before[0][key][1] == other._version - before[1][key][1], \
                f"step {step}: state {key}'s version"
        elif key[1] != "momentum_buffer":   # a new buffer's: test_new_momentum_buffer_version
            assert value._version == other._version, f"step {step}: state {key}'s version"
    for group, other in zip(eager.optimizer.param_groups, jitted.optimizer.param_groups):
        assert {k: v for k, v in group.items() if k != "params"} == \
            {k: v for k, v in other.items() if k != "params"}, f"step {step}: param group"


def _lr_by_hand(side: Side) -> None:
    side.optimizer.param_groups[0]["lr"] = 0.003


def _lr_by_scheduler(side: Side) -> None:
    side.scheduler = torch.optim.lr_scheduler.StepLR(side.optimizer, step_size=1, gamma=0.5)


def _betas(side: Side) -> None:
    side.optimizer.param_groups[0]["betas"] = (0.8, 0.95)


def _load_state_dict(side: Side) -> None:
    side.optimizer.load_state_dict(side.saved)


def _step_by_hand(side: Side) -> None:
    params = side.params
    side.optimizer.state[params[0]]["step"].fill_(10.0)            # in place
    side.optimizer.state[params[1]]["step"] = torch.tensor(3.0)    # a new tensor


def _state_cleared(side: Side) -> None:
    side.optimizer.state.clear()


def _param_group_added(side: Side) -> None:
    torch.manual_seed(1)
    extra = torch.nn.Parameter(torch.randn(5))
    side.extra.append(extra)
    side.base[id(extra)] = extra._version
    side.optimizer.add_param_group({"params": [extra], "lr": 0.02})


def _grads_absent(side: Side) -> None:
    side.optimizer.zero_grad(set_to_none=True)


CHANGES = {
    "lr_by_hand": _lr_by_hand, "lr_by_scheduler": _lr_by_scheduler, "betas": _betas,
    "load_state_dict": _load_state_dict, "step_by_hand": _step_by_hand,
    "state_cleared": _state_cleared, "param_group_added": _param_group_added,
    "grads_absent": _grads_absent,
}
ADAM_ONLY = {"betas", "step_by_hand"}
CASES = [(optimizer, change) for optimizer in OPTIMIZERS for change in CHANGES
         if optimizer != "sgd_momentum" or change not in ADAM_ONLY]


# Found by this file, not caused by host-side changes: the inductor backend's Adam update is
# 1 ulp off eager's in one element of Linear(4, 3)'s weight at the first step, with gradients
# drawn from randn (test_adam_first_step_bitwise; the soundness suite's gradients, from a
# backward, do not show it); AdamW shows it later, where the change re-runs a first step.
ONE_ULP_INDUCTOR = {("adam", change) for change in CHANGES} | {
    ("adamw", change) for change in ("lr_by_scheduler", "load_state_dict", "state_cleared",
                                     "param_group_added", "grads_absent")}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer_name,change", CASES)
def test_change_between_steps(backend: str, optimizer_name: str, change: str,
                              request) -> None:
    if backend == "inductor" and (optimizer_name, change) in ONE_ULP_INDUCTOR:
        request.applymarker(pytest.mark.xfail(
            strict=True, reason="inductor's Adam 1 ulp off eager (test_adam_first_step_bitwise)"))
    model = _model()
    eager = Side(model, optimizer_name, None)
    jitted = Side(copy.deepcopy(model), optimizer_name, backend)
    for step in range(STEPS):
        before = (_snapshot(eager), _snapshot(jitted))
        for side in (eager, jitted):
            if step == 1:
                side.saved = copy.deepcopy(side.optimizer.state_dict())
            if step == CHANGE_AT:
                CHANGES[change](side)
            if change != "grads_absent" or step != CHANGE_AT:
                _set_grads(side.params + side.extra, step)
            else:   # half the params without a gradient: eager's step skips them
                _set_grads(side.params[::2], step)
        for side in (eager, jitted):
            side.step(side.optimizer)
            if side.scheduler is not None:
                side.scheduler.step()
        _compare(eager, jitted, step, before)


@pytest.mark.xfail(strict=True, reason="SGD's first step makes the momentum buffer with "
                   "`clone(grad).detach()` (version 0); the jitted step leaves it at 1")
@pytest.mark.parametrize("backend", BACKENDS)
def test_new_momentum_buffer_version(backend: str) -> None:
    model = _model()
    eager = Side(model, "sgd_momentum", None)
    jitted = Side(copy.deepcopy(model), "sgd_momentum", backend)
    for side in (eager, jitted):
        _set_grads(side.params, 0)
        side.step(side.optimizer)
    versions = [[side.optimizer.state[param]["momentum_buffer"]._version
                 for param in side.params] for side in (eager, jitted)]
    assert versions[0] == versions[1]


@pytest.mark.parametrize("backend", [
    "eager", pytest.param("inductor", marks=pytest.mark.xfail(
        strict=True, reason="one element of the weight 1 ulp off eager (9.3e-10) after the "
        "first Adam step with randn gradients"))])
def test_adam_first_step_bitwise(backend: str) -> None:
    model = _model()
    eager = Side(model, "adam", None)
    jitted = Side(copy.deepcopy(model), "adam", backend)
    for side in (eager, jitted):
        _set_grads(side.params, 0)
        side.step(side.optimizer)
    for a, b in zip(eager.params, jitted.params):
        assert torch.equal(a.detach(), b.detach())
