"""Graphs with symbolic sizes (issue 23) through `inductor.compile_fx`: one compile serves
every size, each call's answer is eager's (values, dtypes, strides, written inputs).

Graphs are made as the dynamic-shapes contract says dynamo hands them over: placeholders'
`meta["example_value"]` fake tensors from one ShapeEnv, sizes read inside the graph as
`size` nodes whose example values are SymInts (`tests/inductor/symbolic_graphs.py`). Also
torch.compile's graphs (SymInt placeholders) and make_fx's symbolic graphs (`meta["val"]`).
The C++ backend compiles such a graph once over the ShapeEnv's symbols (`SYMBOLIC`: no
static variant, no `per_size` fallback); what the symbolic path does not cover raises
`NotSymbolic` and is compiled as a static variant per size (`inductor/size_variants.py`),
counted as "per_size" fallbacks with the reason."""
import copy

import pytest
import torch
import torch.fx

import inductor
from inductor import pipeline
from inductor.runtime import fallbacks
from inductor.size_variants import NotSymbolic
from tests.inductor.symbolic_graphs import symbolic_graph

PER_SIZE = pytest.mark.expect_fallback("per_size", reason="symbolic sizes: a static variant "
                                       "per size where the symbolic path refuses the graph")
# sizes for every symbolic compile: 0, 1, primes, below and above the vector widths, large
SIZES = (5, 0, 1, 2, 3, 7, 13, 16, 97, 1000)


@pytest.fixture
def per_size_only(monkeypatch):
    """The symbolic path refuses every graph (as for a graph it does not cover)."""
    def refuse(*_arguments, **_keywords):
        raise NotSymbolic("refused by the test")
    monkeypatch.setattr(pipeline, "_compile_symbolic", refuse)
    monkeypatch.setattr(pipeline, "_compile_symbolic_aten", refuse)


def assert_same(actual, expected, every_stride=True, exact=None):
    """Values, dtypes, shapes, strides (of tensors of more than one element) and
    requires_grad equal; without `every_stride`, strides of dims of extent 1 are not
    compared (sizes 0 and 1, which the front end specialises: the 0/1 rule, where eager's
    TensorIterator may give such a dim another stride than the traced layout).

    With `exact` (the program run in float64, `in_float64`), floating values are judged
    by their distance to it: a reduction summed in another order than eager's may differ
    from eager by more than float32's default tolerance (a 300-row sum of randn: 1e-5) and
    be as right; it must be within float32's default tolerance of the exact answer, give or
    take a few times eager's own error."""
    if exact is None:
        torch.testing.assert_close(actual, expected, equal_nan=True)
    else:
        _assert_as_close_to_exact(actual, expected, exact)
    for got, wanted in zip(torch.utils._pytree.tree_leaves(actual),
                           torch.utils._pytree.tree_leaves(expected)):
        if isinstance(wanted, torch.Tensor):
            assert got.dtype == wanted.dtype
            assert got.shape == wanted.shape
            if wanted.numel() > 1:
                dims = [dim for dim in range(wanted.dim())
                        if every_stride or wanted.shape[dim] > 1]
                assert [got.stride(dim) for dim in dims] == \
                    [wanted.stride(dim) for dim in dims], (got.stride(), wanted.stride())
            assert got.requires_grad == wanted.requires_grad


def in_float64(function, inputs):
    """`function` on float64 copies of the floating inputs: the reference `exact` of
    `assert_same`."""
    return function(*[value.double() if isinstance(value, torch.Tensor)
                      and value.is_floating_point() else value
                      for value in copy.deepcopy(inputs)])


def _assert_as_close_to_exact(actual, expected, exact):
    leaves = [torch.utils._pytree.tree_leaves(tree) for tree in (actual, expected, exact)]
    assert len(leaves[0]) == len(leaves[1]) == len(leaves[2])
    for got, wanted, truth in zip(*leaves):
        if not (isinstance(wanted, torch.Tensor) and wanted.is_floating_point()):
            torch.testing.assert_close(got, wanted, equal_nan=True)
            continue
        assert got.shape == wanted.shape and got.dtype == wanted.dtype
        got, wanted, truth = (value.detach().double() for value in (got, wanted, truth))
        assert torch.equal(got.isnan(), wanted.isnan()), "nan where eager has none, or none"
        finite = wanted.isfinite()
        torch.testing.assert_close(got[~finite], wanted[~finite], rtol=0, atol=0,
                                   equal_nan=True, msg="infinities differ from eager's")
        if not finite.any():
            continue
        ours = (got - truth)[finite].abs()
        eagers = (wanted - truth)[finite].abs()
        floor = 1e-5 + 1.3e-6 * truth[finite].abs().max()  # assert_close's float32 default
        assert ours.max() <= 4 * eagers.max() + floor, (ours.max(), eagers.max())
        assert ours.pow(2).mean().sqrt() <= 2 * eagers.pow(2).mean().sqrt() + floor


def _per_size_count(before) -> int:
    return sum(count for reason, count in fallbacks.since(before).items()
               if reason.startswith("per_size"))


def check_sizes(function, make_inputs, dynamic, sizes=SIZES, symbolic=True):
    """Compile `function` once (symbolic in `dynamic`, example inputs of the first size) and
    compare it with eager for every size; `symbolic`: one compile serves them all (no
    static variant, no per-size fallback), else one static variant per size. Returns the
    compiled graph."""
    first = make_inputs(sizes[0])
    before = fallbacks.fallbacks()
    compiled = inductor.compile_fx(symbolic_graph(function, first, dynamic),
                                   copy.deepcopy(first))
    for size in sizes:
        inputs = make_inputs(size)
        eager_inputs, compiled_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
        assert_same(compiled(*compiled_inputs), function(*eager_inputs), size > 1)
        torch.testing.assert_close(compiled_inputs, eager_inputs, equal_nan=True)
    if symbolic:
        assert compiled.report.size_reason is None, compiled.report.size_reason
        assert compiled.report.size_variants == 0
        assert _per_size_count(before) == 0
    else:
        assert compiled.report.size_variants == len(set(sizes))
        assert _per_size_count(before) == len(set(sizes))
    assert compiled.report.kernel_count >= 1
    return compiled


@PER_SIZE
def test_a_later_size_gets_its_own_answer():
    """Before issue 23's work, the graph was traced with the first call's sizes and a (9, 3)
    input came back summed as a (5, 3) one (5 rows)."""
    def function(x):
        return (x * 2).sum(1) + x.size(0)
    x = torch.randn(5, 3)
    compiled = inductor.compile_fx(symbolic_graph(function, [x], [[0]]), [x])
    y = torch.randn(9, 3)
    assert_same(compiled(y), function(y))
    assert_same(compiled(x), function(x))


@PER_SIZE
def test_pointwise_and_broadcast_many_sizes():
    def function(x, y):
        return torch.relu(x * 2 + y), (x - 1).to(torch.float64)
    check_sizes(function, lambda n: [torch.randn(n, 5), torch.randn(5)], [[0], []])


@PER_SIZE
def test_reductions_rows_not_a_multiple_of_the_vector_width():
    def function(x):
        return x.sum(0), x.amax(1), x.mean(), (x * x).sum(-1, keepdim=True)
    check_sizes(function, lambda n: [torch.randn(n, n + 3)], [[0, 1]],
                sizes=(5, 0, 1, 2, 7, 16, 97))


@PER_SIZE
def test_views_and_reshapes_with_computed_sizes():
    def function(x):
        batch, length = x.size(0), x.size(1)
        halves = x.reshape(batch, length // 2, 2).sum(-1)
        return halves.view(batch * (length // 2)), x.view(-1, 2).t() * 3
    # the decomposition of `view(-1, 2)` guards `s0 == (s0//2)*(s0//(s0//2))`, which the
    # front end never saw: NotSymbolic, a static variant per size
    check_sizes(function, lambda n: [torch.randn(3, 2 * n)], [[1]], sizes=(2, 8, 13, 50),
                symbolic=False)


@PER_SIZE
def test_arange_of_a_size():
    def function(x):
        return torch.arange(x.size(0), dtype=x.dtype) * x[:, 0]
    check_sizes(function, lambda n: [torch.randn(n, 4)], [[0]])


@PER_SIZE
def test_matmul_softmax_layer_norm():
    weight = torch.randn(16, 16)

    def function(x):
        hidden = torch.softmax(x @ weight, dim=-1)
        return torch.nn.functional.layer_norm(hidden, (16,))
    check_sizes(function, lambda n: [torch.randn(n, 16)], [[0]])


def test_cat_and_indexing():
    def function(x, index):
        return torch.cat([x, x[1:] * 2], 0), x[index], x[:, 1]
    # one compile: `cat` along the symbolic axis, `x[:, 1]` rebuilt as a view of the input
    check_sizes(function, lambda n: [torch.randn(n, 3), torch.tensor([0, n - 1, 1])],
                [[0], []], sizes=(5, 2, 3, 7, 97))


def test_writes_into_inputs():
    def function(x, y):
        x.add_(y)
        return x * 2
    check_sizes(function, lambda n: [torch.randn(n, 4), torch.randn(n, 4)], [[0], [0]],
                sizes=(5, 2, 7))   # one compile (tests/inductor/test_symbolic_writes.py)


@PER_SIZE
def test_output_strides_follow_eager_for_every_size():
    def function(x):
        return x.t() * 2, x.permute(1, 0).contiguous()
    check_sizes(function, lambda n: [torch.randn(n, 5)], [[0]])


@PER_SIZE
def test_other_strides_of_the_same_sizes_get_their_own_variant():
    """The kernels index inputs with the traced strides (`(s1, 1)`): the wrapper checks them
    per call, and a transposed input of the same sizes runs per-size variants (counted)
    rather than the symbolic kernels; another storage offset needs nothing."""
    def function(x):
        return x + 1
    x = torch.randn(4, 4)
    before = fallbacks.fallbacks()
    compiled = inductor.compile_fx(symbolic_graph(function, [x], [[0, 1]]), [x])
    assert _per_size_count(before) == 0
    transposed = torch.randn(4, 4).t()
    assert_same(compiled(transposed), function(transposed))
    assert _per_size_count(before) == 2    # the traced layout's variant, then this one
    offset = torch.randn(5, 4)[1:]     # same sizes and strides, storage offset 4
    assert_same(compiled(offset), function(offset))
    assert _per_size_count(before) == 2
    assert compiled.report.size_variants == 0


@PER_SIZE
def test_compiling_adds_no_guard_to_the_shape_env():
    """The front end guards on the ShapeEnv's guards as they stand when the backend returns:
    a compile that read a size as an int (`int(s0)` guards `s0 == 5`) would make every other
    size recompile. Variants check their own sizes at run time instead."""
    def function(x):
        return torch.softmax(x.view(x.size(0), 2, -1), -1).sum(1) + torch.arange(x.size(0))[:, None]
    x = torch.randn(5, 6)
    gm = symbolic_graph(function, [x], [[0]])
    fake = next(node for node in gm.graph.nodes if node.op == "placeholder").meta["example_value"]
    shape_env = fake.fake_mode.shape_env
    guards, ranges = list(shape_env.guards), dict(shape_env.var_to_range)
    compiled = inductor.compile_fx(gm, [x])
    assert list(shape_env.guards) == guards and dict(shape_env.var_to_range) == ranges
    y = torch.randn(11, 6)
    assert_same(compiled(y), function(y))


@PER_SIZE
def test_one_compile_per_size_counted(per_size_only):
    def function(x):
        return x.cos()
    before = fallbacks.fallbacks()
    x = torch.randn(3)
    compiled = inductor.compile_fx(symbolic_graph(function, [x], [[0]]), [x])
    for size in (3, 5, 3, 5, 3):
        y = torch.randn(size)
        assert_same(compiled(y), function(y))
    added = fallbacks.since(before)
    assert sum(count for reason, count in added.items() if reason.startswith("per_size")) == 2
    assert compiled.report.size_variants == 2
    assert "2 size variant(s)" in compiled.report.summary()


@pytest.mark.expect_fallback("per_size", "unsupported", reason="past the variant limit")
def test_past_the_limit_sizes_run_as_is(monkeypatch, per_size_only):
    monkeypatch.setattr(inductor.config, "size_variant_limit", 2)

    def function(x):
        return x.sin() * 2
    x = torch.randn(2)
    compiled = inductor.compile_fx(symbolic_graph(function, [x], [[0]]), [x])
    before = fallbacks.fallbacks()
    for size in (2, 3, 4, 5, 6):
        y = torch.randn(size)
        assert_same(compiled(y), function(y))
    assert compiled.report.size_variants == 2
    added = fallbacks.since(before)
    assert [count for reason, count in added.items() if reason.startswith("unsupported")] == [1]


@PER_SIZE
def test_make_fx_symbolic_graph():
    from torch.fx.experimental.proxy_tensor import make_fx

    def function(x):
        return torch.nn.functional.gelu(x).sum(0) / x.shape[0]
    gm = make_fx(function, tracing_mode="symbolic")(torch.randn(5, 3))
    compiled = inductor.compile_fx(gm, [torch.randn(5, 3)])
    for size in (2, 5, 33):
        y = torch.randn(size, 3)
        assert_same(compiled(y), function(y))


@PER_SIZE
def test_training_graph_with_symbolic_sizes():
    def function(x, w):
        return (x @ w).tanh().sum(0)
    w = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(3, 4, requires_grad=True)
    before = fallbacks.fallbacks()
    compiled = inductor.compile_fx(symbolic_graph(function, [x, w], [[0], []]), [x, w])
    whole = getattr(inductor.autograd, "SymbolicInputs", None) is not None
    # where inductor.autograd traces symbolic graphs, the graph goes there whole (one joint
    # trace); else one static training compile per size
    assert isinstance(compiled, inductor.CompiledGraph) is not whole
    for size in (3, 10, 3):
        x = torch.randn(size, 4, requires_grad=True)
        eager_x, eager_w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        actual, expected = compiled(x, w), function(eager_x, eager_w)
        assert_same(actual, expected)
        actual.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(x.grad, eager_x.grad)
        torch.testing.assert_close(w.grad, eager_w.grad)
        w.grad = None
    per_size = sum(count for reason, count in fallbacks.since(before).items()
                   if reason.startswith("per_size"))
    # forward and backward compiled once each over the symbols, or the graph per size
    assert per_size == (0 if whole else 2)


@pytest.mark.torch_compile
@PER_SIZE
def test_torch_compile_graphs_with_symint_placeholders(monkeypatch):
    import torch._dynamo
    torch._dynamo.reset()

    def function(x):
        return torch.softmax(x.view(x.size(0), -1, 2), -1).sum(1) * x.size(1)
    compiled = torch.compile(function, backend=inductor.compile_fx, dynamic=True)
    for size in (4, 6, 20):
        x = torch.randn(size, size * 2)
        assert_same(compiled(x), function(x))
    torch._dynamo.reset()


def _symbolic_aten(function, *inputs, functional=False):
    from torch.fx.experimental.proxy_tensor import make_fx
    if functional:
        function = torch.func.functionalize(function)
    gm = make_fx(function, tracing_mode="symbolic")(*inputs)
    outputs = next(node for node in gm.graph.nodes if node.op == "output").args[0]
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return gm, [node.meta["val"].stride() for node in outputs]


@PER_SIZE
def test_compile_aten_symbolic_graph_and_symbolic_output_strides():
    """What inductor.autograd's symbolic forward/backward hand `compile_aten`: an ATen graph
    whose metas are symbolic, `aten.sym_size.int` nodes, output strides as SymInts (here
    `(1, s0)` for a transposed result): compiled once, the strides as expressions."""
    def function(x, y):
        return torch.softmax(x * y, -1).t(), x.view(x.shape[0] * 2, -1) + 1
    gm, strides = _symbolic_aten(function, torch.randn(4, 6), torch.randn(6))
    assert any(isinstance(stride, torch.SymInt) for stride in strides[0])
    compiled = inductor.compile_aten(gm, [torch.randn(4, 6), torch.randn(6)], strides)
    for size in (4, 3, 9):
        x, y = torch.randn(size, 6), torch.randn(6)
        assert_same(tuple(compiled(x, y)), function(x, y))
    assert compiled.report.size_variants == 0      # one compile over the symbols


@PER_SIZE
def test_compile_aten_symbolic_graph_writing_its_input():
    def function(x):
        x.add_(1)
        return x * 2
    gm, _ = _symbolic_aten(function, torch.randn(5, 2), functional=True)
    compiled = inductor.compile_aten(gm, [torch.randn(5, 2)])
    for size in (5, 8):
        x = torch.randn(size, 2)
        expected_input = x.clone()
        expected = function(expected_input)
        assert_same(compiled(x)[0], expected)
        torch.testing.assert_close(x, expected_input)


def test_symbols_are_bound_from_input_sizes():
    from inductor.size_variants import bind_symbols, evaluated

    def function(x, y):
        return x.sum(0) * y.shape[0]
    x, y = torch.randn(5, 3), torch.randn(7)
    gm = symbolic_graph(function, [x, y], [[0, 1], [0]])
    binding = bind_symbols(gm, [torch.randn(6, 4), torch.randn(9)])
    assert sorted(binding.values()) == [4, 6, 9]
    placeholder = next(node for node in gm.graph.nodes if node.op == "placeholder")
    rows, columns = placeholder.meta["example_value"].shape
    assert evaluated([rows * columns, (columns, 3)], binding) == [24, (4, 3)]
    with pytest.raises(KeyError, match="bound by no input"):
        evaluated([rows], {})


@pytest.mark.expect_fallback("per_size", "unsupported", reason="past the variant limit")
def test_compile_aten_past_the_limit_returns_a_list(monkeypatch, per_size_only):
    monkeypatch.setattr(inductor.config, "size_variant_limit", 1)

    def function(x):
        return x.exp()
    gm, _ = _symbolic_aten(function, torch.randn(3, 2))
    compiled = inductor.compile_aten(gm, [torch.randn(3, 2)])
    for size in (3, 4):
        x = torch.randn(size, 2)
        result = compiled(x)
        assert isinstance(result, list) and len(result) == 1
        assert_same(result[0], function(x))


@pytest.mark.expect_fallback("error", "per_size", reason="the test breaks the symbolic path")
def test_a_bug_of_the_symbolic_path_is_counted_and_compiles_per_size(monkeypatch):
    """Any exception but `NotSymbolic` out of the symbolic compile is a compiler bug: counted
    as an `error` fallback, the graph compiled per size (generated code, eager's answers);
    with `fallback_on_error` off it raises (it escaped to the front end as an internal
    error that ran the whole frame eagerly: H2's decode run on the H200)."""
    def broken(*_arguments, **_keywords):
        raise RuntimeError("a bug")
    monkeypatch.setattr(pipeline, "_compile_symbolic", broken)
    monkeypatch.setattr(inductor.config, "fallback_on_error", True)
    before = fallbacks.fallbacks()
    first = [torch.randn(5, 3)]
    compiled = inductor.compile_fx(symbolic_graph(lambda x: x * 2 + 1, first, [[0]]),
                                   copy.deepcopy(first))
    for size in (5, 7):
        x = torch.randn(size, 3)
        assert_same(compiled(x.clone()), x * 2 + 1)
    counted = fallbacks.since(before)
    assert counted.get("error: symbolic compile failed: RuntimeError: a bug") == 1, counted
    assert _per_size_count(before) == 2
    assert compiled.report.kernel_count >= 1
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    with pytest.raises(RuntimeError, match="a bug"):
        inductor.compile_fx(symbolic_graph(lambda x: x * 2 + 1, first, [[0]]),
                            copy.deepcopy(first))
