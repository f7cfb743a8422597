"""Integer and bool arithmetic as eager's CUDA kernels compute it (H100 graph-fuzzer campaign at
9a472b4, tests/fuzz/graphs/FINDINGS.md "CUDA campaign"): an integer divided by zero (eager's
CUDA kernels give the hardware's all-ones quotient, not an error; the compiled kernels gave 0:
6 failing graphs) and the sum of two bools (Triton's int1 addition wraps: True + True was
False: 4 failing graphs).

The division helpers' zero-divisor values are also checked without a GPU, by running the
generated prelude under Triton's interpreter against the table measured on the H100.
"""
import importlib.util

import pytest
import torch

import inductor
from inductor.codegen.triton.prelude import PRELUDE
from inductor.ir.primitives import BY_NAME
from tests.triton.conftest import DEVICES

HELPERS = {"floordiv": "jit_floordiv_int", "truncdiv": "jit_truncdiv_int",
           "remainder": "jit_remainder_int", "fmod": "jit_fmod_int"}
# the divisions' torch references, from the table of primitives
DIVISIONS = {name: BY_NAME[name].reference for name in HELPERS}
INTEGERS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]


def dividends(dtype) -> torch.Tensor:
    info = torch.iinfo(dtype)
    values = [info.min, info.min + 1, -1000, -7, -2, -1, 0, 1, 2, 7, 1000, info.max - 1,
              info.max, 2 ** 32 - 1, 2 ** 32, 2 ** 40]
    return torch.tensor([value for value in values if info.min <= value <= info.max],
                        dtype=torch.int64).to(dtype)


def eager_cuda_by_zero(division: str, dividend: int, dtype) -> int:
    """What eager's CUDA kernels return for `dividend` divided by zero (measured on an H100,
    torch 2.11): all ones in the int32 they compute 8- to 32-bit types in; for int64, the
    32-bit division's all ones (4294967295) where the dividend fits in 32 unsigned bits, else
    -1; floor division one less for a negative dividend."""
    if dtype == torch.int64:
        ones = 4294967295 if 0 <= dividend <= 4294967295 else -1
    else:
        ones = torch.tensor(-1, dtype=torch.int32).to(dtype).item()
    return ones - 1 if division == "floordiv" and dividend < 0 else ones


@pytest.fixture(scope="module")
def probe_module(tmp_path_factory):
    """The prelude and a kernel applying one helper, loaded for Triton's interpreter."""
    from inductor.runtime.triton_interpret import interpreting
    branches = "\n".join(f"    {'if' if position == 0 else 'elif'} OP == {position}:\n"
                         f"        result = {helper}(a, b)"
                         for position, helper in enumerate(HELPERS.values()))
    source = PRELUDE + f'''

@triton.jit
def probe(a_pointer, b_pointer, out_pointer, OP: tl.constexpr, N: tl.constexpr):
    index = tl.arange(0, N)
    a = tl.load(a_pointer + index)
    b = tl.load(b_pointer + index)
{branches}
    tl.store(out_pointer + index, result)
'''
    path = tmp_path_factory.mktemp("probe") / "integer_probe.py"
    path.write_text(source)
    with interpreting():
        spec = importlib.util.spec_from_file_location("integer_probe", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
@pytest.mark.parametrize("division", list(DIVISIONS))
def test_helpers_divide_by_zero_as_eager_cuda(probe_module, division, dtype):
    import os
    a = torch.zeros(16, dtype=dtype)
    values = dividends(dtype)
    a[:len(values)] = values
    b = torch.zeros(16, dtype=dtype)
    out = torch.empty(16, dtype=dtype)
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        probe_module.probe[(1,)](a, b, out, OP=list(DIVISIONS).index(division), N=16)
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved
    expected = [eager_cuda_by_zero(division, value, dtype) for value in a.tolist()]
    assert out.tolist() == torch.tensor(expected).to(dtype).tolist()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
@pytest.mark.parametrize("division", list(DIVISIONS))
def test_division_by_zero_on_cuda_is_eagers(division, dtype):
    """H100 seeds 234, 330, 854, 1018, 1155, 1238 (`x % x` with zeros: 0 where eager has -1,
    255, 4294967295)."""
    divide = DIVISIONS[division]
    a = dividends(dtype).cuda()
    b = torch.tensor([0, -1, 3, 0] * 4, dtype=dtype)[:len(a)].cuda() if dtype != torch.uint8 \
        else torch.tensor([0, 3, 0, 7] * 4, dtype=dtype)[:len(a)].cuda()
    function = lambda a, b: (divide(a, b), divide(a, a), divide(a, 0))  # noqa: E731
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [a, b])
    for got, want in zip(compiled(a, b), function(a, b)):
        assert torch.equal(got, want), (got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_sum_of_bools(device):
    """H100 seeds 209, 302, 491, 588: `x + y` and `x.add_(y)` of bools gave False for
    True + True (Triton's int1 addition wraps)."""
    def function(a, b):
        x, y = a > 0, b > 0
        z = a < 1
        z.add_(y)
        return x + y, (x + y).to(torch.int32), torch.add(x, y, alpha=True), x + True, z
    a = torch.randn(64, device=device)
    b = torch.randn(64, device=device)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [a, b])
    for got, want in zip(compiled(a, b), function(a, b)):
        assert torch.equal(got, want), (got, want)
