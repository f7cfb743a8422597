"""Graph-fuzzer repros: assignments through boolean masks and through `diagonal` views, and
integer `addcmul` with a float value (tests/fuzz/graphs/FINDINGS.md, classes 6-8).

Before the fixes these graphs could not be compiled (with `fallback_on_error` they ran as
FX): `x[x > 0] = v` needed the mask's `nonzero` while tracing (DataDependentOutputException),
`diagonal` was decomposed into `as_strided`, which functionalization refuses to write
through, and torch's `addcmul` reference rejects a float `value` that eager truncates.
"""

import operator

import pytest
import torch

import inductor
from tests.inductor.conftest import check_same


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def _compiled_without_fallback(function, *inputs):
    compiled = check_same(function, *inputs)
    assert compiled.report.reason is None, compiled.report.reason
    return compiled


_tracers: list = []


def setitem(target, index, value):
    """`target[index] = value`, recorded as an `operator.setitem` node while tracing (as
    dynamo records it; torch.fx proxies cannot be assigned into)."""
    if _tracers:
        _tracers[-1].create_proxy("call_function", operator.setitem, (target, index, value), {})
    else:
        operator.setitem(target, index, value)


def _setitem_graph(function):
    tracer = torch.fx.Tracer()
    _tracers.append(tracer)
    try:
        graph = tracer.trace(function)
    finally:
        _tracers.pop()
    return torch.fx.GraphModule(tracer.root, graph)


def mask_scalar(x):
    setitem(x, x > 0, -2.0)
    return x + 0


def mask_rows(x, mask):
    setitem(x, mask, 5.0)
    return x + 0


def mask_row_values(x, mask, values):
    setitem(x, mask, values)
    return x * 1


def mask_after_slice(x, mask):
    setitem(x, (slice(None), mask), 7.0)
    return x - 0


def mask_one_value_per_element(x, values):
    setitem(x, x > 0, values)
    return x + 0


def mask_accumulate(x, mask):
    x.index_put_((mask,), torch.tensor(2.0), accumulate=True)
    return x + 0


MASK_CASES = {
    "scalar": (mask_scalar, lambda: [torch.randn(4, 6)]),
    "rows": (mask_rows, lambda: [torch.randn(4, 6), torch.tensor([True, False, True, True])]),
    "row_values": (mask_row_values, lambda: [torch.randn(4, 6),
                                             torch.tensor([True, False, True, True]),
                                             torch.randn(6)]),
    "after_slice": (mask_after_slice, lambda: [torch.randn(4, 6), torch.randn(6) > 0]),
    "per_element": (mask_one_value_per_element, lambda: [
        torch.tensor([[1., -1, 2], [-3, 4, 5]]), torch.tensor([10., 20, 30, 40])]),
    "accumulate": (mask_accumulate, lambda: [torch.randn(4, 6), torch.randn(4, 6) > 0]),
}


@pytest.mark.parametrize("case", sorted(MASK_CASES))
def test_assignment_through_a_boolean_mask(cpu_backend, case):
    function, make = MASK_CASES[case]
    torch.manual_seed(0)
    graph = _setitem_graph(function)
    inputs = make()
    expected_inputs = [value.clone() for value in inputs]
    expected = function(*expected_inputs)
    compiled = inductor.compile_fx(graph, [value.clone() for value in inputs])
    assert compiled.report.reason is None, compiled.report.reason
    actual = compiled(*inputs)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(inputs, expected_inputs)


def diagonal_read(x):
    return x.diagonal(1, 0, 1) * 2, x.diagonal(-1, 1, 0), x.reshape(2, 3, 4).diagonal(0, 2, 0)


def diagonal_write(x):
    x.diagonal(1, 0, 1).mul_(3)
    return x + 0


def diagonal_masked_write(x):
    view = x.reshape((2, 2, 6)).diagonal(0, 1, 0)
    setitem(view, view > 0, -1.0)
    return x * 1


@pytest.mark.parametrize("function", [diagonal_read, diagonal_write, diagonal_masked_write])
def test_diagonal_views(cpu_backend, function):
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    expected_input = x.clone()
    expected = function(expected_input)
    compiled = inductor.compile_fx(_setitem_graph(function), [x.clone()])
    assert compiled.report.reason is None, compiled.report.reason
    actual = compiled(x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(x, expected_input)


def test_integer_addcmul_truncates_a_float_value(cpu_backend):
    def function(a, b, c):
        a.addcmul_(b, c, value=-1.5)
        return a + 0, torch.addcmul(a, b, c, value=2.5)
    torch.manual_seed(0)
    inputs = [torch.randint(-5, 5, (3, 4), dtype=torch.int32) for _ in range(3)]
    _compiled_without_fallback(function, *inputs)


