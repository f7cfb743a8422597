"""Op sweep, second half: reductions, views, data movement and indirect indexing, per dtype
and layout, against eager (batched like `test_op_sweep.py`)."""
from __future__ import annotations

import pytest
import torch

from tests.inductor.test_op_sweep import (FLOATS, INTEGERS, float_values, integer_values,
                                          laid_out, run_batch)

FLOAT_REDUCTIONS = {
    "sum0": lambda x: x.sum(0), "sum1": lambda x: x.sum(1), "sum_all": lambda x: x.sum(),
    "mean1": lambda x: x.mean(1), "mean_all": lambda x: x.mean(),
    "prod1": lambda x: (x.clamp(-2, 2)).prod(1), "amax0": lambda x: x.amax(0),
    "amin1": lambda x: x.amin(1), "amax_all": lambda x: x.amax(),
    "argmax1": lambda x: x.argmax(1), "argmin0": lambda x: x.argmin(0),
    "argmax_all": lambda x: x.argmax(), "var1": lambda x: x.var(1), "std0": lambda x: x.std(0),
    "var_all": lambda x: x.var(), "var_mean1": lambda x: torch.var_mean(x, 1, correction=0),
    "logsumexp1": lambda x: torch.logsumexp(x, 1), "softmax1": lambda x: x.softmax(1),
    "softmax0": lambda x: x.softmax(0), "log_softmax1": lambda x: x.log_softmax(1),
    "any1": lambda x: (x > 1).any(1), "all0": lambda x: (x > -2).all(0),
    "keepdim": lambda x: x.sum(1, keepdim=True) - x,
    "max_dim": lambda x: x.max(1).values, "sum_dtype": lambda x: x.sum(1, dtype=torch.float64),
}
INTEGER_REDUCTIONS = {
    "sum0": lambda x: x.sum(0), "sum1": lambda x: x.sum(1), "sum_all": lambda x: x.sum(),
    "prod1": lambda x: (x % 3).prod(1), "amax0": lambda x: x.amax(0),
    "amin1": lambda x: x.amin(1), "argmax1": lambda x: x.argmax(1),
    "argmin_all": lambda x: x.argmin(), "any1": lambda x: x.any(1), "all0": lambda x: x.all(0),
    "mean_float": lambda x: x.float().mean(1),
}
BOOL_REDUCTIONS = {
    "any1": lambda x: x.any(1), "all0": lambda x: x.all(0), "sum1": lambda x: x.sum(1),
    "amax0": lambda x: x.amax(0),
}
MOVEMENT = {
    "reshape": lambda x: x.reshape(3, 60), "reshape_split": lambda x: x.reshape(9, 4, 5)[:, 1],
    "view_merge": lambda x: x.reshape(180).view(6, 30).t(), "permute": lambda x: x.t() * 1,
    "expand": lambda x: x[:, :1].expand(9, 7) * 1, "unsqueeze": lambda x: x.unsqueeze(1) * 1,
    "squeeze": lambda x: x[:1].squeeze(0) * 1, "slice_step": lambda x: x[1::2, 3:17:3] * 1,
    "select": lambda x: x[:, 5] * 1, "transpose3d": lambda x: x.reshape(3, 3, 20)
    .transpose(0, 2) * 1, "as_strided": lambda x: torch.as_strided(x.contiguous(), (4, 5),
                                                                    (20, 2)) * 1,
    "flip": lambda x: x.flip(0, 1), "roll": lambda x: x.roll(3, 1),
    "cat0": lambda x: torch.cat([x, x[:2]], 0), "cat1": lambda x: torch.cat([x[:, :3], x], 1),
    "pad": lambda x: torch.nn.functional.pad(x, (2, 1, 0, 3)),
    "pad_crop": lambda x: torch.nn.functional.pad(x, (-2, 1)),
    "repeat": lambda x: x[:2, :3].repeat(2, 3), "tril": lambda x: x.tril(),
    "where_broadcast": lambda x: torch.where(x[:, :1] > x[:1], x[:, :1], x[:1]),
    "index_rows": lambda x: x[torch.tensor([0, 8, 3, 3, -1])],
    "index_columns": lambda x: x[:, torch.tensor([[1, 2], [19, -20]])],
    "index_both": lambda x: x[torch.tensor([1, 2, 8]), torch.tensor([0, 19, 5])],
    "gather": lambda x: torch.gather(x, 1, (torch.arange(9 * 4).reshape(9, 4) * 7) % 20),
    "embedding": lambda x: torch.nn.functional.embedding(torch.tensor([[0, 8], [5, 5]]), x),
    "arange_add": lambda x: x + torch.arange(20).to(x.dtype),
}


def _values(dtype, layout):
    if dtype.is_floating_point:
        tensor = float_values((9, 20), dtype, 3)
    elif dtype == torch.bool:
        tensor = integer_values((9, 20), torch.int64, 3) > 0
    else:
        tensor = integer_values((9, 20), dtype, 3)
    return laid_out(tensor, layout)


def _one_input(ops: dict) -> dict:
    return {name: (lambda x, op=op: op(x)) for name, op in ops.items()}


def _finite(ops: dict) -> dict:
    """Reductions see finite values only where eager's own summation order decides NaN/inf
    cancellation (sum of +inf and -inf) differently from any other order."""
    return {name: (lambda x, op=op: op(torch.nan_to_num(x, 0.0, 10.0, -10.0))) for name, op in
            ops.items()}


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_float_reductions(dtype, layout):
    x = _values(dtype, layout)
    ops = _finite(FLOAT_REDUCTIONS)
    ops.update({"nan_amax": lambda x: x.amax(1), "nan_argmax": lambda x: x.argmax(0),
                "nan_sum": lambda x: x.sum(0)})
    if dtype in (torch.bfloat16, torch.float16):
        for name in ("var_all", "sum_all", "mean_all", "prod1", "logsumexp1"):
            ops.pop(name)  # eager rounds partial sums to the half type; tolerances are per op
    assert run_batch(ops, (x,), dtype) == []


@pytest.mark.parametrize("dtype", FLOATS[2:], ids=str)
def test_half_reductions_against_float64(dtype):
    """Half-type reductions accumulate in float32: compare with a float64 reference."""
    x = _values(dtype, "contiguous").nan_to_num(0.0, 10.0, -10.0)
    graph_ops = {"sum_all": lambda x: x.sum(), "mean_all": lambda x: x.mean(),
                 "var_all": lambda x: x.var(), "logsumexp1": lambda x: torch.logsumexp(x, 1)}
    import inductor
    from tests.inductor.test_op_sweep import _trace_batch
    compiled = inductor.compile_fx(_trace_batch(graph_ops, list(graph_ops), 1), [x])
    for name, got in zip(graph_ops, compiled(x)):
        want = graph_ops[name](x.double())
        torch.testing.assert_close(got.double(), want, atol=2e-2, rtol=1e-2, msg=name)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", INTEGERS + [torch.bool], ids=str)
def test_integer_and_bool_reductions(dtype, layout):
    x = _values(dtype, layout)
    ops = BOOL_REDUCTIONS if dtype == torch.bool else INTEGER_REDUCTIONS
    assert run_batch(_one_input(ops), (x,), dtype) == []


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64,
                                   torch.int8, torch.bool], ids=str)
def test_data_movement(dtype, layout):
    x = _values(dtype, layout)
    ops = _one_input(MOVEMENT)
    if dtype == torch.bool:
        ops.pop("arange_add")
    assert run_batch(ops, (x,), dtype) == []


def test_loops_past_two_to_the_32_use_64_bit_indices():
    """A reduction over 2**32 elements of a broadcast view (no memory behind it); the expected
    count is known, so eager need not spend seconds computing it."""
    import inductor
    from tests.inductor.test_op_sweep import _trace_batch
    x = torch.ones(1, dtype=torch.int64).expand(2 ** 16, 2 ** 16)
    ops = {"count": lambda a: a.sum(), "last_row": lambda a: a[-1].sum()}
    compiled = inductor.compile_fx(_trace_batch(ops, list(ops), 1), [x])
    count, last_row = compiled(x)
    assert count.item() == 2 ** 32 and last_row.item() == 2 ** 16


POOLING = {
    "max3s2p1": lambda x: torch.nn.functional.max_pool2d(x, 3, 2, 1),
    "max2": lambda x: torch.nn.functional.max_pool2d(x, 2),
    "max_ceil": lambda x: torch.nn.functional.max_pool2d(x, 3, 2, 0, ceil_mode=True),
    "max_dilated": lambda x: torch.nn.functional.max_pool2d(x, 2, 1, 0, dilation=2),
    "avg2": lambda x: torch.nn.functional.avg_pool2d(x, 2),
    "avg3p1": lambda x: torch.nn.functional.avg_pool2d(x, 3, 2, 1),
    "avg3p1_without_pad": lambda x: torch.nn.functional.avg_pool2d(x, 3, 2, 1,
                                                                    count_include_pad=False),
    "avg_ceil": lambda x: torch.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
    "avg_divisor": lambda x: torch.nn.functional.avg_pool2d(x, 2, divisor_override=3),
    "adaptive_avg": lambda x: torch.nn.functional.adaptive_avg_pool2d(x, 1),
}


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last],
                         ids=["nchw", "nhwc"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_pooling(dtype, memory_format):
    x = float_values((2, 3, 11, 9), dtype, 4).to(memory_format=memory_format)
    ops = dict(POOLING)
    if dtype == torch.float32:
        ops["max_indices"] = lambda x: torch.nn.functional.max_pool2d(
            x, 3, 2, 1, return_indices=True)[1]
    assert run_batch(_one_input(ops), (x,), dtype) == []


def test_slice_scatter():
    ops = {"strided": lambda x, y: torch.slice_scatter(x, y[:, :3] * 2, 1, 2, 9, 3),
           "rows": lambda x, y: torch.slice_scatter(x, y[1:3], 0, 1, 3),
           "negative": lambda x, y: torch.slice_scatter(x, y[:, -4:], 1, -4)}
    for dtype in (torch.float32, torch.int64):
        assert run_batch(ops, (_values(dtype, "contiguous"), _values(dtype, "transposed")),
                         dtype) == []


@pytest.mark.torch_compile
def test_item_assignment_through_torch_compile_becomes_slice_scatter():
    import inductor

    def assign(x, y):
        out = x.clone()
        out[:, 2:9:3] = y[:, :3] * 2
        out[1:3] = 0.5
        return out
    reports = []

    def backend(gm, example_inputs):
        compiled = inductor.compile_fx(gm, example_inputs)
        reports.append(compiled.report)
        return compiled
    x, y = _values(torch.float32, "contiguous"), _values(torch.float32, "sliced")
    result = torch.compile(assign, backend=backend, dynamic=False)(x, y)
    torch.testing.assert_close(result, assign(x, y), equal_nan=True)
    assert reports and all(report.fallback_ops == {} for report in reports)


SCATTERS = {
    "scatter": lambda x, i: torch.scatter(x, 1, i, x[:, :4] * 2),
    "scatter_value": lambda x, i: torch.scatter(x, 1, i, 1.5),
    "scatter_add": lambda x, i: torch.scatter_add(x, 1, i, x[:, 4:8]),
    "scatter_reduce_sum": lambda x, i: torch.scatter_reduce(x, 0, i[:4], x[:4, :4], "sum"),
    "index_put": lambda x, i: torch.index_put(x, (i[:, 0], i[:, 1]), x[:, 0] * 3),
    "index_put_accumulate": lambda x, i: torch.index_put(x, (i[0],), x[:4] + 1,
                                                         accumulate=True),
    "index_put_columns": lambda x, i: torch.ops.aten.index_put.default(x, [None, i[0]],
                                                                        x[:, 5:9]),
    "index_put_scalar": lambda x, i: torch.index_put(x, (i[:, 2] % 9,), x[0, 0] * 0 + 7),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64],
                         ids=str)
def test_scatter_and_index_put(dtype):
    x = _values(dtype, "contiguous")
    if dtype.is_floating_point:
        x = x.nan_to_num(0.0, 10.0, -10.0)
    index = (torch.arange(9 * 4).reshape(9, 4) * 5) % 9  # repeated positions included
    ops = dict(SCATTERS)
    if not dtype.is_floating_point:
        ops.pop("index_put_scalar")
    assert run_batch(ops, (x, index), dtype) == []
