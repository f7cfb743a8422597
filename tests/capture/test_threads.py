"""Capture from several threads: four threads call one jitted function (and one jitted module),
their first calls released at once, with shapes changing from call to call; every result must
equal eager's, no call may raise, and the wrapper's entries stay within the recompile limit."""
import threading
import warnings

import pytest
import torch

import dynamo
from dynamo import hook

PER_SIZE = ("sizes change between calls: inductor compiles one static variant per size until "
            "its kernels take sizes as arguments (issue 23, docs/inductor.md 'Symbolic sizes')")


pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))

THREADS = 4
CALLS = 6


def program(x, scale):
    y = torch.relu(x * scale) + x.sum(-1, keepdim=True)
    if x.shape[0] > 2:
        y = y * 2
    return y.softmax(-1)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.lin(x).relu() + x)


def run_threads(work):
    """Run `work(index)` on THREADS threads released together; re-raise the first error."""
    barrier = threading.Barrier(THREADS)
    errors = []

    def target(index):
        try:
            barrier.wait()
            work(index)
        except BaseException as error:  # noqa: BLE001  (reported below)
            errors.append(error)
    threads = [threading.Thread(target=target, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    if errors:
        raise errors[0]


@pytest.mark.expect_fallback("per_size", reason=PER_SIZE)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_four_threads_one_function_changing_shapes(backend):
    jitted = dynamo.jit(program, backend=backend)

    def work(index):
        generator = torch.Generator().manual_seed(index)
        for call in range(CALLS):
            rows = 1 + (index + call) % 4  # shapes change, and differ between threads
            x = torch.randn(rows, 8, generator=generator)
            scale = float(1 + call % 2)
            torch.testing.assert_close(jitted(x, scale), program(x, scale))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the recompile limit may be reached
        run_threads(work)
    entries = len(hook.entries(program.__code__))
    assert 1 <= entries <= dynamo.config.recompile_limit


@pytest.mark.expect_fallback("per_size", reason=PER_SIZE)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_four_threads_one_module(backend):
    torch.manual_seed(0)
    module = Block()
    jitted = dynamo.jit(module, backend=backend)

    def work(index):
        for call in range(CALLS):
            x = torch.randn(1 + (index * 3 + call) % 3, 8)
            with torch.no_grad():
                torch.testing.assert_close(jitted(x), module(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        run_threads(work)


def test_threads_with_separate_wrappers_and_reset():
    """Threads each jit the same function with their own wrapper while another resets."""
    def work(index):
        for call in range(CALLS):
            jitted = dynamo.jit(program, backend="eager")
            x = torch.randn(2 + call % 2, 8)
            torch.testing.assert_close(jitted(x, 1.0), program(x, 1.0))
            if index == 0 and call % 2:
                dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        run_threads(work)


@pytest.mark.expect_fallback("per_size", reason=PER_SIZE)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_four_threads_each_with_its_own_function(backend):
    """Compiles of different functions in different threads at once (tracing and the backends
    share process-wide state: compiles take one lock)."""
    def make(index):
        def own(x):
            return (x * (index + 1)).tanh() + x.mean()
        return own
    functions = [make(index) for index in range(THREADS)]
    wrappers = [dynamo.jit(function, backend=backend) for function in functions]

    def work(index):
        for call in range(CALLS):
            x = torch.randn(1 + call % 3, 4)
            torch.testing.assert_close(wrappers[index](x), functions[index](x))
    run_threads(work)
