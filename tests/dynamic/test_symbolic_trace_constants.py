"""Tensors a graph makes from Python values compile once for every size.

`torch.tensor(1.5)`, `torch.tensor([1., 2.])` or the fill value of `x[:, 0] = 2.5` become
tensor constants of the decomposed ATen graph (`lift_fresh_copy`); the symbolic trace
refused them ("tensor constants made while tracing": a static variant per size, 28 of the
program fuzzer's per-size graphs at stop 41). They are now leading placeholders passed with
every call, as in the static path, with the written inputs' versions, the outputs that view
inputs, and (on a GPU) 0-d constants moved to the graph's device accounted after them.
tests/conftest.py fails a test on any fallback, `per_size` included: these compile once.
"""
import pytest
import torch

import dynamo
import inductor
from dynamic_programs import counting_backend

SIZES = [3, 5, 8, 6, 13]   # not 2: `x[1:]` of one row is a size-1 dimension (the 0/1 rule)


def _scale_and_shift(x):
    return x * torch.tensor(1.5) + torch.tensor([1.0, 2.0, 4.0]).sum()


def _write_a_constant_column(x):
    x[:, 0] = 2.5
    x[:, 1] = torch.tensor(-1.0)
    return x * torch.tensor(3.0)


def _view_and_constant(x):
    flat = x.view(-1)
    return flat, (x + 1) * torch.tensor(0.5), x.t()


def _written_view_and_constant(x, y):
    y.add_(torch.tensor(2.0))
    x[1:] = x[1:] * torch.tensor(0.25)
    return x[0], y.unsqueeze(0) + torch.tensor([7.0])


PROGRAMS = {"scale_and_shift": (_scale_and_shift, 1),
            "write_a_constant_column": (_write_a_constant_column, 1),
            "view_and_constant": (_view_and_constant, 1),
            "written_view_and_constant": (_written_view_and_constant, 2)}


def _inputs(count: int, size: int, seed: int) -> list:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(size, 4, generator=generator) for _ in range(count)]


def _flat(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


@pytest.mark.parametrize("code_generator", ["cpp", "triton"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_trace_constants_compile_once_and_match_eager(name, code_generator, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", code_generator)
    function, count = PROGRAMS[name]
    dynamo.reset()
    counting = counting_backend("inductor")
    compiled = dynamo.jit(function, backend=counting, dynamic=True)
    for seed, size in enumerate(SIZES):
        expected_inputs = _inputs(count, size, seed)
        actual_inputs = _inputs(count, size, seed)
        expected = _flat(function(*expected_inputs))
        actual = _flat(compiled(*actual_inputs))
        for index, (got, want) in enumerate(zip(actual, expected)):
            assert got.dtype == want.dtype and got.shape == want.shape, (size, index)
            assert got.stride() == want.stride(), (size, index)
            assert torch.equal(got, want), f"size {size}: output {index} differs"
            for position, (argument, eager_argument) in enumerate(zip(actual_inputs,
                                                                      expected_inputs)):
                # an output viewing an input views the caller's tensor, as in eager
                shares = want.untyped_storage().data_ptr() == \
                    eager_argument.untyped_storage().data_ptr()
                assert (got.untyped_storage().data_ptr() ==
                        argument.untyped_storage().data_ptr()) == shares, (size, index, position)
        for position, (got, want) in enumerate(zip(actual_inputs, expected_inputs)):
            assert torch.equal(got, want), f"size {size}: input {position} written otherwise"
            assert got._version == want._version, (size, position)
    assert counting.frame_count == 1


def test_scalar_constants_moved_to_the_graph_device_stay_real_tensors():
    """`decompose._scalars_on_graph_device` moves 0-d CPU constants of a graph whose inputs
    live on one GPU there. A first version of e489274 made the moved copy inside the fake
    mode: the graph was then called with a fake tensor, an illegal memory access on the H200
    (found by this session's GPU check). The meta device stands in for the GPU here."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from inductor.decompose import _scalars_on_graph_device

    def scaled(scale, x):     # (lifted constants lead the placeholders)
        return x * scale

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    constant = torch.tensor(1.5)
    example = torch.empty(3, 4, device="meta")
    fakes = [mode.from_tensor(constant), mode.from_tensor(example)]
    with mode:
        traced = make_fx(scaled, tracing_mode="real")(*fakes)
    _graph, constants, moved_fakes = _scalars_on_graph_device(
        traced, [constant], fakes, [example], lambda: mode)
    assert not isinstance(constants[0], FakeTensor)
    assert constants[0].device.type == "meta" and constant.device.type == "cpu"
    assert isinstance(moved_fakes[0], FakeTensor) and moved_fakes[0].device.type == "meta"


def _scale_and_shift_on_its_device(x):
    # (a 1-d CPU constant with CUDA inputs makes the graph span two devices: run as is, by
    # design, as in the static path; the 0-d `torch.tensor(1.5)` moves to the GPU)
    return x * torch.tensor(1.5) + torch.tensor([1.0, 2.0, 4.0], device=x.device).sum()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("name", ["scale_and_shift", "write_a_constant_column"])
def test_trace_constants_on_the_gpu(name):
    function, count = PROGRAMS[name]
    function = _scale_and_shift_on_its_device if name == "scale_and_shift" else function
    dynamo.reset()
    counting = counting_backend("inductor")
    compiled = dynamo.jit(function, backend=counting, dynamic=True)
    for seed, size in enumerate(SIZES):
        expected_inputs = [value.cuda() for value in _inputs(count, size, seed)]
        actual_inputs = [value.clone() for value in expected_inputs]
        for got, want in zip(_flat(compiled(*actual_inputs)),
                             _flat(function(*expected_inputs))):
            assert got.device == want.device and torch.equal(got, want), size
        for got, want in zip(actual_inputs, expected_inputs):
            assert torch.equal(got, want) and got._version == want._version, size
    assert counting.frame_count == 1
