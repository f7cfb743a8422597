"""float32 -> bfloat16 of a NaN (docs/inductor.md, "Not bit for bit, and why"): the C++ kernels
give the quiet 0x7FC0 for every NaN, where eager's bits depend on the ATen kernel, its vector
body or scalar tail, the tensor's rank and ATen's CPU capability. The first test pins ours;
the second pins the eager behaviour the docs describe (if torch makes it uniform, a bitwise
comparison becomes possible: revisit `float_to_bf16` in codegen/cpp/prelude.h)."""
import pytest
import torch

from tests.inductor.conftest import compile_function

NAN_BITS = [0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFC12345, 0x7F812345, 0xFFFFFFFF]


def _nans(count: int) -> torch.Tensor:
    words = torch.tensor(NAN_BITS * count, dtype=torch.int64).to(torch.int32)
    return words.view(torch.float32)


def _bits(value: torch.Tensor) -> set:
    return {bits & 0xFFFF for bits in value.reshape(-1).view(torch.int16).tolist()}


def test_ours_are_the_quiet_nan(fixed_machine_settings):
    def cast(x):
        return x.to(torch.bfloat16)
    x = _nans(7)
    got = compile_function(cast, x)(x)
    assert got.isnan().all() and _bits(got) == {0x7FC0}


@pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() == "DEFAULT",
                    reason="ATen's scalar kernels give 0x7FC0 throughout")
def test_eager_bits_depend_on_the_kernel():
    x = _nans(7)
    assert _bits(x.to(torch.bfloat16)) == {0xFFFF}             # vectorised conversion
    assert _bits(x[0].to(torch.bfloat16)) == {0x7FC0}          # a 0-d tensor: scalar
    short = torch.zeros(8, dtype=torch.bfloat16)
    assert _bits(short / short) == {0x7FC0}                    # a binary op's scalar loop
    long = torch.zeros(64, dtype=torch.bfloat16)
    assert _bits(long / long) == {0xFFFF}                      # its vector body
