"""int64 <-> float32 conversions in the C++ backend: the same bits as eager's casts, and
whether the loops around them keep their vector form.

The values are compared bit for bit with eager (every exponent, the rounding midpoints of
float, NaN, infinities, out-of-range floats). Without AVX-512 DQ, GCC has no vector form for
a 64-bit integer cast, and a loop with one runs scalar whole (T5's position bucket:
docs/performance-notes.md, T5, Left). Float -> int64 is built from the float's bits there
(prelude.h, jit_float_bits_to_int64), which vectorises. The vector form is read from the built
library's symbols, as in test_vector_math_symbols.py: a libmvec function in the same loop
appears as its vector variant only where the loop is vectorised. Int64 -> float32 is built
there from 64-bit integer and float64 lane operations (prelude.h, jit_int64_to_float: values
beyond 2^53 rounded to odd at 2^11, then converted exactly to float64 from the two 32-bit
halves, then to float), exact for every int64 (the rounding midpoints above 2^53 included).
A loop that only loads, converts and stores keeps the scalar cast (lines.py), which is
faster there: both forms are compared with eager. An earlier helper of 64-bit selects was
exact but slower in T5's bucket, whose third loop stayed scalar.
"""
import shutil

import numpy as np
import pytest
import torch

import inductor
from inductor.runtime.build import cpu_flags, has_vector_math
from tests.inductor.conftest import check_same
from tests.inductor.test_vector_math_symbols import _built_libraries, _undefined


def _integers() -> torch.Tensor:
    generator = np.random.default_rng(0)
    parts = [generator.integers(-2**63, 2**63 - 1, 200_000, dtype=np.int64, endpoint=True)]
    for exponent in range(63):
        values = generator.integers(0, 2**62, 2_000, dtype=np.int64)
        values = values >> np.int64(62 - exponent) if exponent < 62 else values * 2
        parts += [values, -values]
    midpoints = [(1 << e) + (1 << (e - 24)) + d for e in range(25, 63) for d in (-2, -1, 0, 1, 2)]
    midpoints = [value for value in midpoints if value < 2**63]
    edges = [0, 1, -1, 2**24 + 1, 2**53, 2**53 + 1, -2**53 - 1, 2**54 + 2**30 + 1,
             2**54 + 2**30, 2**63 - 1, -2**63, -2**63 + 1]
    parts += [np.array(midpoints, np.int64), -np.array(midpoints, np.int64),
              np.array(edges, np.int64)]
    return torch.from_numpy(np.concatenate(parts))


def _floats() -> torch.Tensor:
    generator = np.random.default_rng(1)
    bits = generator.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0.0, -0.0, 0.5, -0.5, 0.999, -0.999, 2**31, -2**31, 2**31 - 128,
                      -2**31 + 128, 2**31 + 256, 2**62 * 1.5, -2**62 * 1.5, 2**63, -2**63,
                      2**64, -2**64, np.inf, -np.inf, np.nan, 1e-45, 3e38, -3e38],
                     np.float32)
    below = np.nextafter(np.array([2**63, -2**63, 2**31, -2**31], np.float32), np.float32(0))
    uniform = generator.uniform(-2**40, 2**40, 100_000).astype(np.float32)
    return torch.from_numpy(np.concatenate([bits.view(np.float32), edges, below, uniform]))


def _kernels(compiled) -> str:
    return compiled.report.source.split("call.with_argument_list")[-1]


@pytest.mark.parametrize("form", ["alone", "beside arithmetic"])
def test_int64_to_float32_matches_eager_bit_for_bit(monkeypatch, form):
    # Alone, the loop keeps the scalar cast (lines.py); beside other work, the vectorisable
    # helper (`* 2` is exact: the product's bits are the conversion's).
    monkeypatch.setattr(inductor.config, "cpu_backend", "cpp")
    function = (lambda x: x.to(torch.float32)) if form == "alone" else \
        (lambda x: x.to(torch.float32) * 2)
    compiled = check_same(function, _integers())
    values = _integers()
    assert torch.equal(compiled(values).view(torch.int32), function(values).view(torch.int32))
    helper = "jit_int64_to_float(" in _kernels(compiled)
    assert helper == (form != "alone"), _kernels(compiled)


def test_float32_to_int64_matches_eager():
    # check_same compares exactly for integer results: NaN, infinities and floats outside
    # int64 give eager's INT64_MIN.
    check_same(lambda x: x.to(torch.int64), _floats())


def test_conversions_in_arithmetic_match_eager():
    def bucket(x):
        scaled = torch.log(x.abs().float() / 8 + 1) * 4
        return scaled.to(torch.int64) + x, (x * 3).float() / 7

    check_same(bucket, torch.arange(-1000, 1000, 3))


def _doubles() -> torch.Tensor:
    generator = np.random.default_rng(2)
    bits = generator.integers(0, 2**63, 200_000, dtype=np.int64).view(np.float64)
    edges = np.array([0.0, -0.0, 0.5, -0.5, 1 - 2**-53, 2**52 + 0.5, -2**52 - 0.5, 2**53 + 2,
                      2**62 * 1.5, 2**63, -2**63, 2**64, -2**64, np.inf, -np.inf, np.nan,
                      5e-324, 1e308, -1e308], np.float64)
    below = np.nextafter(np.array([2**63, -2**63, 2**31, -2**31]), 0.0)
    uniform = generator.uniform(-2**62, 2**62, 50_000)
    return torch.from_numpy(np.concatenate([bits, -bits, edges, below, uniform]))


def test_float64_to_int64_matches_eager():
    # x86 without AVX-512 DQ converts from the bits (prelude.h, jit_float_bits_to_int64)
    check_same(lambda x: x.to(torch.int64), _doubles())


def test_half_floats_to_int64_match_eager():
    values = _floats()
    check_same(lambda x: x.to(torch.bfloat16).to(torch.int64), values)
    check_same(lambda x: x.to(torch.float16).to(torch.int64), values)


_NO_DQ = "avx512dq" not in cpu_flags().split()


@pytest.mark.skipif(shutil.which("nm") is None or not has_vector_math(),
                    reason="needs binutils' nm and glibc's libmvec")
@pytest.mark.parametrize("direction", [
    "int64 to float32",    # without DQ: 64-bit lane operations (prelude.h, jit_int64_to_float)
    "float32 to int64"])   # from the float's bits without DQ (prelude.h)
def test_loops_with_int64_conversions_are_vectorised(monkeypatch, direction):
    monkeypatch.setattr(inductor.config, "cpu_backend", "cpp")
    monkeypatch.setattr(inductor.config, "eager_transcendentals", False)   # libmvec symbols
    if direction == "int64 to float32":
        def function(x):
            return torch.exp(x.float() / 1024)
        inputs = (torch.arange(-5000, 5003),)
    else:
        def function(x):   # one loop: the conversion beside a libmvec call
            return (x * 100).to(torch.int64), torch.exp(x)
        inputs = (torch.linspace(-4, 4, 10003),)
    libraries = _built_libraries(lambda: check_same(function, *inputs, atol=1e-6, rtol=1e-6))
    assert libraries, "no C++ library was built (a cached one would hide the check)"
    symbols = set().union(*(_undefined(library) for library in libraries))
    vector = sorted(symbol for symbol in symbols if symbol.startswith("_ZGV") and "expf" in symbol)
    assert vector, (cpu_flags(), sorted(symbols))
