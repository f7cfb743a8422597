"""Max/min along rows of bfloat16 and float16 values on the C++ backend: the lane update of
accumulators fed by widened half-precision loads (`reductions._nan_first`, 16 lanes) against
eager, bit for bit, with NaN, infinities, signed zeros and ties; and the form it prints.

`_nan_sticky`'s update kept g++ 12 from vectorising such loops (bf16 rows of 256: amax 5.5x,
softmax 3x eager's time); the two-select form vectorises. Results must not change."""
import pytest
import torch

import dynamo
from inductor.codegen.cpp import reductions

DTYPES = [torch.bfloat16, torch.float16]
ROWS = [16, 64, 256, 1024]     # 16 lanes below 1024 elements a row, 64 from there


def _rows(dtype, length):
    generator = torch.Generator().manual_seed(length)
    values = torch.randn(8, length, generator=generator).to(dtype)
    values[1, length // 3] = float("nan")
    values[2] = float("-inf")
    values[3, : length // 2] = -0.0
    values[3, length // 2:] = 0.0
    values[4, -1] = float("inf")
    values[5, 0] = float("nan")
    values[5, -1] = float("inf")
    values[6] = values[6].abs().neg()       # ties at a row's largest value
    values[6, ::5] = values[6].max()
    return values


def _same(actual, expected):
    """Bit for bit but the sign of a zero (FINDINGS.md P34: eager's sign of a max of -0.0 and
    +0.0 depends on the element's position and its vector width)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    nan = expected.isnan()
    assert torch.equal(actual.isnan(), nan)
    bits = torch.int16 if expected.dtype in DTYPES else torch.int32
    compared = ~nan & (expected != 0)
    assert torch.equal(actual[compared].view(bits), expected[compared].view(bits))
    assert torch.equal(actual[expected == 0], expected[expected == 0])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("length", ROWS)
@pytest.mark.parametrize("name", ["amax", "amin", "softmax", "log_softmax", "max_values"])
def test_half_rows_reduce_as_eager(name, length, dtype):
    function = {
        "amax": lambda x: x.amax(1),
        "amin": lambda x: x.amin(-1, keepdim=True),
        "softmax": lambda x: torch.softmax(x, 1),
        "log_softmax": lambda x: torch.log_softmax(x.float(), 1),
        "max_values": lambda x: x.max(1).values * 2,
    }[name]
    values = _rows(dtype, length)
    actual, expected = dynamo.jit(function, backend="inductor")(values), function(values)
    if "softmax" in name:   # exp and log: eager's VML to the ulp, not to the bit
        torch.testing.assert_close(actual, expected, equal_nan=True)
    else:
        _same(actual, expected)


def test_widened_sixteen_lane_accumulators_update_with_two_selects():
    widened = reductions.Accumulator("m", "max", torch.float32, 16, widened=True)
    assert widened.update_lane("v", "0", "i") == [
        "m_lanes[0] = v != v ? v : (v > m_lanes[0] ? v : m_lanes[0]);"]
    for accumulator in (reductions.Accumulator("m", "max", torch.float32, 64, widened=True),
                        reductions.Accumulator("m", "max", torch.float32, 16)):
        assert "__builtin_bit_cast" in accumulator.update_lane("v", "0", "i")[0]
