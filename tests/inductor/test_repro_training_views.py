"""Views in the training path (inputs that require grad: `inductor.autograd`), on both CPU code
generators (Triton under its interpreter): the graph fuzzer's view classes
(tests/fuzz/graphs/FINDINGS.md) where the inference path's fixes do not reach.

25: a write through an `expand` that broadcasts nothing (same shape, new leading size-1 or
    size-0 dims, a size-1 dim expanded to 0) was inverted by functionalization as
    `base + (new - base)`: NaN where the tensor held inf, -0.0 turned into 0.0.
31: an output that views an intermediate was rebuilt with eager's geometry over the base as
    the decomposed graph laid it out (`baddbmm` of a transposed input decomposes to an `add`
    whose strides follow that input): `c[1]` read `c[:, 1]`, and `c` had other strides.
A write through an expand that broadcasts (`(1, 3)` to `(2, 3)`: its elements overlap) made
the trace fail at compile time, where eager runs the forward and raises in the backward: such
graphs run eagerly.
Also: a write through `unfold` into an intermediate returned and saved for the backward: the
saved value came back as a view of the returned one, made without grad mode, and the output's
version bump made the backward refuse it ("A view was created in no_grad mode ...").
"""
import copy

import pytest
import torch
import torch.fx

import inductor
from inductor.autograd import CompiledTraining, compile_training, run_graph
from inductor.autograd.runtime import TrainingVariant

INF = float("inf")


@pytest.fixture(params=["cpp", "triton"])
def backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def _sharing(outputs):
    """Per output: the earlier outputs it shares memory with, and those it is."""
    keys = [value.untyped_storage().data_ptr() if value.untyped_storage().nbytes() else None
            for value in outputs]
    return [(tuple(j for j in range(i) if keys[i] is not None and keys[j] == keys[i]),
             tuple(j for j in range(i) if outputs[j] is outputs[i]))
            for i in range(len(outputs))]


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, equal_nan=True)   # rounding: fused, reordered sums
    assert torch.equal(torch.signbit(got), torch.signbit(want))


def check(function, *inputs, compile_inner=None):
    """Eager and compiled (the training path, compiled: no graph run as is) on copies of
    `inputs`, twice: values (infinities, NaNs and signs of zeros exactly), dtypes, strides,
    requires_grad, which outputs share memory or are one object; then `backward()` of every
    output that requires grad with the same gradients, and the inputs' `.grad`."""
    graph = torch.fx.symbolic_trace(function)
    if compile_inner is None:
        compiled = inductor.compile_fx(graph, copy.deepcopy(inputs))
    else:
        compiled = compile_training(graph, copy.deepcopy(inputs), compile_inner)
    assert isinstance(compiled, CompiledTraining)
    for _ in range(2):
        eager_inputs, jit_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
        expected, actual = function(*eager_inputs), compiled(*jit_inputs)
        assert all(isinstance(variant, TrainingVariant) for variant in compiled.variants.values())
        for got, want in zip(actual, expected):
            _same(got.detach(), want.detach())
            assert got.requires_grad == want.requires_grad
            assert all(extent <= 1 or first == second for extent, first, second
                       in zip(want.shape, got.stride(), want.stride())), \
                (got.stride(), want.stride())
        assert _sharing(list(actual)) == _sharing(list(expected))
        generator = torch.Generator().manual_seed(0)
        grads = [torch.randn(want.shape, generator=generator) for want in expected]
        for outputs in (expected, actual):
            pairs = [(value, grad) for value, grad in zip(outputs, grads) if value.requires_grad]
            torch.autograd.backward([value for value, _ in pairs], [grad for _, grad in pairs])
        for got, want in zip(jit_inputs, eager_inputs):
            _same(got.detach(), want.detach())
            assert (got.grad is None) == (want.grad is None)
            if want.grad is not None:
                _same(got.grad, want.grad)


def _holding_inf():
    return torch.tensor([[1., INF, -INF], [-0.0, 4., 5.]], requires_grad=True)


# --- class 25: writes through an expand that broadcasts nothing --------------------------

def _fill_same_shape(w):
    y = w * 2
    y.expand(2, 3).fill_(5)
    return (y * w,)


def _add_new_leading_dim(w):
    y = w * 2
    y.expand(1, 2, 3).add_(1)
    return (y * w,)


def _mul_expand_as(w):
    y = w * 2
    y.expand_as(w).mul_(3)
    return (y * w,)


def _sub_broadcast_to(w):
    y = w * 2
    torch.broadcast_to(y, (2, 3)).sub_(1)
    return (y * w,)


def _fill_empty_expand(w):
    y = w * 1
    y.expand(0, 2, 3).fill_(3)
    return (y,)


def _copy_and_return_view(w):
    y = w * 2
    v = y.expand(2, 3)
    v.copy_(w + 1)
    return (y * w, v)


def _fill_broadcast_tensors(w, z):
    y = w * 2
    a, b = torch.broadcast_tensors(y, z)
    a.fill_(7)
    return (y * w, b + 0)


@pytest.mark.parametrize("function", [_fill_same_shape, _add_new_leading_dim, _mul_expand_as,
                                      _sub_broadcast_to, _fill_empty_expand,
                                      _copy_and_return_view],
                         ids=lambda function: function.__name__.strip("_"))
def test_write_through_expand_that_broadcasts_nothing(backend, function):
    check(function, _holding_inf())


@pytest.mark.parametrize("shape", [(2, 3), (1, 2, 3)])
def test_write_through_broadcast_tensors(backend, shape):
    check(_fill_broadcast_tensors, _holding_inf(), torch.ones(shape))


def test_expand_of_an_input_leaf_written_after_clone(backend):
    def function(w):
        y = w.clone()
        y.expand(1, 1, 2, 3).fill_(-0.0)
        return (y * 3, y)
    check(function, _holding_inf())


def test_write_through_expand_of_bools(backend):
    """The arithmetic inverse failed for bools (no `-` of two bool tensors)."""
    def function(w, b):
        c = b.clone()
        c.expand(1, 2, 3).logical_not_()
        return (w * c, c)
    check(function, _holding_inf(), torch.tensor([[True, False, True], [False, False, True]]))


# --- class 31: views of an intermediate laid out otherwise by the decomposed graph --------

def _transposed(*shape):
    """A tensor of `shape` whose first two dims are swapped in memory, requiring grad."""
    value = torch.randn(shape[1], shape[0], *shape[2:]).transpose(0, 1)
    return value.requires_grad_()


def _baddbmm_inputs():
    torch.manual_seed(0)
    return _transposed(4, 4, 3), torch.randn(4, 4, 5), torch.randn(4, 5, 3)


def _baddbmm_and_select(a3, a4, a5):
    c = torch.baddbmm(a3, a4, a5, alpha=0.5)
    return (c, c[1])


def _baddbmm_views_only(a3, a4, a5):
    c = torch.baddbmm(a3, a4, a5, alpha=0.5)
    return (c[1], c[:, 2], c.transpose(1, 2)[3])


def _baddbmm_saved_for_backward(a3, a4, a5):
    c = torch.baddbmm(a3, a4, a5, alpha=0.5)    # also saved, as the graph lays it out
    return (c[1], c, (c * c.exp()).sum(1))


@pytest.mark.parametrize("function", [_baddbmm_and_select, _baddbmm_views_only,
                                      _baddbmm_saved_for_backward],
                         ids=lambda function: function.__name__.strip("_"))
def test_views_of_an_intermediate_laid_out_by_eager(backend, function):
    check(function, *_baddbmm_inputs())


def test_views_of_an_intermediate_without_code_generation():
    """A `compile_inner` that takes no output strides (`aot_eager`'s `run_graph`): outputs
    come back as the ATen graph lays them out and are copied to eager's."""
    check(_baddbmm_and_select, *_baddbmm_inputs(), compile_inner=run_graph)


def test_views_of_an_intermediate_called_without_grad(backend):
    """Compiled for training, then called under `no_grad`: the forward-only variant."""
    inputs = _baddbmm_inputs()
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(_baddbmm_and_select),
                                   copy.deepcopy(inputs))
    with torch.no_grad():
        expected = _baddbmm_and_select(*copy.deepcopy(inputs))
        actual = compiled(*copy.deepcopy(inputs))
    for got, want in zip(actual, expected):
        _same(got, want)
        assert got.stride() == want.stride() and not got.requires_grad
    assert actual[1]._base is actual[0]


# --- a saved value that views a returned output written in place -------------------------

def _unfold_written_returned(x):
    c = x * 2
    c.unfold(1, 2, 2).mul_(5)
    return (c * x, c)


def _as_strided_written_returned(x):
    c = x * 2
    c.as_strided((2, 2), (4, 1)).mul_(5)
    return (c * x, c)


@pytest.mark.parametrize("function", [_unfold_written_returned, _as_strided_written_returned],
                         ids=lambda function: function.__name__.strip("_"))
def test_saved_view_of_a_written_output(backend, function):
    torch.manual_seed(2)
    check(function, torch.randn(4, 4, requires_grad=True))


# --- a write through an expand that broadcasts: run eagerly, as eager --------------------

def _fill_broadcasting_expand(w):
    y = w * 2
    y.expand(2, 3).fill_(5)
    return (y * w,)


def test_write_through_broadcasting_expand_runs_eagerly(backend):
    w = torch.tensor([[1., INF, -0.0]], requires_grad=True)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(_fill_broadcasting_expand),
                                   [w.detach().clone().requires_grad_()])
    expected = _fill_broadcasting_expand(w)
    actual = compiled(w)
    _same(actual[0].detach(), expected[0].detach())
    assert actual[0].requires_grad
    for value in (expected[0], actual[0]):
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            value.sum().backward()
    with torch.no_grad():
        _same(compiled(w)[0], _fill_broadcasting_expand(w)[0])
