"""Graph-fuzzer repros: outputs whose memory eager does not share, `as_strided` over the
memory eager means, concatenations of empty pieces, 0-d boolean masks, and values read as
Python numbers (tests/fuzz/graphs/FINDINGS.md, classes 18-21).
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


def _no_shared_memory(compiled, *inputs):
    outputs = compiled(*inputs)
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    for output in outputs:
        for value in inputs:
            assert output is not value
            assert output.untyped_storage().data_ptr() != value.untyped_storage().data_ptr()


@pytest.mark.parametrize("function, make", [
    (lambda x: torch.ops.aten.sign.default(x), lambda: torch.rand(3, 4) > 0.5),
    (lambda x: torch.floor(x), lambda: torch.arange(12).reshape(3, 4)),
    (lambda x: torch.ops.aten.permute_copy.default(x, [1, 0]), lambda: torch.randn(3, 4)),
], ids=["sign_bool", "floor_int", "permute_copy"])
def test_output_computed_from_an_input_is_not_the_input(cpu_backend, function, make):
    """`aten.sign(bool_tensor)` came back as the input tensor itself (seed 20131)."""
    compiled = check_same(function, make())
    _no_shared_memory(compiled, make())


def test_as_strided_over_a_computed_value(cpu_backend):
    """`flip(a).unfold(1, 2, 1)`: the unfold (as_strided) read `a`'s memory instead of the
    flipped copy, and the output shared memory with `a` (seed 20431)."""
    a = torch.randint(0, 9, (7, 4, 8))
    compiled = check_same(lambda x: torch.flip(x, [2, 1, 0]).unfold(1, 2, 1), a)
    _no_shared_memory(compiled, a.clone())


def test_as_strided_of_an_input_with_a_storage_offset(cpu_backend):
    base = torch.randn(30)
    check_same(lambda x: torch.as_strided(x, (2, 3), (3, 1), 4) * 2, base[5:29])
    check_same(lambda x: x.t().as_strided((2, 2), (1, 2)) + 1, base[2:14].view(3, 4))


@pytest.mark.parametrize("function, inputs", [
    (lambda a, b: torch.stack([a, b], 0), [torch.ones(0).half(), torch.ones(0).half()]),
    (lambda a, b: torch.cat([a, b]), [torch.ones(0), torch.ones(0, dtype=torch.float64)]),
    (lambda a, b: torch.cat([a, b]), [torch.arange(3), torch.ones(0)]),
], ids=["stack_empty", "cat_empty_promoted", "cat_skipped_piece_promotes"])
def test_concatenation_of_empty_pieces(cpu_backend, function, inputs):
    """`torch.stack` of two empty 1-D tensors: IndexError in the cat lowering (seed 20770)."""
    check_same(function, *inputs)


_tracers: list = []


def setitem(target, index, value):
    if _tracers:
        _tracers[-1].create_proxy("call_function", operator.setitem, (target, index, value), {})
    else:
        operator.setitem(target, index, value)


def _compile(function, inputs):
    tracer = torch.fx.Tracer()
    _tracers.append(tracer)
    try:
        traced = tracer.trace(function)
        graph = torch.fx.GraphModule(tracer.root, traced)
    finally:
        _tracers.pop()
    return inductor.compile_fx(graph, inputs)


def test_assignment_through_a_zero_dim_mask(cpu_backend):
    """`x[m] = v` with a 0-d boolean m: DataDependentOutputException (seeds 10046, 20434)."""
    def function(x, mask, values):
        setitem(x, x > 0, -1.5)
        setitem(values, mask, 7.0)
        return x + 0, values * 1
    def make():
        return [torch.tensor(0.5), torch.tensor(True),
                torch.randn(3, 2, generator=torch.Generator().manual_seed(0))]
    compiled = _compile(function, make())
    assert compiled.report.reason is None, compiled.report.reason
    for sign in (1, -1):
        expected_inputs, actual_inputs = make(), make()
        for inputs in (expected_inputs, actual_inputs):
            inputs[0] *= sign
            inputs[1] = torch.tensor(sign > 0)
        torch.testing.assert_close(compiled(*actual_inputs), function(*expected_inputs))
        torch.testing.assert_close(actual_inputs, expected_inputs)


@pytest.mark.expect_fallback("unsupported", reason="a value read as a number runs as is")
def test_a_value_read_as_a_number_is_not_baked_in(cpu_backend):
    """`torch.clamp(x, min=False, max=t)` with a 0-d `t` passes t as a number: the traced
    graph held t's value at compile time (`clamp(x, False, 6)`), wrong on the next call
    (seed 20987). Such graphs run as is."""
    function = lambda bound, x: torch.clamp(x, min=False, max=bound)   # noqa: E731
    x = torch.tensor([[1, -7], [6, 2]], dtype=torch.int32)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function),
                                   [torch.tensor(6, dtype=torch.int32), x])
    assert "Python number" in (compiled.report.reason or "")
    for bound in (6, 3, -2):
        bound = torch.tensor(bound, dtype=torch.int32)
        torch.testing.assert_close(compiled(bound, x), function(bound, x))
