"""Horizontal fusion (`schedule/combine.py`, `codegen/triton/combo.py`): independent small
pointwise kernels run as one launch, with the same bits as when each launches alone.

Graphs of N independent in-place updates make one kernel where they made N (fewer where the
limits on kernels, arguments and elements per launch say so), dependent kernels never share
a launch, and optimizer steps (SGD with momentum, Adam, AdamW) jitted by `dynamo.jit` give
the same params and state bit for bit with combined launches as without, on the Triton
backend (CPU interpreter here; also CUDA when present) and the C++ backend (which the pass
leaves alone).
"""
import copy

import pytest
import torch

import dynamo
from inductor.schedule import combine
from inductor.schedule.plans import GraphPlan, KernelPlan
from inductor.schedule.tiling import Tiling
from tests.triton.conftest import DEVICES, compile_function


def updates(p0, p1, p2, p3, p4, p5, p6, p7, g0, g1, g2, g3, g4, g5, g6, g7):
    """`param.mul_(0.9).add_(grad * 0.1)` for 8 (param, grad) pairs: 8 kernels alone."""
    for param, grad in zip((p0, p1, p2, p3, p4, p5, p6, p7), (g0, g1, g2, g3, g4, g5, g6, g7)):
        param.mul_(0.9).add_(grad * 0.1)


def _inputs(shapes, device="cpu"):
    torch.manual_seed(0)
    values = [torch.randn(shape, device=device) for shape in shapes]
    return values + [torch.randn(shape, device=device) for shape in shapes]


def _run(settings, function, inputs, **options):
    settings.update(**options)
    compiled_inputs = copy.deepcopy(inputs)
    compiled = compile_function(function, *compiled_inputs)
    compiled(*compiled_inputs)
    return compiled.report.kernel_count, compiled_inputs


SHAPES = [(7,), (16, 3), (128,), (5, 5, 5), (1000,), (64,), (3,), (2, 300)]


@pytest.mark.parametrize("device", DEVICES)
def test_independent_updates_make_one_launch_with_the_same_bits(settings, device):
    inputs = _inputs(SHAPES, device)
    expected = copy.deepcopy(inputs)
    updates(*expected)
    alone, separate = _run(settings, updates, inputs, combo_kernels=False)
    together, combined = _run(settings, updates, inputs, combo_kernels=True)
    assert (alone, together) == (len(SHAPES), 1)
    for position, (left, right) in enumerate(zip(separate, combined)):
        assert torch.equal(left, right), f"input {position} differs with combined launches"
    torch.testing.assert_close(combined, expected)


@pytest.mark.parametrize("limits, kernels", [
    ({"combo_max_kernels": 3}, 3),              # 8 updates in runs of 3, 3, 2
    ({"combo_max_kernels": 1}, 8),              # off in effect
    ({"combo_max_arguments": 4}, 4),            # two updates (4 buffers) per launch
    ({"combo_max_numel": 200}, 4),              # 4 small, 1000 alone, 2 small, 600 alone
])
def test_limits_bound_each_launch(settings, limits, kernels):
    inputs = _inputs(SHAPES)
    count, combined = _run(settings, updates, inputs, combo_kernels=True, **limits)
    assert count == kernels
    _, separate = _run(settings, updates, inputs, combo_kernels=False)
    assert all(torch.equal(left, right) for left, right in zip(separate, combined))


def _kernel(name, loads, stores, numel=64, kind="pointwise"):
    plan = KernelPlan(name, [numel], [], [], list(loads), list(stores))
    plan.tiling = Tiling(kind)
    return plan


def _combined(settings, kernels, frees=None, **options):
    settings.update(**{"combo_kernels": True, **options})
    plan = GraphPlan(list(kernels), [], [], {}, [], dict(frees or {}))
    combined = combine.combine_kernels(plan)
    assert [step.name for step in plan.steps] == [kernel.name for kernel in kernels]
    return combined


def _shape(plan) -> list:
    return [[part.name for part in step.parts] if isinstance(step, combine.ComboPlan)
            else step.name for step in plan.steps]


def test_dependent_kernels_never_share_a_launch(settings):
    plan = _combined(settings, [
        _kernel("a", ["x"], ["y"]),
        _kernel("b", ["p"], ["q"]),
        _kernel("c", ["y"], ["z"]),         # reads what a writes
        _kernel("d", ["r"], ["z2"]),
        _kernel("e", ["s"], ["r"]),         # writes what d reads
        _kernel("f", ["t"], ["r"]),         # writes what e writes
        _kernel("g", ["u"], ["v"], kind="reduction"),
        _kernel("h", ["w"], ["w2"], numel=1 << 23),     # too large
        _kernel("i", ["k"], ["k2"]),
    ])
    assert _shape(plan) == [["a", "b"], ["c", "d"], "e", "f", "g", "h", "i"]


def test_buffers_die_after_the_combined_launch(settings):
    plan = _combined(settings, [_kernel("a", ["x"], ["y"]), _kernel("b", ["p"], ["q"]),
                                _kernel("c", ["y"], ["z"])], frees={0: ["x"], 1: ["p"],
                                                                    2: ["y"]})
    assert _shape(plan) == [["a", "b"], "c"]
    assert plan.frees == {0: ["x", "p"], 1: ["y"]}


def test_switched_off_changes_nothing(settings):
    kernels = [_kernel("a", ["x"], ["y"]), _kernel("b", ["p"], ["q"])]
    assert _shape(_combined(settings, kernels, combo_kernels=False)) == ["a", "b"]


OPTIMIZERS = [(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
              (torch.optim.Adam, {"lr": 0.01}),
              (torch.optim.AdamW, {"lr": 0.01, "weight_decay": 0.1})]
PARAM_SHAPES = [(6, 4), (4,), (3, 2, 2), (5,), (2, 8)]


def step_once(optimizer):
    optimizer.step()


def _optimizer_run(optimizer_class, options, device, jit: bool, steps: int = 3):
    torch.manual_seed(0)
    params = [torch.randn(shape, device=device, requires_grad=True) for shape in PARAM_SHAPES]
    optimizer = optimizer_class(params, **options)
    step = dynamo.jit(step_once, backend="inductor") if jit else step_once
    generator = torch.Generator().manual_seed(7)
    for _ in range(steps):
        for param in params:
            param.grad = torch.randn(param.shape, generator=generator).to(device)
        step(optimizer)
    state = [value for param in params for value in optimizer.state[param].values()
             if isinstance(value, torch.Tensor)]
    return [param.detach() for param in params] + state


def _launches(monkeypatch) -> list:
    """Kernels per compiled graph before and after the pass, recorded as it runs."""
    seen, original = [], combine.combine_kernels

    def recording(plan):
        combined = original(plan)
        seen.append((len(plan.kernels()), len(combined.kernels())))
        return combined
    monkeypatch.setattr(combine, "combine_kernels", recording)
    return seen


@pytest.mark.static_shapes(reason="the params are plain tensors: with every size dynamic each "
                           "gets its own size symbols, and horizontal fusion combines kernels "
                           "of static sizes only (schedule/combine.py): no launch is saved")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("optimizer_class, options", OPTIMIZERS,
                         ids=[cls.__name__ for cls, _ in OPTIMIZERS])
def test_jitted_optimizer_steps_same_bits_fewer_launches(settings, monkeypatch, device,
                                                         optimizer_class, options):
    dynamo.reset()
    settings.update(combo_kernels=False)
    separate = _optimizer_run(optimizer_class, options, device, jit=True)
    dynamo.reset()
    settings.update(combo_kernels=True)
    seen = _launches(monkeypatch)
    combined = _optimizer_run(optimizer_class, options, device, jit=True)
    dynamo.reset()
    assert seen and any(after < before for before, after in seen), seen
    assert max(before for before, _ in seen) >= len(PARAM_SHAPES)
    assert min(after for _, after in seen) <= 2, seen
    for position, (left, right) in enumerate(zip(separate, combined)):
        assert torch.equal(left, right), f"tensor {position} differs with combined launches"
    expected = _optimizer_run(optimizer_class, options, device, jit=False)
    torch.testing.assert_close(combined, expected)


@pytest.mark.parametrize("optimizer_class, options", OPTIMIZERS,
                         ids=[cls.__name__ for cls, _ in OPTIMIZERS])
def test_cpp_backend_is_left_as_it_was(settings, monkeypatch, optimizer_class, options):
    """The C++ backend runs a run of kernels from one entry point already: the pass is not
    called there, and its steps keep eager's bits."""
    dynamo.reset()
    settings.update(cpu_backend="cpp", combo_kernels=True)
    seen = _launches(monkeypatch)
    jitted = _optimizer_run(optimizer_class, options, "cpu", jit=True)
    dynamo.reset()
    assert seen == []
    expected = _optimizer_run(optimizer_class, options, "cpu", jit=False)
    for position, (left, right) in enumerate(zip(jitted, expected)):
        assert torch.equal(left, right), f"tensor {position} differs from eager"
