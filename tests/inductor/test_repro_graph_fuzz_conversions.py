"""Repros of the 20,000-graph CPU campaign (seeds 0-19,999, torch 2.11): conversions whose
result C++ leaves to the compiler, on both CPU code generators (Triton under its
interpreter).

- A float -> int32/int64 conversion of NaN or of a value out of range is undefined in C++;
  eager's kernels on x86 give the type's minimum (cvttss2si's "integer indefinite"). GCC's
  vectorised conversion gave 0 (seed 16154: `(bf16 // int32).long()` of a NaN).
- An integer converted to a float had `v == 0 ? 0 : v` appended (against GCC's `trunc` fold
  of a float -> int -> float round trip); on the zero path GCC knew the value and folded
  `0.0f / 0.0f` at compile time to +NaN, where the CPU's division gives -NaN: `signbit(a / a)`
  of int32 zeros was False, eager True (seed 12125).
"""
import pytest
import torch

import inductor
from tests.inductor.conftest import check_same


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def _bits(tensor):
    return tensor.view(torch.int32 if tensor.dtype == torch.float32 else torch.int64)


def test_nan_and_out_of_range_floats_to_integers(cpu_backend):
    """Seed 16154 and its kin: NaN, infinities and values past the range, to every integer
    width, straight and after an arithmetic op."""
    def function(a, b):
        q = a // b
        return (q.long(), q.int(), a.long(), (a * 1e30).int(), (a * 1e30).long(),
                (a * 300).to(torch.int8), (a * 300).to(torch.uint8), q.to(torch.int16))
    a = torch.tensor([[-0.90625, -0.66796875], [0.0, -0.08935546875],
                      [-0.58203125, float("inf")], [-1.09375, 0.0],
                      [float("nan"), 0.46484375], [-0.08740234375, -1.625]],
                     dtype=torch.bfloat16)
    b = torch.tensor([[8], [6], [-8], [-8], [2], [-8]], dtype=torch.int32)
    check_same(function, a, b)
    check_same(function, a.double(), b)


def test_sign_of_nan_from_integer_zeros(cpu_backend):
    """Seed 12125: the NaN of 0 / 0 has its sign bit set on x86, in eager."""
    def function(a):
        q = a / a
        return (torch.signbit(q), torch.copysign(torch.ones_like(q), q))
    a = torch.tensor([[0, 1, -2, 0], [3, 0, 0, -7]], dtype=torch.int32)
    check_same(function, a)
    check_same(function, a.long())


def test_integer_to_float_keeps_no_negative_zero(cpu_backend):
    """Class 29's case with the new +0.0: -0.3 -> int64 -> float is +0.0, so x / it is +inf."""
    def function(x, y):
        z = y.to(torch.int64).to(torch.float32)
        return (x / z, torch.signbit(z))
    check_same(function, torch.ones(8), torch.tensor([-0.3, 0.3, -1.5, 2.5, -0.0, 0.0, -7.9, 1]))
