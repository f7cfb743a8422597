"""Adam whose step counters are counted on the host (a non-capturable Adam's CPU counters
beside CUDA params; forced on CPU params here as tests/training/test_compiled_optimizers.py
does) with every size symbolic: found by the suite under `JIT_DYNAMIC_BY_DEFAULT=1`, where
all 30 of test_step_counters_counted_on_the_host and test_two_steps_in_one_graph_count_on_the
_host gave other parameter values than eager from the second step on (eager backend too: a
capture-side bug). Cause: the step's scalar vector (a compiler-made graph input, one value
per rule) was traced with a symbolic size, so the guard read it by calling
`StepScalars.values()`, which increments the host-counted step counters: counted twice per
call. The vector is now static under every setting (dynamo/variables/optimizers.py).
"""
import pytest
import torch

import dynamo
import inductor
from tests.training.test_compiled_optimizers import run_differential


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_adam_with_host_counted_steps_and_symbolic_sizes(monkeypatch, backend):
    from dynamo.variables import optimizer_updates
    monkeypatch.setattr(optimizer_updates, "step_counted_on_host", lambda entry: True)
    monkeypatch.setattr(dynamo.config, "dynamic_by_default", True)
    # as tests/training/test_compiled_optimizers.py: no silent fallback, and eager's sqrt
    # (MKL's on CPU, not correctly rounded) for Adam's denominator
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    monkeypatch.setattr(inductor.config, "fallback_ops", "aten.sqrt")
    run_differential(torch.optim.Adam, dict(lr=0.01), backend, steps=3)
