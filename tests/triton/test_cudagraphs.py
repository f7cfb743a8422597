"""mode="reduce-overhead": CUDA graphs give the default mode's results, copy inputs in and
in-place updates back out, re-record on new shapes and moved static inputs, and keep
returned outputs valid across calls. The GPU tests need a GPU; the helpers are tested on
CPU."""
import pytest
import torch

from inductor.runtime.cudagraphs import CudaGraphRunner, _dense, mutated_positions
from tests.triton.conftest import compile_function

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_mutated_positions_and_density():
    from inductor.decompose import trace_aten

    def step(x, counter):
        counter.add_(1)
        return x * counter

    graph = trace_aten(torch.fx.symbolic_trace(step), [torch.ones(3), torch.zeros(3)])
    assert mutated_positions(graph.module) == [1 + len(graph.constants)]
    assert _dense(torch.randn(4, 5)) and _dense(torch.randn(5, 4).t())
    assert not _dense(torch.randn(4, 1).expand(4, 5)) and not _dense(torch.randn(8, 5)[::2])


def test_cpu_graphs_ignore_the_mode():
    compiled = compile_function(lambda x: x * 2, torch.randn(4), mode="reduce-overhead")
    assert not isinstance(compiled.run, CudaGraphRunner)
    torch.testing.assert_close(compiled(torch.ones(4)), torch.full((4,), 2.0))


def _runner(compiled) -> CudaGraphRunner:
    pending = [compiled.run]
    while pending:
        value = pending.pop()
        if isinstance(value, CudaGraphRunner):
            return value
        if hasattr(value, "run"):
            pending.append(value.run)
        for cell in getattr(value, "__closure__", None) or ():
            pending.append(cell.cell_contents)
    raise AssertionError("no CUDA graph runner")


@cuda
def test_replays_match_the_default_mode():
    def block(x, weight):
        return torch.softmax(torch.relu(x @ weight) * 2, -1).sum(0)

    weight = torch.randn(64, 64, device="cuda")
    default = compile_function(block, torch.randn(32, 64, device="cuda"), weight)
    graphs = compile_function(block, torch.randn(32, 64, device="cuda"), weight,
                              mode="reduce-overhead")
    outputs = []
    for _ in range(4):
        x = torch.randn(32, 64, device="cuda")
        expected = default(x, weight)
        actual = graphs(x, weight)
        torch.testing.assert_close(actual, expected)
        outputs.append((actual, expected))
    for actual, expected in outputs:   # earlier results were not overwritten by replays
        torch.testing.assert_close(actual, expected)
    assert _runner(graphs).recorded == 1


@cuda
def test_moved_static_inputs_record_again():
    # A compiled graph is specialised to its input shapes (the frame's guards recompile, and
    # so record anew, on new shapes); within one, only static inputs' addresses can change.
    parameter = torch.nn.Parameter(torch.randn(16, device="cuda"), requires_grad=False)

    def scale(x, p):
        return x * p + 1

    graphs = compile_function(scale, torch.randn(8, 16, device="cuda"), parameter,
                              mode="reduce-overhead")
    runner = _runner(graphs)
    for _ in range(3):
        x = torch.randn(8, 16, device="cuda")
        torch.testing.assert_close(graphs(x, parameter), x * parameter + 1)
    assert runner.recorded == 1
    moved = torch.nn.Parameter(parameter.detach().clone(), requires_grad=False)
    x = torch.randn(8, 16, device="cuda")
    graphs(x, moved)
    torch.testing.assert_close(graphs(x, moved), x * moved + 1)
    assert runner.recorded == 2
    with torch.no_grad():
        moved.mul_(2)       # same address, new values: read in place, no re-recording
    torch.testing.assert_close(graphs(x, moved), x * moved + 1)
    assert runner.recorded == 2


@cuda
def test_input_updates_are_copied_back():
    def step(x, counter):
        counter.add_(1)
        return x * counter

    counter = torch.zeros(5, device="cuda")
    graphs = compile_function(step, torch.ones(5, device="cuda"), counter,
                              mode="reduce-overhead")
    for call in range(1, 5):
        result = graphs(torch.ones(5, device="cuda"), counter)
        torch.testing.assert_close(counter, torch.full((5,), float(call), device="cuda"))
        torch.testing.assert_close(result, counter)


@cuda
def test_random_numbers_differ_per_replay():
    graphs = compile_function(lambda x: torch.rand_like(x) + x, torch.zeros(1000, device="cuda"),
                              mode="reduce-overhead")
    x = torch.zeros(1000, device="cuda")
    results = [graphs(x) for _ in range(4)]
    assert _runner(graphs).recorded == 1
    assert not torch.equal(results[2], results[3])
    assert 0.45 < float(results[3].mean()) < 0.55
