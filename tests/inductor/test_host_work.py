"""Host-side work of the generated wrapper: which library calls it makes (addmm kept whole
where its bias would not fuse), how it passes their tensor arguments (the tensor itself, a
`.t()` or `.view()` where those are the view), which result checks it skips, and that all of
it stays correct for transposed, sliced and storage-offset inputs, on both backends."""
import pytest
import torch
import torch.nn.functional as F

import inductor
from inductor.codegen.wrapper import raw_callable, view_kind
from inductor.ir.layout import Layout
from tests.inductor.conftest import check_same, compile_function

aten = torch.ops.aten


@pytest.fixture(params=["cpp", "triton"])
def backend(request):
    """Each test on the C++ backend and on Triton (interpreted on CPU)."""
    saved = inductor.config.snapshot()
    if request.param == "triton":
        pytest.importorskip("triton")
        inductor.config.cpu_backend = "triton"
    yield request.param
    inductor.config.update(**saved)


def wrapper_of(compiled) -> str:
    """The wrapper part of a compiled graph's source (kernels left out)."""
    return compiled.report.source.split("\n\ndef call(")[0].split(
        "def call_with_argument_list")[-1]


def _attention_inputs():
    torch.manual_seed(0)
    return (torch.randn(2, 8, 64), torch.randn(64, 64), torch.randn(64),
            torch.randn(2, 4, 8, 16), torch.randn(2, 4, 8, 16))


def linear_into_attention(x, weight, bias, key, value):
    query = F.linear(x, weight, bias).view(2, 8, 4, 16).transpose(1, 2)
    return F.scaled_dot_product_attention(query, key, value)


def test_linear_feeding_attention_is_one_addmm_without_a_bias_kernel(backend):
    compiled = check_same(linear_into_attention, *_attention_inputs(), atol=1e-4, rtol=1e-4)
    calls = compiled.report.library_calls
    assert calls.get("aten.addmm") == 1 and "aten.mm" not in calls
    assert compiled.kernel_count == 0, wrapper_of(compiled)
    assert "= linear(arg0.view(16, 64), arg1, arg2)" in wrapper_of(compiled)


def test_fused_projection_split_into_attention_is_one_addmm(backend):
    """GPT-2's layout: one projection for query, key and value, split, viewed per head."""
    def attention(x, weight, bias):
        query, key, value = torch.addmm(bias, x.view(16, 64), weight).split(64, dim=1)
        heads = [part.view(2, 8, 4, 16).transpose(1, 2) for part in (query, key, value)]
        return F.scaled_dot_product_attention(*heads, is_causal=True)
    torch.manual_seed(0)
    compiled = check_same(attention, torch.randn(2, 8, 64), torch.randn(64, 192),
                          torch.randn(192), atol=1e-4, rtol=1e-4)
    assert compiled.report.library_calls.get("aten.addmm") == 1
    assert "aten.mm" not in compiled.report.library_calls
    assert compiled.kernel_count == 0, wrapper_of(compiled)


def test_linear_feeding_gelu_still_fuses_the_bias(backend):
    def mlp(x, weight, bias):
        return F.gelu(F.linear(x, weight, bias))
    x, weight, bias = _attention_inputs()[:3]
    compiled = check_same(mlp, x, weight, bias, atol=1e-4, rtol=1e-4)
    assert compiled.report.library_calls == {"aten.mm": 1}
    assert compiled.kernel_count == 1     # bias add and GELU in one kernel


def test_linear_feeding_residual_layer_norm_keeps_the_split(backend):
    def block(x, weight, bias, scale, shift):
        return F.layer_norm(x + F.linear(x, weight, bias), (64,), scale, shift)
    x, weight, bias = _attention_inputs()[:3]
    compiled = check_same(block, x, weight, bias, torch.randn(64), torch.randn(64),
                          atol=1e-4, rtol=1e-4)
    assert compiled.report.library_calls == {"aten.mm": 1}


def test_linear_whose_product_is_returned_and_also_read_by_a_loop_is_one_addmm(backend):
    """The returned product must be in memory anyway: the library adds the bias (a split
    would write the product twice, unbiased and biased)."""
    def function(x, weight, bias):
        product = F.linear(x, weight, bias)
        return product, product.relu()
    compiled = check_same(function, *_attention_inputs()[:3], atol=1e-4, rtol=1e-4)
    assert compiled.report.library_calls == {"aten.addmm": 1}
    assert compiled.kernel_count == 1


def test_fused_projection_read_by_attention_and_copied_out_is_one_addmm(backend):
    """GPT-2 returning its keys and values: attention reads the biased projection through
    views and two kernels copy keys and values out; no kernel adds the bias."""
    def attention(x, weight, bias):
        query, key, value = torch.addmm(bias, x.view(16, 64), weight).split(64, dim=1)
        heads = [part.view(2, 8, 4, 16).transpose(1, 2) for part in (query, key, value)]
        return (F.scaled_dot_product_attention(*heads, is_causal=True),
                heads[1].contiguous(), heads[2].contiguous())
    torch.manual_seed(0)
    compiled = check_same(attention, torch.randn(2, 8, 64), torch.randn(64, 192),
                          torch.randn(192), atol=1e-4, rtol=1e-4)
    assert compiled.report.library_calls.get("aten.addmm") == 1
    assert "aten.mm" not in compiled.report.library_calls
    assert compiled.kernel_count <= 2, wrapper_of(compiled)


def test_linear_returned_as_is_is_one_addmm(backend):
    def function(x, weight, bias):
        return F.linear(x, weight, bias).view(2, 8, 4, 16)
    compiled = check_same(function, *_attention_inputs()[:3], atol=1e-4, rtol=1e-4)
    assert compiled.report.library_calls == {"aten.addmm": 1}
    assert compiled.kernel_count == 0


def test_arguments_equal_to_the_tensor_are_passed_unwrapped(backend):
    def function(x, weight):
        return torch.mm(x.unsqueeze(0).squeeze(0), weight.t().t()).relu()
    compiled = check_same(function, torch.randn(8, 16), torch.randn(16, 4))
    text = wrapper_of(compiled)
    assert "as_strided" not in text, text
    assert "(arg0, arg1)" in text, text


def test_transposed_and_reshaped_arguments_use_t_and_view(backend):
    def function(x, weight, other):
        return (x.view(16, 64).t() @ weight.view(16, 64)).relu(), other.t() @ other
    compiled = check_same(function, torch.randn(2, 8, 64), torch.randn(2, 8, 64),
                          torch.randn(16, 8), atol=1e-4, rtol=1e-4)
    text = wrapper_of(compiled)
    assert "arg1.view(16, 64)" in text and "(arg2.t(), arg2)" in text, text


def test_product_with_a_transposed_weight_is_a_linear_call(backend):
    def function(x, weight):
        return (x @ weight.t()).relu()
    compiled = check_same(function, torch.randn(16, 64), torch.randn(32, 64),
                          atol=1e-4, rtol=1e-4)
    text = wrapper_of(compiled)
    assert "= linear(arg0, arg1)" in text and "as_strided" not in text, text


def test_no_stride_check_after_matrix_products(backend):
    def function(x, weight, batch):
        return (x @ weight).relu(), torch.bmm(batch, batch).relu()
    compiled = check_same(function, torch.randn(8, 16), torch.randn(16, 4),
                          torch.randn(3, 5, 5))
    assert ".stride()" not in wrapper_of(compiled)


def _offset_input(rows, columns, offset=5):
    """A tensor that starts `offset` elements into its storage."""
    return torch.randn(offset + rows * columns)[offset:].view(rows, columns)


@pytest.mark.parametrize("case", ["transposed", "sliced", "offset", "offset-transposed",
                                  "offset-sliced-transposed"])
def test_library_arguments_from_transposed_sliced_and_offset_inputs(backend, case):
    torch.manual_seed(1)
    inputs = {
        "transposed": (torch.randn(16, 8).t(), torch.randn(4, 16).t(), torch.randn(4)),
        "sliced": (torch.randn(10, 20)[2:, 3:19], torch.randn(20, 6)[2:18, 1:5],
                   torch.randn(9)[2:6]),
        "offset": (_offset_input(8, 16), _offset_input(16, 4, 3), _offset_input(1, 4, 7)[0]),
        "offset-transposed": (_offset_input(16, 8).t(), _offset_input(4, 16, 11).t(),
                              torch.randn(4)),
        "offset-sliced-transposed": (_offset_input(20, 9)[2:18, 1:].t(),
                                     _offset_input(6, 17)[1:5, 1:].t(), torch.randn(4)),
    }[case]

    def function(x, weight, bias):
        product = torch.addmm(bias, x, weight)
        return product, torch.mm(x, weight).relu(), (x.t() @ x).sum(0)
    check_same(function, *inputs, atol=1e-4, rtol=1e-4)


def test_linear_into_attention_with_offset_inputs(backend):
    x, weight, bias, key, value = _attention_inputs()
    shifted = torch.randn(3 + x.numel())[3:].view(x.shape)
    shifted.copy_(x)
    key_view = torch.randn(2, 4, 8, 20)[..., 2:18]
    check_same(linear_into_attention, shifted, weight.t().contiguous().t(), bias, key_view,
               value, atol=1e-4, rtol=1e-4)


def test_views_of_an_eager_view_with_a_storage_offset(backend):
    """A fallback `slice` returns a view into its input's storage: views of it handed to
    library calls must start at its first element, not at the storage's."""
    saved = inductor.config.snapshot()
    inductor.config.fallback_ops = "aten.slice"
    try:
        def function(x, weight, batch_weight):
            sliced = (x * 2)[:, 3:]
            expanded = sliced.t().unsqueeze(0).expand(2, 4, 5)
            return sliced.t() @ weight, torch.bmm(expanded, batch_weight)
        compiled = check_same(function, torch.randn(5, 7), torch.randn(5, 3),
                              torch.randn(2, 5, 3))
    finally:
        inductor.config.update(**saved)
    assert compiled.fallback_ops == {"aten.slice": 1}


def test_view_kind():
    def layout(size, stride, offset=0):
        return Layout(torch.device("cpu"), torch.float32, size, stride, offset)
    base = layout([4, 6], [6, 1])
    assert view_kind(base, layout([4, 6], [6, 1])) == "same"
    assert view_kind(layout([1, 6], [6, 1]), layout([1, 6], [99, 1])) == "same"
    assert view_kind(base, layout([6, 4], [1, 6])) == "transpose"
    assert view_kind(base, layout([2, 12], [12, 1])) == "reshape"
    assert view_kind(base, layout([4, 6], [6, 1], 1)) is None
    assert view_kind(base, layout([4, 3], [6, 1])) is None
    assert view_kind(layout([4, 6], [1, 4]), layout([24], [1])) is None


def test_raw_callable_calls_the_same_kernel():
    x = torch.randn(3, 4)
    assert raw_callable(aten.mm.default) is torch.mm
    assert raw_callable(aten.addmm.default, {"beta": 0.5}) is torch.addmm
    assert raw_callable(aten.addmm.default, {"out": None}) is not torch.addmm
    raw = raw_callable(aten.relu.default)
    assert raw is not aten.relu.default or not hasattr(aten.relu.default, "_op")
    torch.testing.assert_close(raw(x), x.relu())
    assert raw_callable(torch.relu) is torch.relu
    convolution = raw_callable(aten.convolution.default)
    assert convolution is torch.convolution
    image, weight = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    arguments = (image, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    torch.testing.assert_close(convolution(*arguments), aten.convolution.default(*arguments))


def test_scaled_addmm_through_the_library(backend):
    def function(bias, x, weight):
        return torch.addmm(bias, x, weight, beta=0.5, alpha=2.0).relu()
    compiled = check_same(function, torch.randn(4), torch.randn(8, 16), torch.randn(16, 4),
                          atol=1e-4, rtol=1e-4)
    assert "beta=0.5" in wrapper_of(compiled)


def test_buffers_are_allocated_on_the_graph_device_under_a_device_context():
    """A CPU graph called inside `with torch.device("meta")` (or "cuda") still allocates its
    buffers on the CPU: torch's factory functions follow the context unless told."""
    def function(x):
        return (x * 2).sum(0) + x.relu().amax(0)

    x = torch.randn(8, 16)
    compiled = compile_function(function, x)
    expected = function(x)
    with torch.device("meta"):
        result = compiled(x)
    result = result[0] if isinstance(result, (list, tuple)) else result
    assert result.device.type == "cpu"
    torch.testing.assert_close(result, expected)


def test_cpu_products_write_into_dead_buffers(backend):
    """A product allocates no fresh memory where a dead buffer of its size is at hand: it
    writes there through `out=`, and its own result is handed on once dead."""
    def chain(x, first, second, third):
        hidden = torch.relu(torch.relu(x) @ first) @ second
        return torch.relu(hidden) @ third

    torch.manual_seed(0)
    inputs = [torch.randn(32, 32) for _ in range(4)]
    compiled = check_same(chain, *inputs, atol=1e-4, rtol=1e-4)
    wrapper = wrapper_of(compiled)
    assert ", out=" in wrapper, wrapper
    compiled(*inputs)           # a second call through the same reused memory
    torch.testing.assert_close(compiled(*inputs), chain(*inputs), atol=1e-4, rtol=1e-4)
