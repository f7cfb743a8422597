"""`dynamo.config.dynamic_by_default` (`JIT_DYNAMIC_BY_DEFAULT=1`): `jit(dynamic=None)` behaves
as `dynamic=True`, every dimension of size >= 2 symbolic from the first call, while sizes 0 and
1, `mark_static` and an explicit `dynamic=False` keep specialising. The counts are the
backend's compiles; every call is compared with eager (`dynamic_programs.outcome`).
"""
import pytest
import torch

import dynamo
from dynamic_programs import assert_same_outcome, counting_backend, outcome


def scaled(x):
    return (x.sin() * 2).sum(0) + x.shape[0]


def scaled_by(x, n):
    return x.cos() * n + n


def compiles(function, calls, backend="eager", **jit_options) -> int:
    """Runs `function` jitted and eagerly on each argument tuple of `calls` (compared), and
    returns how many graphs the backend compiled."""
    dynamo.reset()
    counting = counting_backend(backend)
    jitted = dynamo.jit(function, backend=counting, **jit_options)
    for arguments in calls:
        expected = outcome(function, tuple(a.clone() if isinstance(a, torch.Tensor) else a
                                           for a in arguments))
        assert_same_outcome(expected, outcome(jitted, arguments), f"{arguments[0].shape}")
    return counting.frame_count


def batches(*sizes, width=4):
    return [(torch.randn(size, width),) for size in sizes]


@pytest.mark.parametrize("mode", [True, False], indirect=True)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_batch_change_compiles_once_under_the_mode(mode, backend):
    assert compiles(scaled, batches(3, 5, 7), backend) == (1 if mode else 2)


@pytest.mark.parametrize("mode", [True], indirect=True)
def test_the_first_compile_is_symbolic(mode):
    dynamo.reset()
    counting = counting_backend("eager")
    dynamo.jit(scaled, backend=counting)(torch.randn(3, 4))
    (placeholder,) = [node for node in counting.graphs[0].graph.nodes if node.op == "placeholder"]
    sizes = placeholder.meta["example_value"].shape
    assert all(isinstance(size, torch.SymInt) for size in sizes), sizes


@pytest.mark.parametrize("mode", [True], indirect=True)
def test_dynamic_false_still_specialises(mode):
    assert compiles(scaled, batches(3, 5), dynamic=False) == 2


@pytest.mark.parametrize("mode", [True], indirect=True)
def test_mark_static_is_respected(mode):
    calls = batches(3, 5)
    for (x,) in calls:
        dynamo.mark_static(x, 0)
    assert compiles(scaled, calls) == 2
    widths = [(torch.randn(3, width),) for width in (4, 6)]
    for (x,) in widths:
        dynamo.mark_static(x, 0)
    assert compiles(scaled, widths) == 1  # dim 1 stays symbolic


@pytest.mark.parametrize("mode", [True], indirect=True)
def test_sizes_zero_and_one_specialise(mode):
    # 1 and 0 each compile their own static entry; 3 the symbolic one that 5 and 7 reuse
    assert compiles(scaled, batches(1, 0, 3, 5, 7)) == 3


@pytest.mark.parametrize("mode", [True, False], indirect=True)
def test_int_arguments_follow_the_mode(mode):
    calls = [(torch.randn(3, 4), 3), (torch.randn(3, 4), 5), (torch.randn(3, 4), 9)]
    assert compiles(scaled_by, calls) == (1 if mode else 2)


@pytest.mark.parametrize("mode", [False], indirect=True)
def test_a_jit_calls_options_turn_the_mode_on(mode):
    options = {"dynamic_by_default": True}
    assert compiles(scaled, batches(3, 5, 7), options=options) == 1


@pytest.mark.parametrize("mode", [False], indirect=True)
def test_the_setting_is_read_at_compile_time(mode):
    dynamo.reset()
    counting = counting_backend("eager")
    jitted = dynamo.jit(scaled, backend=counting)
    dynamo.config.dynamic_by_default = True  # after jit(...), before the first compile
    for size in (3, 5, 7):
        jitted(torch.randn(size, 4))
    assert counting.frame_count == 1


@pytest.mark.parametrize("mode", [True, False], indirect=True)
def test_explain_reports_the_effective_setting(mode):
    report = dynamo.explain(scaled)(torch.randn(3, 4))
    text = "\n".join(report.guards[0])
    if mode:
        assert "size=[*, *]" in text and "L['x'].size()[0] >= 2" in text, text
    else:
        assert "size=[3, 4]" in text, text


def test_the_environment_variable_sets_the_field():
    found = type(dynamo.config).from_environment({"JIT_DYNAMIC_BY_DEFAULT": "1"})
    assert found.dynamic_by_default is True
    assert type(dynamo.config).from_environment({}).dynamic_by_default is False
