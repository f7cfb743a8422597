"""A `torch.jit.script`ed function called from jitted code became a graph node whose target FX
printed as `torch.jit.ScriptFunction(...)` (the class: "No constructor defined") in the
graph's Python code, so the eager backend and `explain()` failed on transformers 5.17's
DeBERTa-v2 (found by the H100 zoo run). It is traced as the Python function it was made from."""
import torch

from tests.capture.differential import check


@torch.jit.script
def log_bucket(position: torch.Tensor, buckets: int) -> torch.Tensor:
    sign = torch.sign(position)
    return sign * torch.log1p(position.abs()) * buckets


@torch.jit.script
def doubled(position: torch.Tensor, buckets: int) -> torch.Tensor:
    return position * buckets


def test_scripted_function_is_traced_into(backend):
    def f(x):
        return log_bucket(x * 2, 3) + 1
    check(f, torch.randn(4, 5), graphs=1, breaks=0, backend=backend)


def test_scripted_function_replaced_between_calls_recompiles(backend):
    import dynamo
    global log_bucket
    saved = log_bucket

    def f(x):
        return log_bucket(x, 2)
    jitted = dynamo.jit(f, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(jitted(x), f(x))
    try:
        log_bucket = doubled
        torch.testing.assert_close(jitted(x), x * 2)
    finally:
        log_bucket = saved
