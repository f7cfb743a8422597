"""`dynamo.config.symbolic_trace_seconds`: a trace with symbolic sizes that runs too long is
abandoned and the frame traced again with static sizes, for good (torchvision's swin_t under
every-size-dynamic spent minutes in torch's ShapeEnv simplifying its padded-window sizes: now
about 30 s, then a static trace). Here the limit is set so low that any symbolic trace outruns
it; each call is compared with eager (`dynamic_programs.outcome`).
"""
import pytest
import torch

import dynamo
from dynamic_programs import assert_same_outcome, counting_backend, outcome


def scaled(x):
    return (x.sin() * 2).sum(0) + x.shape[0]


def _run(backend: str, sizes) -> tuple:
    dynamo.reset()
    counting = counting_backend(backend)
    jitted = dynamo.jit(scaled, backend=counting, dynamic=True)
    for size in sizes:
        x = torch.randn(size, 4)
        assert_same_outcome(outcome(scaled, (x.clone(),)), outcome(jitted, (x,)), str(size))
    return counting


@pytest.mark.parametrize("limit", [1e-9], indirect=True)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_symbolic_trace_over_the_limit_is_traced_again_with_static_sizes(limit, backend):
    counting = _run(backend, [3, 5, 7])
    assert counting.frame_count == 3   # static: one graph per size
    for graph in counting.graphs:
        for node in graph.graph.nodes:
            if node.op == "placeholder":
                example = node.meta["example_value"]
                assert not any(isinstance(size, torch.SymInt) for size in example.shape)
    report = dynamo.explain(scaled, backend="eager", dynamic=True)(torch.randn(3, 4))
    assert any("symbolic_trace_seconds" in reason for reason in report.recompiles), \
        report.recompiles


@pytest.mark.parametrize("limit", [0, 30.0], indirect=True)
def test_no_limit_or_a_generous_one_keeps_the_trace_symbolic(limit):
    counting = _run("eager", [3, 5, 7])
    assert counting.frame_count == 1
