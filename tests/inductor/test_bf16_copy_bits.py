"""bfloat16 values the C++ backend only moves (copies, `cat`, `where`, pads, gathers) are
stored with eager's bits: a value loaded from a bfloat16 buffer is stored as its bits
(codegen/cpp/ops.py `_exact`, prelude.h `bf16_bits`), not rounded again by `float_to_bf16`,
which made every NaN the quiet 0x7FC0 (eager's copies keep 0xFFFF, 0x7F81, ...).
"""
import pytest
import torch
import torch.nn.functional as F

from tests.inductor.conftest import compile_function

SPECIAL_BITS = [0xFFFF, 0x7F81, 0xFFC1, 0x7FC0, 0x7F80, 0xFF80, 0x8000, 0x0000, 0x0001, 0x8001,
                0x7F7F, 0x3F80]


def _bf16(rows, columns, seed=0):
    generator = torch.Generator().manual_seed(seed)
    bits = torch.randint(-2 ** 15, 2 ** 15, (rows * columns,), generator=generator,
                         dtype=torch.int16)
    bits[:len(SPECIAL_BITS)] = torch.tensor(SPECIAL_BITS, dtype=torch.int32).to(torch.int16)
    return bits.view(torch.bfloat16).view(rows, columns)


FUNCTIONS = {
    "clone": lambda x, y: x.clone(),
    "cat last": lambda x, y: torch.cat([x, y], 1),
    "cat first": lambda x, y: torch.cat([y.t(), x]),
    "where": lambda x, y: torch.where(x > y, x, y),
    "pad": lambda x, y: F.pad(x, (1, 2), value=-3.0),
    "transpose": lambda x, y: x.t().contiguous(),
    "rows": lambda x, y: x[torch.tensor([3, 0, -1])],
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_moved_bfloat16_keeps_its_bits(name):
    function = FUNCTIONS[name]
    x, y = _bf16(12, 12), _bf16(12, 12, seed=1)
    compiled = compile_function(function, x, y)
    expected, actual = function(x, y), compiled(x, y)
    assert actual.dtype == torch.bfloat16
    assert torch.equal(actual.view(torch.int16), expected.view(torch.int16)), \
        (actual.view(torch.int16), expected.view(torch.int16))
