"""Program fuzzer, inductor seeds 957, 1399, 2797, 3439, 3606, 3655, 4159 (a `detach()` alias
required grad), 8074 (a write through a `detach()` alias of a parameter raised 'a leaf Variable
that requires grad is being used in an in-place operation') and 6155 (a view made under
`no_grad` whose base the graph then wrote: the compile itself raised 'A view was created in
no_grad mode ...'). A training graph's outputs that alias an input or another output are
rebuilt after the call; they now get the autograd state eager leaves them in, and writes
through a `detach()` alias are copied back unrecorded, as eager records nothing."""
import pytest
import torch

import dynamo


def _history(tensor):
    try:
        return (None if tensor.grad_fn is None else "node"), tensor.is_leaf
    except RuntimeError as error:   # a stale view made under no_grad: eager raises too
        return ("raises", str(error)[:60])


def _state(tensor):
    return (tensor.requires_grad, _history(tensor), tensor._base is not None,
            tensor.detach().tolist())


class _Averaging(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
        self.register_buffer("avg", torch.zeros(2))

    def forward(self, t):
        global SAVED
        SAVED = self.avg.detach()           # seed 957: a global
        self.avg[1:2] = self.w.amax(-1, keepdim=True)
        return self.w * t


SAVED = None


def test_detach_of_a_buffer_that_gains_a_gradient(code_generator):
    global SAVED
    states = []
    for jit in (False, True):
        net = _Averaging()

        def run(t):
            return net(t)
        fn = dynamo.jit(run, backend=code_generator) if jit else run
        fn(torch.ones(2))
        assert SAVED.untyped_storage().data_ptr() == net.avg.untyped_storage().data_ptr()
        states.append((_state(SAVED), _state(net.avg)))
    assert states[0] == states[1]


class _Box:
    pass


def _detach_into_attribute(x, box):
    box.extra = x.detach()                 # seed 2797


def _written_then_detached(y, w):
    t2 = w
    t2.copy_(y)                            # w gains y's history
    return w, t2.detach()                  # seed 3439


def test_detach_of_an_input_requiring_grad(code_generator):
    jitted = dynamo.jit(_detach_into_attribute, backend=code_generator)
    x = torch.randn(3, 4, requires_grad=True)
    eager_box, jit_box = _Box(), _Box()
    _detach_into_attribute(x, eager_box)
    jitted(x, jit_box)
    assert _state(jit_box.extra) == _state(eager_box.extra)
    assert jit_box.extra.data_ptr() == x.data_ptr()


def test_detach_of_an_input_written_with_a_gradient(code_generator):
    jitted = dynamo.jit(_written_then_detached, backend=code_generator)
    y = torch.randn(4, 4, requires_grad=True)
    expected = _written_then_detached(y * 1, torch.zeros(4, 4))
    actual = jitted(y * 1, torch.zeros(4, 4))
    assert [_state(t) for t in actual] == [_state(t) for t in expected]
    assert actual[1].data_ptr() == actual[0].data_ptr()


class _Detaching(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0, 0.5]))

    def forward(self, t):
        return self.w.detach()


def test_write_through_a_detach_of_a_parameter(code_generator):
    results = []
    for jit in (False, True):
        net = _Detaching()

        def scale(x):
            t2 = net(x.amax(-2))            # seed 8074
            t2 *= 0.5
            return (net.w * x).sum()
        fn = dynamo.jit(scale, backend=code_generator) if jit else scale
        loss = fn(torch.ones(2, 4))
        loss.backward()
        results.append((_state(net.w), net.w.grad.tolist(), net.w._version, loss.item()))
    assert results[0] == results[1]


def _view_made_without_grad(x, y, s, w):
    g1 = torch.is_grad_enabled()
    torch.set_grad_enabled(s > s)
    v1 = x[:, 0]                            # seed 6155: made under no_grad ...
    torch.set_grad_enabled(g1)
    x += y.matmul(w.T)                      # ... then its base written with grad mode on
    return v1


def test_view_made_without_grad_then_its_base_written(code_generator):
    jitted = dynamo.jit(_view_made_without_grad, backend=code_generator)
    states = []
    for fn in (_view_made_without_grad, jitted):
        torch.manual_seed(0)
        x, y, w = torch.randn(2, 3), torch.randn(2, 3), torch.randn(3, 3, requires_grad=True)
        v1 = fn(x, y, 0.5, w)
        states.append((_state(v1), _state(x), x._version))
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
            v1.add_(1)
    assert states[0] == states[1]


def _view_of_intermediate_without_grad(x, w):
    y = x * w
    with torch.no_grad():
        v = y[1:]
    return y, v


def _view_of_intermediate_then_written(x, w):
    y = x * w
    with torch.no_grad():
        v = y[1:]
    y.mul_(2)
    return y, v


@pytest.mark.parametrize("program", [_view_of_intermediate_without_grad,
                                     _view_of_intermediate_then_written])
def test_view_of_an_output_made_without_grad(code_generator, program):
    jitted = dynamo.jit(program, backend=code_generator)
    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    expected, actual = program(x, w), jitted(x, w)
    assert [_state(t) for t in actual] == [_state(t) for t in expected]
    assert actual[1]._base is actual[0]


def _detached_aliases(x, w):
    h = w * 2
    return w.detach(), w[1:].detach(), x.detach(), x[1:].detach(), h.detach()[1:], w * x


def test_detached_aliases_are_no_views(code_generator):
    """`t.detach()` is no view (no `_base`), of a view either; a view of one is."""
    jitted = dynamo.jit(_detached_aliases, backend=code_generator)
    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    expected, actual = _detached_aliases(x, w), jitted(x, w)
    assert [_state(t) for t in actual] == [_state(t) for t in expected]
    assert [t.data_ptr() for t in actual[:4]] == [t.data_ptr() for t in expected[:4]]
