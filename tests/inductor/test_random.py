"""Random ops are never folded into constants: every call of a compiled graph draws fresh
values, and `torch.manual_seed` before a call reproduces them (eager's exact values on the C++
backend, which runs random ops through eager kernels; the same Philox values on the Triton
backend, see lower/random.py).

Graphs here are built with `make_fx` or by hand, never `torch.fx.symbolic_trace`: that tracer
itself runs a call without traced arguments (`torch.randn(4)`) once and stores the result as a
constant, before any compiler sees the graph."""
import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

import inductor

RANDOM_FUNCTIONS = {
    "randn": lambda: torch.randn(4) + 1,
    "rand": lambda: torch.rand(4) * 2,
    "randint": lambda: torch.randint(0, 1000, (8,)) + 1,
    "randperm": lambda: torch.randperm(50) + 1,
    "normal": lambda: torch.normal(0.0, 1.0, (4,)) + 1,
    "bernoulli": lambda: torch.bernoulli(torch.full((64,), 0.5)) + 1,
    "uniform_": lambda: torch.empty(16).uniform_() + 1,
    "normal_": lambda: torch.empty(16).normal_() * 2,
    "multinomial": lambda: torch.multinomial(torch.ones(50), 5) + 1,
}


def _torch_level_graph(with_input: bool) -> torch.fx.GraphModule:
    """`torch.randn(4) + x` (or `+ 1`) as a torch-level FX graph, the random call a node."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x") if with_input else None
    value = graph.call_function(torch.randn, (4,))
    graph.output(graph.call_function(torch.add, (value, x if with_input else 1)))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _single(value):
    """The one tensor a graph returns (compile_aten returns a list)."""
    return value[0] if isinstance(value, (list, tuple)) else value


def _calls_differ_and_reseed(compiled, eager, inputs=(), exact=True):
    first, second = _single(compiled(*inputs)), _single(compiled(*inputs))
    assert not torch.equal(first, second), "two calls returned the same random values"
    torch.manual_seed(7)
    seeded = _single(compiled(*inputs))
    torch.manual_seed(7)
    again = _single(compiled(*inputs))
    torch.testing.assert_close(seeded, again, rtol=0, atol=0)
    if exact:
        torch.manual_seed(7)
        torch.testing.assert_close(seeded, eager(*inputs), rtol=0, atol=0)


@pytest.mark.parametrize("with_input", [False, True])
def test_torch_level_randn_is_drawn_per_call(with_input):
    inputs = [torch.zeros(4)] if with_input else []
    module = _torch_level_graph(with_input)
    compiled = inductor.compile_fx(module, inputs)
    assert compiled.report.fallback_ops.get("aten.randn") == 1
    _calls_differ_and_reseed(compiled, module, inputs)


@pytest.mark.parametrize("name", list(RANDOM_FUNCTIONS))
def test_random_ops_without_tensor_inputs_are_not_folded(name):
    function = RANDOM_FUNCTIONS[name]
    compiled = inductor.compile_fx(make_fx(function)(), [])
    _calls_differ_and_reseed(compiled, function)


def test_random_values_next_to_tensor_inputs():
    def function(x):
        return x * torch.rand(x.shape[0]) + torch.randn(4, 1)

    x = torch.ones(4)
    compiled = inductor.compile_fx(make_fx(function)(x), [x])
    _calls_differ_and_reseed(compiled, function, (x,))


@pytest.mark.torch_compile
def test_random_ops_through_torch_compile():
    compiled = torch.compile(lambda: torch.randn(4) + 1, backend=inductor.compile_fx)
    _calls_differ_and_reseed(compiled, lambda: torch.randn(4) + 1)


def test_random_ops_in_compile_aten():
    function = RANDOM_FUNCTIONS["randn"]
    compiled = inductor.compile_aten(make_fx(function)(), [])
    _calls_differ_and_reseed(compiled, function)


def test_triton_backend_draws_per_call_and_reproduces_per_seed(monkeypatch):
    """Philox in the generated kernel: fresh per call, same per seed (not eager's values)."""
    pytest.importorskip("triton")
    monkeypatch.setattr(inductor.config, "cpu_backend", "triton")
    for with_input in (False, True):
        inputs = [torch.zeros(4)] if with_input else []
        module = _torch_level_graph(with_input)
        compiled = inductor.compile_fx(module, inputs)
        assert "aten.randn" not in compiled.report.fallback_ops
        _calls_differ_and_reseed(compiled, module, inputs, exact=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_cuda_random_ops_are_drawn_per_call(mode):
    """The GPU path (Philox in Triton kernels; CUDA graphs replayed under reduce-overhead)."""
    def function(x):
        return x + torch.randn(4, device="cuda") + torch.rand_like(x)

    x = torch.zeros(4, device="cuda")
    compiled = inductor.compile_fx(make_fx(function)(x), [x], mode=mode)
    _calls_differ_and_reseed(compiled, function, (x,), exact=False)
    no_inputs = inductor.compile_fx(make_fx(lambda: torch.randn(4, device="cuda") * 2)(), [],
                                    mode=mode)
    _calls_differ_and_reseed(no_inputs, None, (), exact=False)
