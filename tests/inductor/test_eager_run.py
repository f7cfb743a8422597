"""Eager's own layouts from a run by eager's kernels (`inductor/eager_run.py`): outputs and the
bases their views view are laid out as eager's CPU kernels lay them out where torch's meta
kernels predict otherwise (graph fuzzer seeds 1181 and 6930), and the run is invisible: it
writes no input, consumes no random numbers, calls no custom operator."""
import pytest
import torch
import torch.nn.functional as F

import inductor
from inductor import config
from inductor.eager_run import eager_run, replayable


@pytest.fixture(autouse=True)
def _raise_on_errors():
    saved = config.snapshot()
    config.update(fallback_on_error=False)
    yield
    config.update(**saved)


def _compiled(function, inputs):
    gm = torch.fx.symbolic_trace(function)
    return gm, inductor.compile_fx(gm, inputs)


def _geometry(value):
    base = value._base
    return (tuple(value.shape), value.stride(), value.storage_offset(),
            None if base is None else (tuple(base.shape), base.stride()))


def _batch_norm_view(a0, mean, var):
    out = F.batch_norm(a0.clamp(-1e4, 1e4), mean, var, training=True, momentum=0.1)
    return out, out.expand_as(a0)


def _batch_norm_inputs():
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(8, 2, generator=generator).t(), torch.randn(8, generator=generator),
            torch.rand(8, generator=generator) + 0.5]


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_batch_norm_of_a_transposed_input_is_laid_out_as_eager(backend, monkeypatch):
    """Seed 1181: eager's CPU batch_norm returns a contiguous (2, 8) for a transposed input,
    its meta kernel keeps the (1, 2) strides; a view of it viewed a base laid out otherwise.
    The running statistics are written once per call, not again by the compile-time run."""
    if backend == "triton":
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    config.update(cpu_backend=backend)
    gm, compiled = _compiled(_batch_norm_view, _batch_norm_inputs())
    for _ in range(2):
        eager_inputs, compiled_inputs = _batch_norm_inputs(), _batch_norm_inputs()
        expected, actual = gm(*eager_inputs), compiled(*compiled_inputs)
        for want, got in zip(expected, actual):
            assert _geometry(got) == _geometry(want)
            torch.testing.assert_close(got, want)
        assert actual[1]._base is actual[0]
        for want, got in zip(eager_inputs, compiled_inputs):     # (N, C): eager's float
            torch.testing.assert_close(got, want)                # partial sums, an ulp apart


@pytest.mark.expect_fallback("unsupported", reason="writes into inputs sharing memory run as is")
def test_batch_norm_written_running_statistics_passed_twice():
    """The aliasing variant of seed 1181: one tensor as running mean and variance; the
    compile-time run writes a copy of it, never the caller's tensor."""
    gm, compiled = _compiled(_batch_norm_view, _batch_norm_inputs())

    def inputs():
        a0, stats, _ = _batch_norm_inputs()
        return [a0, stats, stats]
    eager_inputs, compiled_inputs = inputs(), inputs()
    gm(*eager_inputs)
    compiled(*compiled_inputs)
    torch.testing.assert_close(compiled_inputs[1], eager_inputs[1], rtol=0, atol=0)
    assert any(reason.startswith("unsupported: the graph writes into inputs that share")
               for reason in inductor.fallbacks())


def test_floor_divide_by_a_zero_dim_tensor_keeps_the_transposed_layout():
    """Seed 6930: `a // b` of a transposed (8, 7) by a 0-d-like (8, 1) broadcast keeps the
    input's layout in eager, where torch's reference for floor_divide is contiguous."""
    def f(a3, a4):
        v0 = a3 // (a4.abs() + 1)
        return v0.narrow(0, 5, 2), torch.floor_divide(a3, a4.sum() + 2)

    def inputs():
        generator = torch.Generator().manual_seed(1)
        return [torch.randint(-8, 8, (7, 8), generator=generator, dtype=torch.int8).t(),
                torch.randn(8, 1, generator=generator)]
    gm, compiled = _compiled(f, inputs())
    expected, actual = gm(*inputs()), compiled(*inputs())
    for want, got in zip(expected, actual):
        assert _geometry(got) == _geometry(want)
        torch.testing.assert_close(got, want)


def test_training_graph_takes_eager_layouts():
    """The training compile (`inductor/autograd/signature.py`) reads the same run: a
    batch_norm of a transposed input requiring grad, and its gradient."""
    def f(x, weight, bias):
        return F.batch_norm(x, None, None, weight, bias, training=True) * 2

    def inputs():
        generator = torch.Generator().manual_seed(2)
        return [torch.randn(8, 3, generator=generator).t().requires_grad_(),
                torch.randn(8, generator=generator).requires_grad_(),
                torch.randn(8, generator=generator).requires_grad_()]
    gm, compiled = _compiled(f, inputs())
    eager_inputs, compiled_inputs = inputs(), inputs()
    want, got = gm(*eager_inputs), compiled(*compiled_inputs)
    assert got.stride() == want.stride() == (8, 1)      # the meta kernel's: (1, 3)
    want.sum().backward()
    got.sum().backward()
    for a, b in zip(eager_inputs, compiled_inputs):
        torch.testing.assert_close(b.grad, a.grad)


def test_the_run_consumes_no_random_numbers():
    def f(x):
        return x + torch.rand(x.shape), torch.nn.functional.dropout(x, 0.5)
    x = torch.ones(4, 5)
    torch.manual_seed(7)
    expected = [f(x), f(x)]
    torch.manual_seed(7)
    gm = torch.fx.symbolic_trace(f)
    compiled = inductor.compile_fx(gm, [x])
    actual = [compiled(x), compiled(x)]
    for want, got in zip(expected, actual):
        for a, b in zip(want, got):
            torch.testing.assert_close(b, a)


def test_written_inputs_and_their_views_are_copied_with_their_version_counters():
    base = torch.zeros(6)
    view = base[2:]
    before = base._version

    def f(a, b, c):
        b.add_(1)
        return a * 2, c.t()
    c = torch.ones(2, 3)
    outputs, run_inputs, steps = eager_run(f, [base, view, c], {1})
    assert base._version == before and bool((base == 0).all())
    assert run_inputs[0] is not base and run_inputs[1]._base is run_inputs[0]
    assert run_inputs[2] is c
    assert steps == {0: 1, 1: 1, 2: 0}       # a view shares its base's counter, as in eager
    assert outputs[0].tolist() == [0, 0, 2, 2, 2, 2]


def test_custom_operators_are_not_run_at_compile_time():
    calls = []

    @torch.library.custom_op("framejit_test::noisy_double", mutates_args=())
    def noisy_double(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x * 2

    @noisy_double.register_fake
    def _(x):
        return torch.empty_like(x)

    def f(x):
        return torch.ops.framejit_test.noisy_double(x) + 1
    gm = torch.fx.symbolic_trace(f)
    assert not replayable(gm)
    assert replayable(torch.fx.symbolic_trace(_batch_norm_view))
    compiled = inductor.compile_fx(gm, [torch.ones(3)])
    assert calls == []
    torch.testing.assert_close(compiled(torch.ones(3)), torch.full((3,), 3.0))
    assert calls == [1]


def test_config_off_keeps_the_meta_layouts():
    config.update(eager_layout_run=False)
    gm, compiled = _compiled(_batch_norm_view, _batch_norm_inputs())
    assert compiled(*_batch_norm_inputs())[0].stride() == (1, 2)   # the meta kernel's
    assert gm(*_batch_norm_inputs())[0].stride() == (8, 1)



def test_devices_read_from_tensors_and_literal_accelerators():
    """`device=x.device` is a node in a traced graph (tests/triton's scatter test met it);
    a tensor made on an accelerator by name keeps the fake run (its random state)."""
    def from_tensor(x):
        return torch.zeros(x.shape, device=x.device).t() + x.t()

    graph = torch.fx.Graph()        # torch.rand(3, device="cuda") + x, not traced (no GPU)
    x = graph.placeholder("x")
    noise = graph.call_function(torch.rand, (3,), {"device": "cuda"})
    graph.output(graph.call_function(torch.add, (noise, x)))
    assert replayable(torch.fx.symbolic_trace(from_tensor))
    assert not replayable(torch.fx.GraphModule(torch.nn.Module(), graph))
    gm, compiled = _compiled(from_tensor, [torch.ones(2, 3)])
    want, got = gm(torch.ones(2, 3)), compiled(torch.ones(2, 3))
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want)


def test_the_run_stands_in_for_a_failing_fake_run(monkeypatch):
    """Graph seeds 13054, 14815, 14929 on torch 2.11: its fake `split` of a size-0 dimension
    raises, and without the fake run's outputs `a5.repeat([3, 3])` came back as a view of the
    decomposition's hidden (3, 3, 1, 8) buffer, where eager's is no view. The eager-kernel run
    gives the layouts all the same (the fake run made to fail here, on any torch)."""
    from inductor import decompose
    monkeypatch.setattr(decompose, "_run_on_fakes", lambda function, inputs: (None, None, {}))

    def f(a3, a5):
        first = a3.split(1, 1)[0]
        return a5.repeat([3, 3]), first
    inputs = [torch.ones(6, 0), torch.arange(8.0)]
    gm, compiled = _compiled(f, inputs)
    for want, got in zip(gm(*inputs), compiled(*inputs)):
        assert _geometry(got) == _geometry(want)
        torch.testing.assert_close(got, want)
