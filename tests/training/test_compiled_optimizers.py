"""Compiled optimizer steps: torch.optim's SGD, Adam and AdamW `step()` and `zero_grad()`
captured into the graph (dynamo/variables/optimizers.py, optimizer_updates.py), against eager.

Every test runs the same program eagerly on one copy of the params and jitted on another, and
compares bit for bit in float32 after every step: params, their `.grad` (value or None) and
the optimizer state (keys, tensors with dtype, shape and device, other values). Both backends,
`eager` and `inductor` (the suite's fixture fails a test whose graph inductor ran through eager
kernels). Graphs are counted with a counting backend: a learning rate changed by a scheduler
recompiles nothing; the first step (eager's lazy state init, inside the graph) and the next
(state present) are the two graphs of a run.
"""
import importlib

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st
import torch.nn.functional as F

import dynamo
import inductor
from dynamo.backends import lookup_backend

BACKENDS = ["eager", "inductor"]
# CUDA runs the CUDA forms of the scalar ops and the foreach kernels' own rounding (foreach is
# the default there); they are untested where no GPU is present
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
STEPS = 5
SHAPES = [(6, 4), (4,), (3, 2, 2)]


@pytest.fixture(autouse=True)
def _no_silent_fallback(monkeypatch):
    """A graph the code generator gives up on must fail here, not run as eager kernels."""
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    # Adam's `exp_avg_sq.sqrt()` is generated code calling eager's MKL vsSqrt (inductor/vml.py):
    # no `fallback_ops = "aten.sqrt"` here (test_adam_with_ieee_sqrt_differs_in_the_last_bit)


class Counting:
    """A backend recording each graph it compiles, then compiling it with `name`."""

    def __init__(self, name: str):
        self.inner = lookup_backend(name)
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)

    def ops(self) -> set:
        return {str(node.target) for graph in self.graphs for node in graph.graph.nodes
                if node.op in ("call_method", "call_function")}


def make_params(shapes=SHAPES, device="cpu") -> list:
    torch.manual_seed(0)
    return [torch.randn(shape).to(device).requires_grad_() for shape in shapes]


def set_grads(params, twins, step: int, none=()) -> None:
    generator = torch.Generator().manual_seed(1000 + step)
    for index, (param, twin) in enumerate(zip(params, twins)):
        grad = torch.randn(param.shape, generator=generator).to(param.device)
        param.grad = None if index in none else grad.clone()
        twin.grad = None if index in none else grad.clone()


def assert_bitwise(actual, expected, what: str) -> None:
    if not isinstance(expected, torch.Tensor):
        assert actual == expected, f"{what}: {actual!r} != {expected!r}"
        return
    assert isinstance(actual, torch.Tensor), what
    assert (actual.dtype, actual.shape, actual.device) == \
        (expected.dtype, expected.shape, expected.device), what
    differ = 0 if torch.equal(actual, expected) else int((actual != expected).sum())
    assert differ == 0, f"{what}: {differ} of {expected.numel()} elements differ"


def assert_same(jitted_params, eager_params, jitted_opt, eager_opt, step: int) -> None:
    for index, (actual, expected) in enumerate(zip(jitted_params, eager_params)):
        assert_bitwise(actual.detach(), expected.detach(), f"step {step}: param {index}")
        assert (actual.grad is None) == (expected.grad is None), f"step {step}: grad {index}"
        if expected.grad is not None:
            assert_bitwise(actual.grad, expected.grad, f"step {step}: grad {index}")
        state, expected_state = jitted_opt.state.get(actual), eager_opt.state.get(expected)
        assert (state is None) == (expected_state is None), f"step {step}: state {index}"
        if expected_state is None:
            continue
        assert list(state) == list(expected_state), f"step {step}: state keys {index}"
        for name, value in expected_state.items():
            assert_bitwise(state[name], value, f"step {step}: state {name} of param {index}")


def step_once(optimizer):
    optimizer.step()


SGD_OPTIONS = [
    {}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True},
    {"momentum": 0.9, "dampening": 0.25}, {"weight_decay": 0.01},
    {"momentum": 0.9, "weight_decay": 0.01, "maximize": True},
    {"momentum": 0.9, "nesterov": True, "foreach": True},
    {"momentum": 0.8, "weight_decay": 0.05, "maximize": True, "foreach": True},
]
ADAM_OPTIONS = [
    {}, {"amsgrad": True}, {"weight_decay": 0.1}, {"maximize": True},
    {"betas": (0.8, 0.99), "eps": 1e-6}, {"foreach": True},
    {"foreach": True, "amsgrad": True, "maximize": True, "weight_decay": 0.1},
]
CASES = [(torch.optim.SGD, dict(lr=0.1, **options)) for options in SGD_OPTIONS] + \
    [(torch.optim.Adam, dict(lr=0.01, **options)) for options in ADAM_OPTIONS] + \
    [(torch.optim.AdamW, dict(lr=0.01, **options)) for options in ADAM_OPTIONS]


def _case_id(case) -> str:
    cls, options = case
    return cls.__name__ + "-" + ("-".join(f"{key}={value}" for key, value in options.items()
                                          if key != "lr") or "default")


def run_differential(cls, options, backend, program=step_once, steps=STEPS, none=lambda s: (),
                     between=None, setup=None, device="cpu"):
    """`program(optimizer)` eagerly and jitted, `steps` times; returns the counting backend."""
    params, twins = make_params(device=device), make_params(device=device)
    optimizer, twin_optimizer = cls(params, **options), cls(twins, **options)
    if setup is not None:
        setup(optimizer, twin_optimizer)
    counting = Counting(backend)
    jitted = dynamo.jit(program, backend=counting)
    for step in range(steps):
        set_grads(params, twins, step, none(step))
        program(twin_optimizer)
        jitted(optimizer)
        assert_same(params, twins, optimizer, twin_optimizer, step)
        if between is not None:
            between(step, optimizer, twin_optimizer)
    return counting


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_step_matches_eager(backend, case, device):
    cls, options = case
    counting = run_differential(cls, options, backend, device=device)
    stateless = cls is torch.optim.SGD and not options.get("momentum")
    # the first step makes the state inside the graph; the second finds it (guarded keys)
    assert len(counting.graphs) == (1 if stateless else 2)
    assert "_set_grad_enabled" in str(counting.ops()), "the update ran outside the graph"


ADAM_CASES = [case for case in CASES if case[0] is not torch.optim.SGD]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ADAM_CASES, ids=_case_id)
def test_step_counters_counted_on_the_host(backend, case, monkeypatch):
    """The path CUDA params take (a non-capturable Adam's CPU step counters beside them: the
    counters are incremented by the compiled code on the host, not by the graph), forced on
    CPU params: bit for bit as eager, the counters included, and no counter in the graph."""
    from dynamo.variables import optimizer_updates
    monkeypatch.setattr(optimizer_updates, "step_counted_on_host", lambda entry: True)
    cls, options = case
    counting = run_differential(cls, options, backend)
    assert len(counting.graphs) == 2 and "_set_grad_enabled" in str(counting.ops())
    updated = {str(node.args[0]) for graph in counting.graphs for node in graph.graph.nodes
               if node.op == "call_method" and node.target == "add_"}
    assert not any("step" in name for name in updated), updated


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_steps_in_one_graph_count_on_the_host(backend, monkeypatch):
    """Two `step()` calls in one graph: each step's scalars read the counter as eager's step
    finds it (the first call's host increment is in it when the second's rules read it)."""
    from dynamo.variables import optimizer_updates
    monkeypatch.setattr(optimizer_updates, "step_counted_on_host", lambda entry: True)

    def twice(optimizer):
        optimizer.step()
        optimizer.step()
    run_differential(torch.optim.Adam, dict(lr=0.01), backend, program=twice, steps=3)


@pytest.mark.filterwarnings("error")   # e.g. "lr_scheduler.step() before optimizer.step()"
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("schedule", ["step", "lambda"])
@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_lr_schedulers_do_not_recompile(backend, schedule, cls):
    """The scheduler wraps `opt.step` (the wrapper sets `opt._opt_called`, which the
    scheduler checks: a warning otherwise) and sets a new lr after every step."""
    options = {"lr": 0.1, "momentum": 0.9} if cls is torch.optim.SGD else {"lr": 0.01}
    schedulers = []

    def setup(optimizer, twin_optimizer):
        for opt in (optimizer, twin_optimizer):
            schedulers.append(torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.7)
                              if schedule == "step" else
                              torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 1 / (e + 1)))

    def between(step, optimizer, twin_optimizer):
        assert optimizer._opt_called
        for scheduler in schedulers:
            scheduler.step()
        assert optimizer.param_groups[0]["lr"] == twin_optimizer.param_groups[0]["lr"]

    counting = run_differential(cls, options, backend, steps=7, between=between, setup=setup)
    assert len(counting.graphs) == 2, "a new learning rate recompiled"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.Adam])
def test_params_without_grads_are_skipped(backend, cls):
    """Param 1 has no grad until step 2 (its state is made then, and its step count lags);
    param 2 never has one (no state, as in eager)."""
    options = {"lr": 0.1, "momentum": 0.9} if cls is torch.optim.SGD else {"lr": 0.01}
    counting = run_differential(cls, options, backend, steps=5,
                                none=lambda step: (1, 2) if step < 2 else (2,))
    assert len(counting.graphs) <= 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_param_groups_and_changed_options(backend):
    """Two groups with their own options; `momentum` changed and a group added between steps
    (guarded: a recompile each, results as eager's)."""
    def make(params):
        return torch.optim.SGD([{"params": params[:2]},
                                {"params": params[2:], "lr": 0.05, "weight_decay": 0.1}],
                               lr=0.1, momentum=0.9)
    params, twins = make_params(), make_params()
    extra, extra_twin = make_params([(5,)])[0], make_params([(5,)])[0]
    optimizer, twin_optimizer = make(params), make(twins)
    counting = Counting(backend)
    jitted = dynamo.jit(step_once, backend=counting)
    for step in range(6):
        if step == 2:
            for opt in (optimizer, twin_optimizer):
                opt.param_groups[0]["momentum"] = 0.5
        if step == 4:
            optimizer.add_param_group({"params": [extra], "nesterov": True})
            twin_optimizer.add_param_group({"params": [extra_twin], "nesterov": True})
            params, twins = params + [extra], twins + [extra_twin]
        set_grads(params, twins, step)
        step_once(twin_optimizer)
        jitted(optimizer)
        assert_same(params, twins, optimizer, twin_optimizer, step)
    # steps 0 (state made), 1 (state read), 2 (momentum changed), 4 (a group added: the new
    # param's state made), 5 (read): nothing else recompiles
    assert len(counting.graphs) == 5


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_state_dict_round_trip(backend, cls):
    options = {"lr": 0.1, "momentum": 0.9} if cls is torch.optim.SGD else {"lr": 0.01}
    params, twins = make_params(), make_params()
    optimizer, twin_optimizer = cls(params, **options), cls(twins, **options)
    jitted = dynamo.jit(step_once, backend=backend)
    for step in range(3):
        set_grads(params, twins, step)
        step_once(twin_optimizer)
        jitted(optimizer)
    saved, expected = optimizer.state_dict(), twin_optimizer.state_dict()
    assert saved["param_groups"] == expected["param_groups"]
    assert saved["state"].keys() == expected["state"].keys()
    for key, state in expected["state"].items():
        for name, value in state.items():
            assert_bitwise(saved["state"][key][name], value, f"state_dict {key} {name}")
    # a new optimizer loading the saved state keeps stepping as eager's does
    loaded = cls(params, **options)
    loaded.load_state_dict(saved)
    for step in range(3, 5):
        set_grads(params, twins, step)
        step_once(twin_optimizer)
        jitted(loaded)
        assert_same(params, twins, loaded, twin_optimizer, step)


@pytest.mark.xfail(
    strict=True, reason="eager's float sqrt on CPU is MKL's vsSqrt (this build), not correctly "
    "rounded; with config.eager_transcendentals off the generated code's sqrt is IEEE: "
    "exp_avg_sq.sqrt() differs in the last bit for some values, and the params with it")
def test_adam_with_ieee_sqrt_differs_in_the_last_bit(monkeypatch):
    monkeypatch.setattr(inductor.config, "eager_transcendentals", False)
    test_whole_training_step("inductor", torch.optim.Adam)


def test_adam_with_generated_sqrt_is_eager_bitwise():
    """The default: the user's float sqrt is generated code calling eager's vsSqrt (was IEEE
    sqrt, an ulp off in about 1 of 6 values: Adam's first step differed in one weight)."""
    test_whole_training_step("inductor", torch.optim.Adam)


def train_step(model, optimizer, x, target):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_whole_training_step(backend, cls):
    """zero_grad, forward, backward (a graph break), step: the step is a compiled graph."""
    def mlp():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    options = {"lr": 0.1, "momentum": 0.9} if cls is torch.optim.SGD else {"lr": 0.01}
    model, twin = mlp(), mlp()
    optimizer, twin_optimizer = cls(model.parameters(), **options), \
        cls(twin.parameters(), **options)
    counting = Counting(backend)
    jitted = dynamo.jit(train_step, backend=counting)
    for step in range(STEPS):
        generator = torch.Generator().manual_seed(step)
        x, target = torch.randn(4, 8, generator=generator), torch.randn(4, 4, generator=generator)
        expected = train_step(twin, twin_optimizer, x, target)
        actual = jitted(model, optimizer, x, target)
        if backend == "eager":  # inductor's mean adds in another order (test_optimizer_soundness)
            assert_bitwise(actual.detach(), expected.detach(), f"step {step}: loss")
        assert_same(list(model.parameters()), list(twin.parameters()), optimizer,
                    twin_optimizer, step)
    assert {"addcmul_", "add_"} <= counting.ops(), "optimizer.step() was not compiled"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.AdamW])
def test_step_jitted_alone(backend, cls):
    """`dynamo.jit(opt.step)`: the bound method itself is the compiled frame."""
    options = {"lr": 0.1, "momentum": 0.9} if cls is torch.optim.SGD else {"lr": 0.01}
    params, twins = make_params(), make_params()
    optimizer, twin_optimizer = cls(params, **options), cls(twins, **options)
    counting = Counting(backend)
    jitted = dynamo.jit(optimizer.step, backend=counting)
    for step in range(STEPS):
        set_grads(params, twins, step)
        twin_optimizer.step()
        assert jitted() is None
        assert_same(params, twins, optimizer, twin_optimizer, step)
    assert len(counting.graphs) == 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(backend, set_to_none):
    def program(optimizer):
        optimizer.zero_grad(set_to_none=set_to_none)
        optimizer.step()

    def check(step, optimizer, twin_optimizer):
        grads = [param.grad for group in optimizer.param_groups for param in group["params"]]
        assert all((grad is None) if set_to_none else not grad.any() for grad in grads)
    run_differential(torch.optim.Adam, {"lr": 0.01}, backend, program=program, between=check)


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_steps_in_one_graph(backend):
    """Step-dependent scalars of the second step count the first one (same graph)."""
    def program(optimizer):
        optimizer.step()
        optimizer.step()
    counting = run_differential(torch.optim.Adam, {"lr": 0.01, "amsgrad": True}, backend,
                                program=program, steps=3)
    assert len(counting.graphs) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_hooks_break_the_graph_and_run(backend):
    calls = []

    def hook(optimizer, args, kwargs):
        calls.append(len(calls))

    def between(step, optimizer, twin_optimizer):
        if step == 1:
            handles.extend([optimizer.register_step_pre_hook(hook),
                            twin_optimizer.register_step_pre_hook(hook)])
        if step == 3:
            for handle in handles:
                handle.remove()
    handles = []
    run_differential(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, backend, between=between)
    assert len(calls) == 4   # steps 2 and 3, eager and jitted


@pytest.mark.parametrize("backend", BACKENDS)
def test_closure_runs_eagerly(backend):
    def program(optimizer):
        return optimizer.step(lambda: 7.0)
    run_differential(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, backend, program=program)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("foreach", [False, True])
def test_capturable_adam(backend, foreach, device, monkeypatch):
    """capturable=True keeps the corrections on the step tensor. Eager allows it on CUDA
    only; both sides are told CPU is allowed, to compare the arithmetic here."""
    devices = lambda supports_xla=True: ["cpu", "cuda"]  # noqa: E731
    for module in ("torch.optim.adam", "torch.optim.optimizer"):
        monkeypatch.setattr(importlib.import_module(module), "_get_capturable_supported_devices",
                            devices)
    counting = run_differential(torch.optim.Adam, {"lr": 0.01, "capturable": True,
                                                   "foreach": foreach, "amsgrad": True},
                                backend, device=device)
    # on CUDA the capturable forms differed from eager's kernels in the last bits (H200,
    # torch 2.11): the step runs eagerly there, and the comparison above still holds
    compiled = "_set_grad_enabled" in str(counting.ops())
    assert compiled == (device == "cpu"), counting.ops()


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_read_after_the_step_that_makes_it(backend):
    """The first step's state is made when the compiled code runs: a later read of
    `opt.state` in the same function sees it (the read runs after a graph break)."""
    seen = []

    def program(optimizer):
        optimizer.step()
        seen.append(len(optimizer.state))
    run_differential(torch.optim.Adam, {"lr": 0.01}, backend, program=program, steps=3)
    assert seen == [3, 3, 3, 3, 3, 3]


_SGD_OPTIONS = st.fixed_dictionaries({
    "momentum": st.sampled_from([0.0, 0.5, 0.9]), "dampening": st.sampled_from([0.0, 0.3]),
    "weight_decay": st.sampled_from([0.0, 0.01]), "nesterov": st.booleans(),
    "maximize": st.booleans(), "foreach": st.sampled_from([None, False, True]),
}).filter(lambda options: not options["nesterov"] or
          (options["momentum"] > 0 and options["dampening"] == 0))
_ADAM_OPTIONS = st.fixed_dictionaries({
    "amsgrad": st.booleans(), "weight_decay": st.sampled_from([0.0, 0.1]),
    "maximize": st.booleans(), "foreach": st.sampled_from([None, False, True]),
    "betas": st.sampled_from([(0.9, 0.999), (0.5, 0.9)]), "eps": st.sampled_from([1e-8, 1e-3]),
})


@settings(max_examples=25, deadline=None)
@given(case=st.one_of(st.tuples(st.just(torch.optim.SGD), _SGD_OPTIONS),
                      st.tuples(st.sampled_from([torch.optim.Adam, torch.optim.AdamW]),
                                _ADAM_OPTIONS)),
       lr=st.sampled_from([0.1, 0.003, 1]))
def test_step_matches_eager_for_any_options(case, lr):
    """Generated option sets, eager backend, 3 steps, the second param without a gradient
    at the first step: bit for bit, and compiled (two or three graphs, never eager)."""
    dynamo.reset()
    cls, options = case
    counting = run_differential(cls, dict(options, lr=lr), "eager", steps=3,
                                none=lambda step: (1,) if step == 0 else ())
    assert 1 <= len(counting.graphs) <= 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_optimizers_in_one_function(backend):
    """Two optimizers (a GAN's pattern) stepping in one graph keep their own scalars and
    state makers."""
    def program(optimizers):
        for optimizer in optimizers:
            optimizer.step()
    params, twins = make_params(), make_params()
    pairs = [(torch.optim.Adam(params[:2], lr=0.01), torch.optim.Adam(twins[:2], lr=0.01)),
             (torch.optim.SGD(params[2:], lr=0.1, momentum=0.9),
              torch.optim.SGD(twins[2:], lr=0.1, momentum=0.9))]
    counting = Counting(backend)
    jitted = dynamo.jit(program, backend=counting)
    for step in range(4):
        set_grads(params, twins, step)
        program([pair[1] for pair in pairs])
        jitted([pair[0] for pair in pairs])
        for optimizer, twin_optimizer in pairs:
            assert_same(params, twins, optimizer, twin_optimizer, step)
        pairs[1][0].param_groups[0]["lr"] *= 0.5
        pairs[1][1].param_groups[0]["lr"] *= 0.5
    assert len(counting.graphs) == 2
