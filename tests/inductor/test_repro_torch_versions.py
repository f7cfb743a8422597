"""Graph-fuzzer repros that failed with torch 2.11 only (the H100 machine's torch): its
decompositions and meta functions differ from torch 2.14's where eager's do not, or eager
itself differs between the two. Each test compares with the installed torch's eager.

- `arange` of an integer dtype with a float bound or step: torch 2.11's meta function took
  the step truncated to an integer (`arange(1, 1.0001, 0.25, dtype=int32)`: "step must be
  nonzero" while tracing; H100 seeds 1085, 2662), and eager's int64 length changed between
  the versions (`arange(0.5, -4.4999, -1, dtype=int64)`: 4 elements on 2.11, 5 on 2.14; the
  compiled graph gave 5 on 2.11, seed 2426).
- `split` of a dimension of size 0: torch 2.11's decomposition indexed an empty list of
  sizes (IndexError; seeds 1700, 1964, 2092, 2456, 2894, 2925).
- The saved-tensor message of a compiled backward ("... modified by an inplace operation:
  [...], which is output 0 of NAME, is at version 1; ..."): torch 2.13+ names the forward op
  ("Sigmoid"), torch 2.11 the node ("SigmoidBackward0"); the compiled graph's check always
  spelled it as 2.14 does (program fuzzer, H100: seeds 122, 757, 1095, 1143, 1647, 3000, 3936,
  4060, 4079, 4326, 5212, 6261, 6561, 7644, 8079), and on 2.14 kept a custom Function's
  "FBackward" where eager says "F".
"""
import pytest
import torch

import dynamo
import inductor
from inductor.decompose import _int64_arange_truncates_bounds
from tests.inductor.conftest import check_same, compile_function

RANGES = [(0.5, 3, 0.75), (0.5, -4.4999, -1), (0.5, 4.4999, 1), (-0.5, 4.2, 1.5),
          (1.9, 7.1, 2), (1, 2, 0.5), (0, 5, 1.5), (2.5, 10, 2.5), (-2.7, 3, 1),
          (0.2, 3.9, 1.0), (1, 1.0001, 0.25), (1, 1.0, 0.25), (0.0, 3.5, 1), (3.7, 0.2, -1),
          (-1.5, -6.2, -2), (0, 10.0, 3), (5.5,)]
DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def _arange_graph(bounds, dtype) -> torch.fx.GraphModule:
    """`f(x) = (torch.arange(*bounds, dtype=dtype), x + 1)` with the arange as a graph node,
    as `dynamo` records it (symbolic tracing would run the factory once and store a
    constant)."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    arange = graph.call_function(torch.arange, tuple(bounds), {"dtype": dtype})
    graph.output((arange, graph.call_function(torch.add, (x, 1))))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _eager_crashes(bounds, dtype) -> bool:
    """torch 2.11's eager int64 arange divides by the truncated step: a step below 1 in
    magnitude kills the process (SIGFPE), so eager cannot be asked."""
    step = bounds[2] if len(bounds) == 3 else 1
    return dtype == torch.int64 and _int64_arange_truncates_bounds() and int(step) == 0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("bounds", RANGES, ids=str)
def test_integer_arange_of_float_bounds(cpu_backend, bounds, dtype):
    module, x = _arange_graph(bounds, dtype), torch.zeros(2)
    if _eager_crashes(bounds, dtype):
        with pytest.raises(RuntimeError, match="step must be nonzero"):
            inductor.compile_fx(module, [x])(x)
        return
    compiled = inductor.compile_fx(module, [x])
    torch.testing.assert_close(compiled(x), module(x), rtol=0, atol=0)


def test_arange_next_to_other_work(cpu_backend):
    """Seed 2426, minimized: the arange is returned beside computed outputs."""
    graph = torch.fx.Graph()
    a2, a8, a9 = (graph.placeholder(name) for name in ("a2", "a8", "a9"))
    arange = graph.call_function(torch.arange, (0.5, -4.4999, -1), {"dtype": torch.int64})
    graph.output((graph.call_function(torch.remainder, (a2, 3)),
                  graph.call_function(torch.gather, (a8, 1, a9)), arange))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    inputs = [torch.tensor([5, -7], dtype=torch.int32),
              torch.arange(16, dtype=torch.int32).reshape(2, 8),
              torch.tensor([[0, 7, 3], [1, 1, 6]])]
    compiled = inductor.compile_fx(module, inputs)
    torch.testing.assert_close(compiled(*inputs), module(*inputs), rtol=0, atol=0)


SPLITS = {
    "split": lambda x: x.split(3, 1),
    "split_size_0": lambda x: x.split(0, 1),
    "unsafe_split": lambda x: torch.unsafe_split(x, 2, 1),
    "chunk": lambda x: x.chunk(2, 1),
    "split_then_math": lambda x: (torch.round(x.split(3, 1)[0], decimals=-1) + 1,),
}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_split_of_an_empty_dimension(cpu_backend, name):
    x = torch.randn(2, 6, 8)[:, ::3, :][:, 2:]     # (2, 0, 8), non-contiguous
    check_same(SPLITS[name], x)


def test_split_piece_of_an_empty_dimension_is_a_view_of_the_input(cpu_backend):
    """Seed 2092, minimized: the piece is written and returned; eager returns a view."""
    def f(a8):
        v12 = a8.split(3, 0)
        v12[0].masked_fill_(v12[0] > 0, 0)
        return v12[0], a8 + 1

    x = torch.randn(0, 3)
    check_same(f, x)
    x = torch.randn(0, 3)
    piece, _ = compile_function(f, x)(x)
    assert piece.shape == (0, 3) and piece._base is x, "eager's piece is a view of the input"


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def _backward_error(function, make, after):
    """The message of the error `backward()` raises after `function(*make())` and
    `after(arguments, result)`, or None."""
    arguments = make()
    result = function(*arguments)
    after(arguments, result)
    try:
        result.sum().backward()
    except RuntimeError as error:
        return str(error)
    return None


def _nothing(arguments, result):
    pass


def _check_saved_tensor_message(function, make, after=_nothing):
    expected = _backward_error(function, make, after)
    assert expected is not None and "modified by an inplace operation" in expected
    for call in range(2):   # compile, then the cached graph
        jitted = dynamo.jit(function, backend="inductor")
        assert _backward_error(jitted, make, after) == expected, f"call {call}"


def _weight():
    return (torch.tensor([0.5, -1.0, 0.25], requires_grad=True),)


def test_saved_output_written_by_the_graph_fuzz_seed_122(cpu_backend):
    """Seed 122, minimized: `sigmoid` saves its result, which `tanh_` writes; eager's
    backward names the saving node (2.11: 'SigmoidBackward0', 2.14: 'Sigmoid')."""
    def f(w):
        t = torch.sigmoid(w)
        t.tanh_()
        return t
    _check_saved_tensor_message(f, _weight)


def test_saved_view_whose_base_was_written_names_as_strided(cpu_backend):
    """A saved view of `x` whose base the graph writes afterwards: eager regenerates its node
    as AsStridedBackward0 (seeds 1143, 4326)."""
    def f(x, y):
        a = torch.maximum(y + x, x.t().t())
        x[1:2] = y[None]
        return a
    _check_saved_tensor_message(
        f, lambda: (torch.randn(2, 4), torch.randn(4, requires_grad=True)))


def test_saved_input_written_by_the_next_graph_names_sub(cpu_backend):
    """The second graph's `x -= ...` is written back with a copy whose node carries eager's
    name (seed 4079's class: 2.11 'SubBackward0', 2.14 'Sub')."""
    def f(x):
        u = x.sin()
        print("break")
        x -= u.amax(0)
        return u
    _check_saved_tensor_message(
        f, lambda: (torch.linspace(-1, 1, 4).reshape(2, 2).requires_grad_() * 1,))


def test_saved_input_made_by_a_custom_function(cpu_backend):
    """An input made by a custom autograd Function (node 'FBackward', no digits), saved by
    the graph and written by the caller under no_grad: eager names it '_Double' on 2.14
    (the compiled check kept '_DoubleBackward') and '_DoubleBackward' on 2.11."""
    def f(y, w):
        return y * w

    def make():
        return _Double.apply(_weight()[0]), torch.tensor([2.0, 3.0, -1.0], requires_grad=True)

    def after(arguments, result):
        with torch.no_grad():
            arguments[0].add_(1)
    _check_saved_tensor_message(f, make, after)
