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
        else:   # a new buffer's (test_state_versions_match_eager)
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


def _step_copied_into(side: Side) -> None:
    """In place without a new tensor: `copy_`, and a write through `.data` (which has a
    version counter of its own: a compiled step trusting a host copy of the count while the
    counter's version is unchanged would miss it; the counters are read every call)."""
    params = side.params
    side.optimizer.state[params[0]]["step"].copy_(torch.tensor(7.0))
    side.optimizer.state[params[1]]["step"].data.fill_(4.0)
    side.optimizer.state[params[2]]["exp_avg"].copy_(torch.ones_like(params[2]))


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
    "step_copied_into": _step_copied_into,
    "state_cleared": _state_cleared, "param_group_added": _param_group_added,
    "grads_absent": _grads_absent,
}
ADAM_ONLY = {"betas", "step_by_hand", "step_copied_into"}
CASES = [(optimizer, change) for optimizer in OPTIMIZERS for change in CHANGES
         if optimizer != "sgd_momentum" or change not in ADAM_ONLY]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer_name,change", CASES)
def test_change_between_steps(backend: str, optimizer_name: str, change: str) -> None:
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


VERSION_CASES = {
    "sgd_momentum": (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    "sgd_nesterov_decay": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True,
                                                 weight_decay=0.01)),
    "sgd_dampening_maximize": (torch.optim.SGD, dict(lr=0.1, momentum=0.8, dampening=0.3,
                                                     maximize=True)),
    "adam": (torch.optim.Adam, dict(lr=0.01)),
    "adam_amsgrad_decay": (torch.optim.Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    "adam_maximize": (torch.optim.Adam, dict(lr=0.01, maximize=True)),
    "adamw_amsgrad": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
}


def _two_steps(optimizer):
    optimizer.step()
    optimizer.step()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("case", sorted(VERSION_CASES))
@pytest.mark.parametrize("program", [_step, _two_steps], ids=["one_step", "two_steps"])
def test_state_versions_match_eager(backend: str, foreach: bool, case: str, program) -> None:
    """Every state tensor's version counter (and the params') after 1, 2 and 3 calls, from
    the first (where the state is made), values bit for bit. SGD's new momentum buffer was
    left at version 1 (eager's `torch.clone(grad).detach()` is 0): the graph writes it with
    `copy_` into a buffer made before the graph runs."""
    cls, options = VERSION_CASES[case]
    model = _model()
    sides = []
    for module, step in ((model, program),
                         (copy.deepcopy(model), dynamo.jit(program, backend=backend))):
        params = list(module.parameters())
        sides.append((params, cls(params, foreach=foreach, **options), step))
    bases = [[param._version for param in params] for params, _, _ in sides]   # deepcopy: 0
    for call in range(3):
        for params, optimizer, step in sides:
            _set_grads(params, call)
            step(optimizer)
        (ours, eager_optimizer, _), (theirs, jitted_optimizer, _) = sides
        for index, (a, b) in enumerate(zip(ours, theirs)):
            assert torch.equal(a.detach(), b.detach()), (call, index)
            assert a._version - bases[0][index] == b._version - bases[1][index], \
                (call, index, "param version")
            state, other = eager_optimizer.state[a], jitted_optimizer.state[b]
            assert list(state) == list(other), (call, index)
            for name, value in state.items():
                assert torch.equal(value, other[name]), (call, index, name)
                assert (value._version, value.dtype, value.device) == \
                    (other[name]._version, other[name].dtype, other[name].device), \
                    (call, index, name, value._version, other[name]._version)


@pytest.mark.parametrize("backend", BACKENDS)
def test_adam_first_step_bitwise(backend: str) -> None:
    """Inductor's Adam was 1 ulp off eager in one weight here: the generated `sqrt` was IEEE,
    eager's float sqrt on CPU is MKL's vsSqrt (not correctly rounded); now it calls vsSqrt."""
    model = _model()
    eager = Side(model, "adam", None)
    jitted = Side(copy.deepcopy(model), "adam", backend)
    for side in (eager, jitted):
        _set_grads(side.params, 0)
        side.step(side.optimizer)
    for a, b in zip(eager.params, jitted.params):
        assert torch.equal(a.detach(), b.detach())
