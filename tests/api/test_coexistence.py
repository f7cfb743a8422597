"""framejit next to torch.compile (the anchor we measure against) in one process.

Both install a PEP 523 eval-frame function and keep data on code objects (`co_extra`): neither
may break the other, nested either way, nor crash when their code objects are freed.
"""
import gc

import pytest
import torch

import dynamo
from dynamo import hook

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))


@pytest.fixture(autouse=True)
def _not_under_nop_rewrite():
    from dynamo.rewrite import NopRewriteDriver

    if isinstance(hook.get_callback(), NopRewriteDriver):
        pytest.skip("under `python -m dynamo nop-rewrite` every frame of torch.compile's own "
                    "compiler is rewritten too, which takes many minutes")


def shared(x):
    return torch.sin(x) + 1


def test_one_function_under_both_then_freed():
    x = torch.randn(4)
    jitted = dynamo.jit(shared, backend="eager")
    torch.testing.assert_close(jitted(x), shared(x))
    compiled = torch.compile(shared, backend="eager")
    torch.testing.assert_close(compiled(x), shared(x))
    torch.testing.assert_close(jitted(x), shared(x))
    del jitted, compiled
    dynamo.reset()
    torch._dynamo.reset()
    gc.collect()  # frees code objects carrying torch's co_extra data and ours
    assert not hook.counters()["installed"]


def test_nested_either_way():
    x = torch.randn(4)
    inner_compiled = torch.compile(lambda y: y * 2, backend="eager")
    call_compiled = dynamo.disable(lambda y: inner_compiled(y))

    def outer(y):
        return call_compiled(y) + 1

    jitted_outer = dynamo.jit(outer, backend="eager")
    for _ in range(2):
        torch.testing.assert_close(jitted_outer(x), x * 2 + 1)
    assert not hook.counters()["installed"]

    inner_jitted = torch.compiler.disable(dynamo.jit(lambda y: y * 3, backend="eager"))

    def outer_compiled(y):
        return inner_jitted(y) - 1

    compiled = torch.compile(outer_compiled, backend="eager")
    for _ in range(2):
        torch.testing.assert_close(compiled(x), x * 3 - 1)
    assert not hook.counters()["installed"]
    torch._dynamo.reset()
