"""compile_fx on torch-level graphs: results, input mutation, output aliasing and strides,
global state, training delegation, and use as a `torch.compile` backend."""
import pytest
import torch
import torch.fx

import inductor
from tests.inductor.conftest import check_same, compile_function


def test_results_match_eager():
    check_same(lambda x, y: torch.relu(x @ y).sum(-1), torch.randn(4, 5), torch.randn(5, 3))


def test_input_mutation_is_copied_back():
    def step(x, counter):
        counter.add_(1)
        return x * counter

    counter = torch.zeros(3)
    compiled = compile_function(step, torch.ones(3), counter)
    compiled(torch.ones(3), counter)
    compiled(torch.ones(3), counter)
    assert counter.tolist() == [2.0, 2.0, 2.0]


def test_batch_norm_running_statistics_update_in_place():
    def function(x, mean, var, weight, bias):
        return torch.nn.functional.batch_norm(x, mean, var, weight, bias, training=True)

    inputs = (torch.randn(8, 4) * 3 + 1, torch.zeros(4), torch.ones(4), torch.rand(4),
              torch.randn(4))
    with torch.no_grad():
        check_same(function, *inputs)


def test_returned_input_is_the_same_object_and_views_alias():
    def function(x):
        return x, x.t(), x + 1

    x = torch.randn(3, 4)
    expected_fresh = x + 1
    same, view, fresh = compile_function(function, x)(x)
    assert same is x
    assert view.stride() == (1, 4) and view.data_ptr() == x.data_ptr()
    view[0, 0] = 100.0
    assert x[0, 0] == 100.0
    torch.testing.assert_close(fresh, expected_fresh)


def test_output_strides_follow_eager():
    def function(x):
        return x.permute(1, 0).contiguous(), torch.clone(x.permute(1, 0)) * 2

    x = torch.randn(3, 5)
    expected = function(x)
    for actual, wanted in zip(compile_function(function, x)(x), expected):
        torch.testing.assert_close(actual, wanted)
        assert actual.stride() == wanted.stride()


def test_grad_mode_set_inside_the_graph_is_replayed():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.call_function(torch._C._set_grad_enabled, (False,))
    doubled = graph.call_function(torch.mul, (x, 2))
    graph.output((doubled,))
    compiled = inductor.compile_fx(torch.fx.GraphModule({}, graph), [torch.ones(2)])
    with torch.enable_grad():
        (result,) = compiled(torch.ones(2))
        assert not torch.is_grad_enabled()
        torch._C._set_grad_enabled(True)
    assert result.tolist() == [2.0, 2.0]


def test_training_graph_keeps_gradients():
    linear = torch.nn.Linear(3, 2)
    graph = torch.fx.symbolic_trace(linear)
    x = torch.randn(4, 3, requires_grad=True)
    compiled = inductor.compile_fx(graph, [x])
    compiled(x).sum().backward()
    assert x.grad is not None and linear.weight.grad is not None


@pytest.mark.torch_compile
def test_works_as_a_torch_compile_backend():
    def function(x, y):
        return torch.softmax(x * y + 1, dim=-1)

    x, y = torch.randn(4, 8), torch.randn(8)
    compiled = torch.compile(function, backend=inductor.compile_fx, dynamic=False)
    torch.testing.assert_close(compiled(x, y), function(x, y))


def test_report_lists_fallbacks_and_kernels():
    # (i0 has no lowering; cumsum, the example until scans were lowered, has one)
    compiled = compile_function(lambda x: torch.i0(x) + 1, torch.randn(5))
    report = compiled.report
    assert "aten.i0" in report.fallback_ops
    assert compiled.kernel_count == report.kernel_count
    assert "aten.i0" in report.summary()


def test_in_place_update_waits_for_readers_of_the_old_value():
    """`x.add_(y); return x * 1`: the output is lowered after the update, yet reads `x`."""
    def function(x, y):
        x.add_(y)
        return x * 1, y - x
    check_same(function, torch.randn(3, 4), torch.randn(3, 4))


def test_complex_tensors_run_through_eager_kernels_between_kernels():
    def function(x):
        spectrum = torch.view_as_complex(x.reshape(4, 2)) * 2
        return torch.view_as_real(spectrum).sum() + x.exp().sum()
    compiled = check_same(function, torch.randn(8))
    assert compiled.fallback_ops and compiled.kernel_count >= 1


def test_an_output_returned_twice_is_two_tensor_objects():
    def function(x):
        y = x * 2
        return y, y.detach()
    first, second = compile_function(function, torch.randn(3))(torch.randn(3))
    assert first is not second and first.data_ptr() == second.data_ptr()


def test_compile_aten_reads_tensor_attributes_in_place():
    """Graphs from the training engineer keep constants as `get_attr`."""
    module = torch.nn.Module()
    module.table = torch.arange(6.0).reshape(2, 3)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    table = graph.get_attr("table")
    graph.output((graph.call_function(torch.ops.aten.add.Tensor, (x, table)),))
    compiled = inductor.compile_aten(torch.fx.GraphModule(module, graph), [torch.ones(2, 3)])
    torch.testing.assert_close(compiled(torch.ones(2, 3))[0], module.table + 1)
    module.table.mul_(2)  # a reference, not a copy
    torch.testing.assert_close(compiled(torch.ones(2, 3))[0], module.table + 1)


def test_negated_view_output_keeps_its_sign():
    """`z.conj().imag` is a view with the negative bit: rebuilt by as_strided it would lose
    the sign, so it is computed instead."""
    def function(x):
        z = torch.complex(x, x * 2)
        return torch.view_as_real(z), z.conj().imag
    check_same(function, torch.randn(4))


def test_memory_of_a_buffer_viewed_by_an_eager_op_is_not_reused():
    """With `as_strided` forced through its eager kernel, the kernel returns a view of its
    input, which must survive the input's last use (its memory is not handed on)."""
    def function(x):
        windows = (x * 2).unfold(0, 4, 2)
        fresh = (x + 100).exp()
        return windows.sum(-1) + fresh[:31], fresh
    saved = inductor.config.snapshot()
    inductor.config.fallback_ops = "aten.as_strided"
    try:
        compiled = check_same(function, torch.randn(64))
    finally:
        inductor.config.update(**saved)
    assert "aten.as_strided" in compiled.fallback_ops


@pytest.mark.expect_fallback("unsupported", reason="a write into one of two inputs sharing "
                            "a storage runs as is")
def test_writing_into_one_of_two_aliased_inputs_runs_as_is():
    def function(x, row):
        x.add_(1)
        return row * 2
    base = torch.zeros(3, 4)
    compiled = compile_function(function, base, base[0])
    result = compiled(base, base[0])
    torch.testing.assert_close(result, torch.full((4,), 2.0))
    assert "share memory" in compiled.report.reason


def test_small_integer_powers_multiply_exactly_as_eager():
    """x**3 and x**-2 are products, as in eager's CPU kernel (a pow call cost GPT-2's GELU
    5x), with eager's exact values in float32, float64 and float16."""
    for dtype in (torch.float32, torch.float64, torch.float16):
        x = torch.randn(1000, dtype=dtype) * 3
        x[:4] = torch.tensor([0.0, -0.0, float("inf"), float("-inf")], dtype=dtype)
        for exponent in (3, -2, 3.0):
            compiled = compile_function(lambda value: value ** exponent, x)
            assert "pow" not in compiled.report.source
            torch.testing.assert_close(compiled(x), x ** exponent, rtol=0, atol=0,
                                       equal_nan=True)


def test_aliased_inputs_compile_when_writes_go_elsewhere():
    """T5's graph (input ids and a slice of them as decoder ids) updates an intermediate in
    place: only a write into one of the aliased inputs makes the graph run as is."""
    def into_intermediate(x, row):
        y = x * 2
        y.add_(row)
        return y

    def into_unaliased_input(x, row, other):
        other.mul_(3)
        return x.sum(0) + row + other

    base = torch.arange(12.0).reshape(3, 4)
    compiled = check_same(into_intermediate, base, base[0])
    assert compiled.report.reason is None and compiled.kernel_count >= 1
    compiled = check_same(into_unaliased_input, base, base[0], torch.ones(4))
    assert compiled.report.reason is None and compiled.kernel_count >= 1


def test_library_call_layout_follows_the_inputs_it_is_given():
    """CPU attention returns a layout that follows its inputs': the lowering asks the fake
    kernel with the strides the inputs really have (views of a product here; the traced
    `permute_copy` recorded contiguous ones), so the result is not copied after every call to
    the layout recorded when the graph was traced (T5: one copy per attention)."""
    weights = [torch.randn(32, 32) for _ in range(3)]

    def function(x):
        x = x * 1
        x.add_(1)       # an in-place op: the graph is functionalized, views become *_copy ops
        q, k, v = [(x @ weight).view(1, 16, 4, 8).transpose(1, 2) for weight in weights]
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return out.transpose(1, 2).reshape(16, 32) * 2

    x = torch.randn(16, 32)
    compiled = check_same(function, x, atol=1e-5, rtol=1e-5)
    with torch.profiler.profile() as profile:
        compiled(x)
    copies = [event for event in profile.key_averages() if event.key == "aten::copy_"]
    assert not copies, "a library call's result was copied to another layout"


def test_an_output_viewing_a_library_result_is_not_copied():
    """Logits: the vocabulary product reshaped to (batch, tokens, vocabulary) comes back as a
    view of the product's result, as in eager (llama copied 131 MB per call)."""
    weight = torch.randn(16, 64)

    def function(x):
        return (x @ weight).reshape(2, 3, 64), (x @ weight).t()

    compiled = check_same(function, torch.randn(6, 16), atol=1e-5, rtol=1e-5)
    assert compiled.kernel_count == 0
    first, second = compiled(torch.randn(6, 16))
    assert first.stride() == (192, 64, 1) and second.stride() == (1, 64)


def test_concatenations_of_many_inputs_are_eager_copies():
    """A cat of up to four inputs is inlined into its readers; beyond that (DenseNet's dense
    blocks concatenate up to 25 feature maps) the copy runs as eager's cat, since inline every
    element would test its position against every input."""
    def few(a, b):
        return torch.relu(torch.cat([a, b * 2], 1))

    def many(a, b, c, d, e, f):
        return torch.relu(torch.cat([a * 2, b, c, d, e, f], 1))

    inputs = [torch.randn(2, 3, 4) for _ in range(6)]
    assert "aten.cat" not in check_same(few, *inputs[:2]).fallback_ops
    assert "aten.cat" in check_same(many, *inputs).fallback_ops


def test_reshaped_and_transposed_inputs_reach_library_calls_as_views():
    """`x.view(32, 128).t() @ w` passes the input's memory to the matrix product as a strided
    view: the reshape's divisions and remainders fold back into a linear index (a training
    backward copied GPT-2's logits gradient this way, 17 ms a step)."""
    def product(x, w):
        return torch.mm(x.view(32, 128).t(), w)

    compiled = check_same(product, torch.randn(2, 16, 128), torch.randn(32, 8))
    assert compiled.kernel_count == 0


def test_training_graphs_are_compiled_in_the_requested_mode(monkeypatch):
    """A graph that computes gradients goes to inductor.autograd; its forward and backward
    are compiled with the mode asked for (max-autotune's kernel tuning), not the default."""
    import inductor.pipeline as pipeline

    modes = []
    original = pipeline.compile_aten

    def recording(gm, example_inputs, output_strides=None, *, mode=None):
        modes.append(mode)
        return original(gm, example_inputs, output_strides, mode=mode)

    monkeypatch.setattr(pipeline, "compile_aten", recording)
    weight = torch.randn(4, 3, requires_grad=True)
    gm = torch.fx.symbolic_trace(lambda x, w: torch.tanh(x @ w).sum())
    compiled = inductor.compile_fx(gm, [torch.randn(2, 4), weight], mode="max-autotune")
    compiled(torch.randn(2, 4), weight).backward()
    assert modes == ["max-autotune", "max-autotune"]   # forward, then backward on first use
    assert weight.grad is not None and weight.grad.shape == (4, 3)
