"""Op sweep of the Triton backend against eager: the tables of `tests/inductor/test_op_sweep.py`
(every lowered pointwise op, with NaN, infinities, signed zeros and boundary values), batched
into one graph per (dtype, layout).

On CPU (Triton's interpreter, in CI) a subset: float32, bfloat16 and float64, int32 and
bool, on contiguous, transposed and broadcast inputs. On CUDA every dtype and layout of the
inductor sweep.
"""
import pytest
import torch

import inductor
from tests.inductor import test_op_sweep as sweep

CPU_CASES = [(torch.float32, "contiguous"), (torch.float32, "transposed"),
             (torch.bfloat16, "broadcast"), (torch.float64, "sliced")]
CUDA_CASES = [(dtype, layout) for dtype in sweep.FLOATS for layout in sweep.LAYOUTS]
CUDA_INTEGER_CASES = [(dtype, layout) for dtype in sweep.INTEGERS
                      for layout in ("contiguous", "transposed", "broadcast")]
# Functions libdevice computes to a few ulp where the CPU reference is correctly rounded.
CUDA_TOLERANCE = {torch.float32: (1e-5, 3e-5), torch.float64: (1e-10, 1e-9)}


def run_batch(ops: dict, inputs: tuple, dtype, device: str) -> list:
    """Compile all ops as one graph on `device`; descriptions of the ops that differ.
    (One big kernel per graph: autotuning is off to keep compile times down.)"""
    names = list(ops)
    inputs = tuple(value.to(device) for value in inputs)
    graph = sweep._trace_batch(ops, names, len(inputs))
    saved = inductor.config.autotune
    inductor.config.autotune = False
    try:
        compiled = inductor.compile_fx(graph, list(inputs))
    finally:
        inductor.config.autotune = saved
    actual = compiled(*inputs)
    expected = tuple(ops[name](*inputs) for name in names)
    atol, rtol = (CUDA_TOLERANCE if device == "cuda" else {}).get(
        dtype, sweep.TOLERANCE.get(dtype, (0, 0)))
    failures = []
    for name, got, want in zip(names, actual, expected):
        try:
            assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
            torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True)
        except AssertionError as error:
            failures.append(f"{name}: {str(error).splitlines()[0]} "
                            f"{sweep._first_difference(got.cpu(), want.cpu())}")
    return failures


def float_ops(dtype, device: str = "cpu") -> dict:
    ops = {**sweep._unary(sweep.FLOAT_UNARY), **sweep.FLOAT_BINARY}
    if dtype in (torch.bfloat16, torch.float16):
        ops.pop("to_int32")  # eager rounds the clamp to a half type first; ulp-level flips
    if device == "cuda" and dtype == torch.float64:
        # Eager's CUDA kernels multiply by a float32 1/6 even for float64 (hardswish(100)
        # is 100.000003 there); ours computes in float64, as eager's CPU kernels do.
        ops.pop("hardswish")
        ops.pop("hardsigmoid")
    return ops


def float_inputs(dtype, layout):
    return sweep.operands(layout, lambda shape, seed: sweep.float_values(shape, dtype, seed))


@pytest.mark.parametrize("dtype, layout", CPU_CASES, ids=str)
def test_float_ops_interpreted(dtype, layout):
    assert run_batch(float_ops(dtype), float_inputs(dtype, layout), dtype, "cpu") == []


@pytest.mark.parametrize("dtype, layout", [(torch.int32, "contiguous"),
                                           (torch.int64, "broadcast")], ids=str)
def test_integer_ops_interpreted(dtype, layout):
    x, y = sweep.operands(layout, lambda shape, seed: sweep.integer_values(
        shape, dtype, seed, nonzero=seed == 2))
    ops = {**sweep._unary(sweep.INTEGER_UNARY), **sweep.INTEGER_BINARY}
    assert run_batch(ops, (x, y), dtype, "cpu") == []


def test_bool_ops_interpreted():
    x, y = sweep.operands("contiguous",
                          lambda shape, seed: sweep.integer_values(shape, torch.int64, seed) > 0)
    assert run_batch(sweep.BOOL_OPS, (x, y), torch.bool, "cpu") == []


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@cuda
@pytest.mark.parametrize("dtype, layout", CUDA_CASES, ids=str)
def test_float_ops_cuda(dtype, layout):
    assert run_batch(float_ops(dtype, "cuda"), float_inputs(dtype, layout), dtype, "cuda") == []


@cuda
@pytest.mark.parametrize("dtype, layout", CUDA_INTEGER_CASES, ids=str)
def test_integer_ops_cuda(dtype, layout):
    x, y = sweep.operands(layout, lambda shape, seed: sweep.integer_values(
        shape, dtype, seed, nonzero=seed == 2))
    ops = {**sweep._unary(sweep.INTEGER_UNARY), **sweep.INTEGER_BINARY}
    assert run_batch(ops, (x, y), dtype, "cuda") == []


@cuda
@pytest.mark.parametrize("layout", ["contiguous", "sliced", "broadcast"])
def test_bool_ops_cuda(layout):
    x, y = sweep.operands(layout,
                          lambda shape, seed: sweep.integer_values(shape, torch.int64, seed) > 0)
    assert run_batch(sweep.BOOL_OPS, (x, y), torch.bool, "cuda") == []
