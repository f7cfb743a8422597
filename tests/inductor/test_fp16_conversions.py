"""float16 on the C++ backend: stored as `uint16_t`, converted by prelude.h's `half_to_float`,
`float_to_half`, `half_bits` and `half_quiet` (integer and float operations that g++
vectorises; `_Float16` conversions ran the whole loop scalar through libgcc, float16
pointwise/reductions/softmax 4-67x eager's time).

Conversions against eager bit for bit: every one of the 65536 halves to float32, copies
(a signalling NaN kept), float32 to float16 over every half, the midpoints between
neighbouring halves (ties to even) and their neighbours, overflow, subnormals, NaN payloads
and random float bits. Eager's vectorised kernels quiet a NaN and keep its sign and the top
of its payload (F16C's vcvtps2ph); its scalar tail differs (the half 0x7C01 became
0x7FFFFFFF), so the sizes here are multiples of 64. Then float16 pointwise, reductions and
softmax against eager at float16's tolerances, and the built library: no libgcc `_Float16`
helper (`__extendhfsf2`, `__truncsfhf2`, `__eqhf2`) among its undefined symbols.
"""
import os
import shutil
import subprocess

import pytest
import torch
import torch.nn.functional as F

import inductor
from tests.inductor.conftest import check_same, compile_function

HALF_HELPERS = {"__extendhfsf2", "__truncsfhf2", "__eqhf2", "__nehf2", "__unordhf2"}


@pytest.fixture(autouse=True)
def _cpp(monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", "cpp")


def _all_halves():
    return torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(torch.int16) \
        .view(torch.float16).reshape(256, 256)


def _padded(values: torch.Tensor) -> torch.Tensor:
    """`values` (1-d float32) padded with zeros to a multiple of 64, as rows of 64."""
    extra = -values.numel() % 64
    return torch.cat([values, values.new_zeros(extra)]).reshape(-1, 64)


def _bits_equal(actual, expected):
    bits = torch.int16 if expected.dtype == torch.float16 else torch.int32
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    differ = actual.view(bits) != expected.view(bits)
    assert not differ.any(), (actual[differ][:8], expected[differ][:8],
                              int(differ.sum()))


@pytest.mark.parametrize("name", ["to float32", "clone", "cat", "where", "float round trip"])
def test_every_half(name):
    function = {"to float32": lambda x: x.float(), "clone": lambda x: x.clone(),
                "cat": lambda x: torch.cat([x, x.flip(0)], 1),
                "where": lambda x: torch.where(x.float() > 0, x, x.flip(1)),
                "float round trip": lambda x: (x.float() * 1).half()}[name]
    x = _all_halves()
    _bits_equal(compile_function(function, x)(x), function(x))


def _float_sweep():
    halves = _all_halves().reshape(-1).float()
    finite = halves[halves.isfinite()].double().unique()
    middle = ((finite[1:] + finite[:-1]) / 2).float()    # ties: round to the even one
    up, down = torch.tensor(float("inf")), torch.tensor(-float("inf"))
    generator = torch.Generator().manual_seed(0)
    random_bits = torch.randint(-2 ** 31, 2 ** 31, (1 << 20,), generator=generator,
                                dtype=torch.int64).to(torch.int32).view(torch.float32)
    nan_bits = torch.tensor([0x7FC00000, 0x7FC00001, 0x7F800001, 0x7F802000, 0xFFC12345,
                             0x7FFFFFFF, 0xFFFFFFFF, 0x7FBFFFFF], dtype=torch.int64) \
        .to(torch.int32).view(torch.float32)
    edges = torch.tensor([65504.0, 65519.996, 65520.0, 65536.0, 1e38, 2 ** -24, 2 ** -25,
                          3 * 2 ** -26, 2 ** -26, 1e-45, 2 ** -14, 2 ** -14 - 2 ** -25,
                          float("inf"), 0.0])
    return torch.cat([halves, middle, middle.nextafter(up), middle.nextafter(down),
                      -middle, random_bits, nan_bits, edges, -edges])


@pytest.mark.parametrize("name", ["half", "half_round", "to bfloat16"])
def test_float32_to_float16(name):
    function = {"half": lambda y: y.half(),
                "half_round": lambda y: y.half().float() * 1,
                "to bfloat16": lambda y: y.half().bfloat16()}[name]
    y = _padded(_float_sweep())
    _bits_equal(compile_function(function, y)(y), function(y))


def _randn(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).half()


POINTWISE = {
    "mul add": lambda x, y: x * 2 + 1,
    "maximum": lambda x, y: torch.maximum(x, y),
    "minimum with nan": lambda x, y: torch.minimum(x, y.masked_fill(y > 1.5, float("nan"))),
    "gelu": lambda x, y: F.gelu(x + y),
    "exp": lambda x, y: torch.exp(x) - y,
    "mixed float32": lambda x, y: x * y.float(),
    "isnan": lambda x, y: (x / (y - y)).isnan(),
    "clamp": lambda x, y: x.clamp(-0.5, 0.5) + y.abs(),
}
REDUCTIONS = {
    "sum1": lambda x: x.sum(1), "sum0": lambda x: x.sum(0), "mean": lambda x: x.mean(1),
    "amax1": lambda x: x.amax(1), "amin0": lambda x: x.amin(0),
    "softmax1": lambda x: x.softmax(1), "log_softmax1": lambda x: x.log_softmax(1),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
}


@pytest.mark.parametrize("shape", [(67, 129)])
@pytest.mark.parametrize("name", list(POINTWISE))
def test_pointwise_matches_eager(name, shape):
    check_same(POINTWISE[name], _randn(*shape), _randn(*shape, seed=1))


@pytest.mark.parametrize("shape", [(67, 129), (8, 1024)])
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions_match_eager(name, shape):
    x = _randn(*shape)
    x[3, 5] = float("inf")
    if name.startswith(("amax", "amin")):     # bit for bit; a NaN as NaN (its bits are
        x[1, 2] = float("nan")                  # eager's vector width's: 0x7E00 or 0xFFFF)
        actual, expected = compile_function(REDUCTIONS[name], x)(x), REDUCTIONS[name](x)
        assert torch.equal(actual.isnan(), expected.isnan())
        _bits_equal(actual.nan_to_num(0.0), expected.nan_to_num(0.0))
    else:
        check_same(REDUCTIONS[name], x)


def _built_libraries(action) -> set:
    root = os.path.join(inductor.config.cache_dir, "cpp")

    def libraries():
        return {os.path.join(folder, name) for folder, _, names in os.walk(root)
                for name in names if name.endswith(".so")}
    before = libraries()
    action()
    return libraries() - before


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_no_libgcc_half_helpers():
    def function(x, y):
        return (torch.maximum(x * 3 - 1, y).softmax(1) + x.float().sum(1, keepdim=True)).half()

    x, y = _randn(33, 97, seed=2), _randn(33, 97, seed=3)
    libraries = _built_libraries(lambda: check_same(function, x, y))
    assert libraries, "no C++ library was built (a cached one would hide the check)"
    for library in libraries:
        listing = subprocess.run(["nm", "-D", "--undefined-only", library], capture_output=True,
                                 text=True, check=True).stdout
        symbols = {line.split()[-1].split("@")[0] for line in listing.splitlines() if line}
        assert not symbols & HALF_HELPERS, (library, sorted(symbols & HALF_HELPERS))


def _has_f16c_variants() -> bool:
    """prelude.h defines the F16C vector variants for AVX2 with F16C, not AVX-512."""
    from inductor.runtime.build import cpu_flags
    flags = cpu_flags().split()
    return "f16c" in flags and "avx2" in flags and "avx512f" not in flags


@pytest.mark.skipif(shutil.which("objdump") is None or not _has_f16c_variants(),
                    reason="needs binutils' objdump and a CPU with F16C and AVX2, no AVX-512")
def test_f16c_conversions_in_vector_loops():
    """`x * 2 + 1` over every half, bit for bit: its loop converts with vcvtph2ps/vcvtps2ph
    (through the vector variants, lines.py), a signalling NaN copied as eager copies it."""
    def function(x):
        return x * 2 + 1, x.clone(), x.float()

    x = _all_halves().reshape(512, 128)
    results = []
    libraries = _built_libraries(lambda: results.extend(compile_function(function, x)(x)))
    assert libraries, "no C++ library was built (a cached one would hide the check)"
    for actual, expected in zip(results, function(x)):
        _bits_equal(actual, expected)
    text = "".join(subprocess.run(["objdump", "-d", library], capture_output=True, text=True,
                                  check=True).stdout for library in libraries)
    assert "vcvtph2ps" in text and "vcvtps2ph" in text


def test_f16c_scalar_tails():
    """Lengths that leave a scalar tail (its software conversions) after the vector loop."""
    for length in (1, 7, 9, 15, 17, 1003):
        x = torch.linspace(-70000, 70000, length).half()
        check_same(lambda v: (v * 3 - 1).half() * v, x)
        _bits_equal(compile_function(lambda v: v * 2 + 1, x)(x), x * 2 + 1)
