"""One compile over symbolic sizes on the C++ backend (issue 23): the zoo's dynamic-batch
graph kinds compile once, with kernels taking sizes as `int64_t` arguments, and match eager at
every size (0, 1, primes, below and above the vector widths, large). A graph kind the symbolic
path does not cover is compiled per size with the reason visible (`NotSymbolic`)."""
import copy

import pytest
import torch
import torch.nn.functional as F

import inductor
from inductor.runtime import fallbacks
from tests.inductor.symbolic_graphs import shape_env_of, symbolic_graph
from tests.inductor.test_dynamic_sizes import assert_same, in_float64

SIZES = (5, 0, 1, 2, 3, 7, 16, 31, 97, 1000)


def compile_once(function, make_inputs, dynamic, sizes=SIZES, exact=False):
    """Compile once at `sizes[0]`; every size must match eager, with no static variant and
    no fallback of any kind (with `exact`, as close to the float64 answer as eager is:
    reductions). Returns the compiled graph."""
    first = make_inputs(sizes[0])
    before = fallbacks.fallbacks()
    gm = symbolic_graph(function, first, dynamic)
    guards = list(shape_env_of(gm).guards)
    compiled = inductor.compile_fx(gm, copy.deepcopy(first))
    assert list(shape_env_of(gm).guards) == guards     # the compile assumed nothing more
    for size in sizes:
        inputs = make_inputs(size)
        assert_same(compiled(*copy.deepcopy(inputs)), function(*copy.deepcopy(inputs)),
                    size > 1, exact=in_float64(function, inputs) if exact else None)
    assert compiled.report.size_reason is None, compiled.report.size_reason
    assert compiled.report.size_variants == 0
    assert fallbacks.since(before) == {}
    return compiled


def test_kernels_take_sizes_as_arguments():
    def function(x, y):
        return torch.relu(x * 2 + y), (x - 1).to(torch.float64)
    compiled = compile_once(function, lambda n: [torch.randn(n, 5), torch.randn(5)],
                            [[0], []])
    source = compiled.report.source
    # bound by one native call (`s0, = bind_sizes(binder, arg0)`) or a Python read
    symbol = next(line.split(" = ")[0].strip(" ,") for line in source.splitlines()
                  if ".shape[0]" in line or "bind_sizes(" in line)
    assert f"const int64_t {symbol})" in source          # the kernel's parameter
    assert f"< {symbol};" in source                      # a loop over it
    assert f"empty_strided(({symbol}, 5), (5, 1)" in source


def test_a_static_graph_takes_no_size_argument():
    def function(x):
        return x.sum(-1) * 2
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [torch.randn(7, 9)])
    assert "int64_t s" not in compiled.report.source
    assert ".shape[" not in compiled.report.source
    assert "bind_sizes(" not in compiled.report.source


def test_reductions_with_tails_below_and_above_the_vector_width():
    def function(x):
        return x.sum(0), x.amax(1), x.mean(), (x * x).sum(-1, keepdim=True), x.argmax(1)
    compile_once(function, lambda n: [torch.randn(n, n + 3)], [[0, 1]],
                 sizes=(9, 0, 1, 2, 3, 7, 8, 15, 16, 17, 33, 64, 97, 300), exact=True)


def test_softmax_layer_norm_and_linear():
    def function(x, weight, bias, gamma, beta):
        hidden = torch.softmax(F.linear(x, weight, bias), -1)
        return F.layer_norm(hidden, (12,), gamma, beta), hidden.var(-1)
    compile_once(function, lambda n: [torch.randn(n, 12), torch.randn(12, 12), torch.randn(12),
                                      torch.randn(12), torch.randn(12)], [[0], [], [], [], []])


def test_views_permutes_slices_and_expand():
    def function(x):
        rows = x.size(0)
        return (x.reshape(rows * 2, -1).t() * 2, x.view(rows, 3, 2).permute(2, 0, 1) + 1,
                x[1:, :3] * 3, x[:, None, :].expand(rows, 4, 6).sum(1), x.t().contiguous())
    compile_once(function, lambda n: [torch.randn(n, 6)], [[0]], sizes=(5, 2, 3, 7, 97))


def test_arange_of_a_size_and_broadcasting():
    def function(x, y):
        return x + torch.arange(x.size(0), dtype=x.dtype)[:, None] * y, x * x.size(0)
    compile_once(function, lambda n: [torch.randn(n, 6), torch.randn(1, 6)], [[0], []])


def test_arange_between_sizes_and_cat_along_a_symbolic_axis():
    """A decoder's position ids (`arange(past, past + new)`) and its growing KV cache (`cat`
    along the sequence axis): the range's ends and the cat's boundaries are size
    expressions read at run time."""
    def function(cache, new, x):
        past = cache.size(1)
        positions = torch.arange(past, past + new.size(1))
        ramp = torch.arange(past, past + x.size(1), dtype=x.dtype)
        return torch.cat([cache, new], 1) * 2, positions, x + ramp, \
            torch.cat([new, cache, new], 1).sum(1)
    compile_once(function, lambda n: [torch.randn(2, n, 4), torch.randn(2, 1, 4),
                                      torch.randn(3, 5)], [[1], [], []],
                 sizes=(5, 1, 2, 3, 7, 16, 97))   # an empty cache has other strides


def test_library_calls_with_symbolic_shapes():
    def function(x, weight, bias):
        hidden = torch.addmm(bias, x, weight).relu()
        return hidden @ weight.t(), torch.bmm(x[None], weight[None].expand(1, 8, 8))
    compile_once(function, lambda n: [torch.randn(n, 8), torch.randn(8, 8), torch.randn(8)],
                 [[0], [], []], sizes=(5, 0, 1, 2, 7, 33))


def test_convolution_pooling_and_attention_over_a_symbolic_batch():
    def function(x, weight, q):
        features = F.conv2d(x, weight, padding=1).relu()
        pooled = F.max_pool2d(features, 2) + F.avg_pool2d(features, 3, 1, 1)[:, :, ::2, ::2]
        return pooled.mean((2, 3)), F.scaled_dot_product_attention(q, q, q)
    compile_once(function, lambda n: [torch.randn(n, 3, 6, 6), torch.randn(4, 3, 3, 3),
                                      torch.randn(n, 2, 5, 8)], [[0], [], [0]],
                 sizes=(4, 1, 2, 7))


@pytest.mark.expect_fallback("per_size", reason="a graph the symbolic path refuses")
def test_a_refused_graph_is_compiled_per_size_with_its_reason():
    def function(x):
        return x.diagonal() * 2      # as long as Min(s0, s1): NotSymbolic
    before = fallbacks.fallbacks()
    x = torch.randn(4, 4)
    compiled = inductor.compile_fx(symbolic_graph(function, [x], [[0, 1]]), [x])
    for size in (4, 9, 4):
        y = torch.randn(size, size)
        mine, theirs = y.clone(), y.clone()
        assert_same(compiled(mine), function(theirs))
        assert torch.equal(mine, theirs)
    assert compiled.report.size_variants == 2
    assert "a diagonal of length Min(" in compiled.report.size_reason
    assert any(reason.startswith("per_size") and "a diagonal of length" in reason
               for reason in fallbacks.since(before))


def test_an_output_viewing_its_input_compiles_once():
    """The graph the test above used before outputs aliasing inputs compiled once: eager's
    view of the input, its strides and offset, at every size (more in
    test_symbolic_aliasing.py)."""
    def function(x):
        return x.sum(0), x[:, 1]
    compiled = compile_once(function, lambda n: [torch.randn(n, 3)], [[0]], sizes=(4, 2, 9))
    x = torch.randn(6, 3)
    view = compiled(x)[1]
    assert view._base is x and view.stride() == (3,) and view.storage_offset() == 1


def test_indexing_a_symbolic_table_checks_bounds_with_its_size():
    def function(x, index):
        return x[index] * 2, torch.embedding(x, index[None])
    compiled = compile_once(function, lambda n: [torch.randn(n, 4), torch.tensor([0, 1, 1])],
                            [[0], []], sizes=(5, 2, 3, 7, 97))
    with pytest.raises(IndexError):
        compiled(torch.randn(1, 4), torch.tensor([0, 1, 1]))    # row 1 of a 1-row table


def test_padding_by_size_expressions():
    """Pads by amounts computed from sizes (attention masks padded to a multiple of 8 on
    CUDA, H2's decode finding) and by constants along a symbolic axis: masked positions,
    one compile (sizes that are multiples of 8 pad nothing)."""
    from torch._dispatch.python import enable_python_dispatcher

    def function(x, mask):
        columns = x.size(1)
        return F.pad(mask, (0, (8 - columns % 8) % 8), value=-1.0) * 2, F.pad(x, (1, 2)) + 1
    with enable_python_dispatcher():     # as the front end's fake runs (F.pad of SymInts)
        compile_once(function, lambda n: [torch.randn(3, n), torch.randn(3, n)], [[1], [1]],
                     sizes=(5, 2, 3, 8, 9, 16, 97))


def test_padding_a_mask_by_a_negated_size_modulo_8():
    """The decode model's mask padding, `F.pad(bias, (0, (-total) % 8))[..., :total]`, and
    the same pad kept whole: one compile, right for sizes that are and are not multiples of
    8. `(-total) % 8` printed as C's `%` padded by -5 instead of 3 at 13 (wrong logits in
    tests/dynamic/test_decode_cache.py; tests/inductor/test_size_expression_signs.py)."""
    from torch._dispatch.python import enable_python_dispatcher

    def function(x, mask):
        n = x.size(1)
        padded = F.pad(mask, (0, (-n) % 8), value=-1.0)
        return padded[..., :n] * 2, padded + 1
    with enable_python_dispatcher():     # as the front end's fake runs (F.pad of SymInts)
        compile_once(function, lambda n: [torch.randn(3, n), torch.randn(3, n)], [[1], [1]],
                     sizes=(5, 2, 3, 8, 9, 12, 13, 16, 97))


def test_an_output_viewing_a_padded_output():
    """The padded mask returned with its slice (a view of another output, rebuilt per call
    from size expressions): the view's stride `n + (-n) % 8` reached the printer as torch's
    `PythonMod` ("cannot print index", program fuzzer seed 97023)."""
    from torch._dispatch.python import enable_python_dispatcher

    def function(x, mask):
        padded = F.pad(mask * 2, (0, (-x.size(1)) % 8), value=-1.0)
        return padded, padded[..., :x.size(1)]
    with enable_python_dispatcher():
        compiled = compile_once(function, lambda n: [torch.randn(3, n), torch.randn(3, n)],
                                [[1], [1]], sizes=(5, 2, 3, 8, 9, 13, 16, 97))
    padded, view = compiled(torch.randn(3, 13), torch.randn(3, 13))
    assert view._base is padded and view.stride() == (16, 1)


def test_torch_metadata_step_adds_no_guard():
    """make_fx records each node's memory format by asking whether its strides are the
    contiguous ones (`s0 - 1 != 1` for `x[1:]`, `(s0 + 1) // 2 == 1` for an arange of step
    2): with backed sizes every answer was a guard the front end never saw and the graph
    went per size. Those answers are no longer asked (nothing reads them)."""
    def function(x, y):
        ramp = torch.arange(0, x.size(0), 2, dtype=x.dtype)
        return (x * 2)[1:], x[1:] + y[:-1], ramp * 3, torch.arange(1, y.size(0) + 1, 3)
    compile_once(function, lambda n: [torch.randn(n, 3), torch.randn(n, 3)], [[0], [0]],
                 sizes=(5, 2, 3, 4, 7, 16, 97))
