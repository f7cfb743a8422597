"""Mutation, aliasing, views and grad mode through `inductor.compile_fx`, against eager.

Soundness II classes 1-4 on CPU, with both code generators (C++ and Triton's interpreter):
in-place updates applied once and in program order, inputs that share memory (at compile time
or only at a later call), outputs that view intermediates, inputs or each other, and grad-mode
regions. Every check runs the same program eagerly on copies of the inputs and compares
results, mutated inputs, aliasing of the results and `requires_grad`."""
import copy
import operator

import pytest
import torch
import torch.fx

import inductor


@pytest.fixture(params=["cpp", "triton"])
def backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def compiled_graph(function, inputs):
    return inductor.compile_fx(torch.fx.symbolic_trace(function), list(inputs))


def assert_same(actual, expected):
    """Equal values (bit for bit), dtypes, shapes, strides and requires_grad."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor)
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        assert actual.requires_grad == expected.requires_grad
        assert (actual.grad_fn is None) == (expected.grad_fn is None)
        torch.testing.assert_close(actual.detach(), expected.detach(), rtol=0, atol=0,
                                   equal_nan=True)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for first, second in zip(actual, expected):
            assert_same(first, second)
    else:
        assert actual == expected


def check(function, make_inputs, calls=2, compile_inputs=None):
    """Compile on `compile_inputs()` (default `make_inputs()`), then call `calls` times on
    fresh `make_inputs()`, comparing with eager on identical copies."""
    compiled = compiled_graph(function, (compile_inputs or make_inputs)())
    for _ in range(calls):
        eager_inputs = make_inputs()
        jit_inputs = copy.deepcopy(eager_inputs)
        expected = function(*eager_inputs)
        actual = compiled(*jit_inputs)
        assert_same(actual, expected)
        assert_same(jit_inputs, eager_inputs)
    return compiled


# -- class 1: in-place updates run once, in program order ----------------------------------

def test_update_reads_the_old_value_of_an_input_updated_before_it(backend):
    def function(x, s):
        x.add_(1)
        s.add_(x)
        return s
    check(function, lambda: (torch.ones(3), torch.zeros(3)))


def test_sgd_momentum_step(backend):
    def step(p, g, buf):
        buf.mul_(0.9).add_(g)
        p.add_(buf, alpha=-0.1)
        return p
    check(step, lambda: (torch.ones(3), torch.full((3,), 0.1), torch.full((3,), 0.5)))


def test_swap_through_a_clone_needs_a_temporary(backend):
    def swap(x, s):
        t = x.clone()
        x.copy_(s)
        s.copy_(t)
        return x + s
    check(swap, lambda: (torch.arange(3.0), torch.arange(3.0) + 10))


def test_rotation_of_three_inputs(backend):
    def rotate(a, b, c):
        t = a.clone()
        a.copy_(b)
        b.copy_(c)
        c.copy_(t)
        return a
    check(rotate, lambda: (torch.arange(3.0), torch.arange(3.0) + 10, torch.arange(3.0) + 20))


def test_update_reading_its_input_at_other_elements(backend):
    """`x[1:] = 2 * x[:-1]` reads x[i-1] while writing x[i]: in one loop it would read
    elements it already overwrote."""
    def shift(x):
        y = x * 2
        x[1:].copy_(y[:-1])
        return x
    check(shift, lambda: (torch.arange(5.0),))


def test_update_with_its_own_transpose(backend):
    def function(x):
        x.add_(x.t() * 1)
        return x
    check(function, lambda: (torch.arange(9.0).view(3, 3),))


def test_a_global_updated_after_reading_an_updated_input(backend):
    state = torch.zeros(3)

    def function(x):
        x.add_(1)
        state.add_(x)
        return state.clone()

    module = torch.fx.symbolic_trace(function)
    compiled = inductor.compile_fx(module, [torch.ones(3)])
    expected_state = torch.zeros(3)
    for _ in range(3):
        x, eager_x = torch.ones(3), torch.ones(3)
        compiled(x)
        eager_x.add_(1)
        expected_state.add_(eager_x)
        assert_same(x, eager_x)
        assert_same(module.state if hasattr(module, "state") else state, expected_state)


# -- class 2: inputs sharing memory --------------------------------------------------------

@pytest.mark.expect_fallback("unsupported", reason="a write into one of two inputs sharing a storage runs as is")
def test_compiled_for_distinct_inputs_then_called_with_one_tensor_twice(backend):
    def function(a, b):
        a.mul_(3)
        return b + 1
    compiled = compiled_graph(function, (torch.ones(3), torch.ones(3)))
    a = torch.ones(3)
    expected_a = torch.ones(3)
    expected = function(expected_a, expected_a)
    assert_same(compiled(a, a), expected)
    assert_same(a, expected_a)


@pytest.mark.expect_fallback("unsupported", reason="a write into one of two inputs sharing a storage runs as is")
def test_compiled_for_one_tensor_twice_then_called_with_distinct_ones(backend):
    def function(a, b):
        a.mul_(3)
        return b + 1
    shared = torch.ones(3)
    compiled = compiled_graph(function, (shared, shared))
    check(function, lambda: (torch.ones(3), torch.full((3,), 2.0)), calls=1,
          compile_inputs=lambda: (shared, shared))
    a, b = torch.ones(3), torch.full((3,), 2.0)
    assert_same(compiled(a, b), torch.full((3,), 3.0))
    assert_same(a, torch.full((3,), 3.0))


@pytest.mark.expect_fallback("unsupported", reason="a write into one of two inputs sharing a storage runs as is")
def test_input_sharing_memory_with_a_row_of_another(backend):
    def function(x, row):
        x.add_(1)
        return row * 2
    compiled = compiled_graph(function, (torch.zeros(3, 4), torch.zeros(4)))
    base = torch.zeros(3, 4)
    assert_same(compiled(base, base[1]), torch.full((4,), 2.0))
    assert_same(base, torch.ones(3, 4))


@pytest.mark.expect_fallback("unsupported", reason="a write into one of two inputs sharing a storage runs as is")
def test_calls_with_new_sharing_compile_a_variant_once(backend):
    def function(a, b):
        a.add_(b)
        return a * 1
    compiled = compiled_graph(function, (torch.ones(3), torch.ones(3)))
    for _ in range(3):
        a = torch.ones(3)
        compiled(a, a)
        assert_same(a, torch.full((3,), 2.0))
    assert len(compiled.run.variants) == 1


def test_graphs_without_writes_into_inputs_check_nothing(backend):
    compiled = compiled_graph(lambda x, y: x * y, (torch.ones(3), torch.ones(3)))
    assert compiled.report.input_pattern is None
    a = torch.arange(3.0)
    assert_same(compiled(a, a), a * a)


# -- class 3: outputs that view intermediates, inputs or each other ------------------------

def test_view_of_an_output_returned_before_it(backend):
    def function(x):
        c = x + 1
        return c[:1], c
    view, whole = check(function, lambda: (torch.randn(4),))(torch.zeros(4))
    view.fill_(7.0)
    assert whole[0].item() == 7.0


def test_chunks_of_an_intermediate(backend):
    def function(a):
        return (a + 1).chunk(2, 1)
    first, second = check(function, lambda: (torch.randn(4, 4),))(torch.zeros(4, 4))
    assert first.untyped_storage().data_ptr() == second.untyped_storage().data_ptr()
    assert (first.stride(), second.storage_offset()) == ((4, 1), 2)


def test_zero_dim_output_next_to_an_updated_clone(backend):
    """`v = s.abs(); c = x0.clone(); c[-1] = 3; return v, c` as dynamo captures it (the item
    assignment is an `operator.setitem` node), with a 0-d `s`."""
    graph = torch.fx.Graph()
    s, x0 = graph.placeholder("s"), graph.placeholder("x0")
    v = graph.call_method("abs", (s,))
    c = graph.call_method("clone", (x0,))
    graph.call_function(operator.setitem, (c, -1, 3))
    graph.output((v, c))
    module = torch.fx.GraphModule({}, graph)

    def make_inputs():
        return torch.tensor(-2.0), torch.randn(1, 1)
    compiled = inductor.compile_fx(module, list(make_inputs()))
    for _ in range(2):
        inputs = make_inputs()
        assert_same(compiled(*copy.deepcopy(inputs)), module(*inputs))


def test_sum_over_one_element_next_to_a_sum_over_an_expand(backend):
    """The one-element sum was fused into the loop of the other and counted twice (and in
    Triton, the expand's summand, one value per row, was reduced as a scalar)."""
    def function(x):
        v2 = x.sum()
        q = v2[None].sum(-1)
        v3 = v2.expand(2)
        return q + v3.sum(), v3
    check(function, lambda: (torch.ones(3),))


def test_in_place_result_is_the_input_object(backend):
    def function(x, s):
        return s.add_(x), x.t()
    x, s = torch.randn(2, 2), torch.randn(2, 2)
    compiled = compiled_graph(function, (x, s))
    updated, transposed = compiled(x, s)
    assert updated is s
    assert transposed.data_ptr() == x.data_ptr() and transposed.stride() == (1, 2)


def test_view_of_an_input_keeps_its_offset_relative_to_the_input(backend):
    def function(x):
        x.mul_(2)
        return x[1:]
    compiled = compiled_graph(function, (torch.ones(4),))
    storage = torch.arange(6.0)
    view = compiled(storage[2:])
    assert view.storage_offset() == 3
    assert_same(view, torch.tensor([6.0, 8.0, 10.0]))


def test_two_views_of_one_intermediate_share_memory_like_eager(backend):
    def function(x):
        y = x * 2
        return y.view(2, 2), y.t().t(), y.detach()
    results = check(function, lambda: (torch.randn(2, 2),))(torch.ones(2, 2))
    results[0].add_(1)
    assert results[1][0, 0].item() == 3.0 and results[2][0, 0].item() == 3.0


# -- class 4: grad-mode regions ------------------------------------------------------------
# Parameters are graph inputs, as dynamo passes them.

def linear_inputs():
    return (torch.randn(2, 3), torch.randn(3, 3, requires_grad=True),
            torch.randn(3, requires_grad=True))


def linear_in_region(grad_mode: bool) -> torch.fx.GraphModule:
    """`with torch.set_grad_enabled(grad_mode): y = linear(x, weight, bias)` as dynamo
    captures it: the region is a pair of `_set_grad_enabled` calls."""
    graph = torch.fx.Graph()
    x, weight, bias = (graph.placeholder(name) for name in ("x", "weight", "bias"))
    graph.call_function(torch._C._set_grad_enabled, (grad_mode,))
    y = graph.call_function(torch.nn.functional.linear, (x, weight, bias))
    graph.call_function(torch._C._set_grad_enabled, (not grad_mode,))
    graph.output((y,))
    return torch.fx.GraphModule({}, graph)


def test_no_grad_region_inside_a_grad_mode_call():
    module = linear_in_region(False)
    compiled = inductor.compile_fx(module, list(linear_inputs()))
    inputs = linear_inputs()
    (result,) = compiled(*inputs)
    assert_same(result, module(*inputs)[0])
    assert not result.requires_grad and torch.is_grad_enabled()


def test_enable_grad_region_inside_a_no_grad_call():
    module = linear_in_region(True)
    x, weight, bias = linear_inputs()
    with torch.no_grad():
        compiled = inductor.compile_fx(module, [x, weight, bias])
        (result,) = compiled(x, weight, bias)
        assert not torch.is_grad_enabled()
    assert result.requires_grad
    result.sum().backward()
    torch.testing.assert_close(bias.grad, torch.full((3,), 2.0))


def test_view_of_a_parameter_made_under_no_grad():
    """`with torch.no_grad(): row = weight[0]` next to `x * weight`: the view is rebuilt
    from the parameter without autograd history (eager's view then requires grad but has no
    `grad_fn`), the product keeps its own."""
    graph = torch.fx.Graph()
    x, weight = graph.placeholder("x"), graph.placeholder("weight")
    graph.call_function(torch._C._set_grad_enabled, (False,))
    row = graph.call_function(operator.getitem, (weight, 0))
    graph.call_function(torch._C._set_grad_enabled, (True,))
    product = graph.call_function(operator.mul, (x, weight))
    graph.output((row, product))
    module = torch.fx.GraphModule({}, graph)

    def make_inputs():
        return torch.randn(3, 3), torch.ones(3, 3, requires_grad=True)
    compiled = inductor.compile_fx(module, list(make_inputs()))
    inputs = make_inputs()
    row, product = compiled(*inputs)
    assert_same((row, product), module(*inputs))
    assert row.grad_fn is None and product.grad_fn is not None
    assert row.data_ptr() == inputs[1].data_ptr()


def test_graph_compiled_under_no_grad_then_called_with_grad_mode_on():
    def function(x, weight, bias):
        return torch.nn.functional.linear(x, weight, bias)
    x, weight, bias = linear_inputs()
    with torch.no_grad():
        compiled = compiled_graph(function, (x, weight, bias))
        assert not compiled(x, weight, bias).requires_grad
    result = compiled(x, weight, bias)
    assert result.requires_grad
    result.sum().backward()
    torch.testing.assert_close(bias.grad, torch.full((3,), 2.0))


def test_training_graph_called_with_inputs_sharing_memory():
    """The training path keys its variants on the sharing of storages once a graph writes
    into an input: compiled for distinct tensors, then called with one tensor twice."""
    def function(a, b, weight):
        a.mul_(3)
        return (b * weight).sum(), a
    weight = torch.ones(3, requires_grad=True)
    compiled = compiled_graph(function, (torch.ones(3), torch.ones(3), weight))
    shared = torch.ones(3)
    loss, returned = compiled(shared, shared, weight)
    assert loss.item() == 9.0 and returned is shared and shared.tolist() == [3.0] * 3
    loss.backward()
    assert weight.grad.tolist() == [3.0] * 3
    loss, _ = compiled(torch.ones(3), torch.ones(3), weight)
    assert loss.item() == 3.0
