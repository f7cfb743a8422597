"""Program fuzzer seed 23912 and graph fuzzer seeds 5415 and 3007 (C++ only, silent wrong
values): eager's CPU kernels compute exp, log, log2, log10, sqrt, sin, cos, tan, tanh, asin,
acos, atan, erf and erfc of float32 and float64 with MKL's vector math library (VML, in
libtorch_cpu.so); the C++ kernels called glibc's libmvec, an ulp away on about half of the
values (`cos(-0.25)` 0.96891248 against eager's 0.96891242, grown to 4e-4 through mm,
addcmul and sin; `log_softmax(a.exp_())` 1.3 ulp off; equal log2 inputs ordered differently
by a stable argsort on AVX-512 hosts). The user's calls of these ops now reach the kernels as
`framejit.vml` (inductor/vml.py) and the C++ code calls VML itself, in blocks
(codegen/cpp/vml_blocks.py): bit for bit eager's values, in vectorised bodies and tails,
contiguous or not, fused or not. A decomposition's own exp (softmax, ...) keeps its path."""
import pytest
import torch

import dynamo
import inductor
from inductor.decompose import trace_aten
from inductor.ir.ops import VML_FUNCTIONS
from inductor.runtime.build import vml_library
from inductor.vml import VML
from tests.inductor.conftest import compile_function

needs_vml = pytest.mark.skipif(vml_library() is None,
                               reason="torch has no MKL VML here (the C++ kernels use libmvec)")
SPECIALS = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40, -1e-40, 1e-310,
            -1e-310, 1e30, -1e30, 1e300, -1e300, 3.4e38, 1.0, -1.0, 0.5, 2.0, 1e4, 1e6, 1e18]


@pytest.fixture
def cpp(monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", "cpp")
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)


def values(count: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    parts = [torch.randn(count, generator=generator, dtype=torch.float64) * 4,
             torch.rand(count, generator=generator, dtype=torch.float64) * 2 - 1,
             torch.randn(count, generator=generator, dtype=torch.float64) * 1e5]
    mixed = torch.stack(parts, 1).flatten()[:count]
    return torch.cat([torch.tensor(SPECIALS, dtype=torch.float64), mixed]).to(dtype)[:count]


def assert_bitwise(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    bits = torch.int32 if actual.dtype == torch.float32 else torch.int64
    same = (actual.view(bits) == expected.view(bits)) | (actual.isnan() & expected.isnan())
    assert bool(same.all()), f"{int((~same).sum())} of {same.numel()} values differ: " \
        f"{actual[~same][:4].tolist()} against eager's {expected[~same][:4].tolist()}"


def every_op(x):
    return tuple(getattr(torch, name)(x) for name in VML_FUNCTIONS)


@needs_vml
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("length", [1, 3, 7, 8, 9, 17, 31, 70, 513, 4099])
def test_every_op_bitwise_with_tails(cpp, dtype, length):
    x = values(length, dtype, seed=length)
    actual = compile_function(every_op, x)(x)
    for got, want in zip(actual, every_op(x)):
        assert_bitwise(got, want)


@needs_vml
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_non_contiguous_and_fused(cpp, dtype):
    x = values(3 * 1000, dtype).reshape(1000, 3)

    def function(a):
        columns = a[:, 1]
        return every_op(columns) + (torch.cos(a * 2 + 1), torch.exp(torch.sin(a.t())) * a.t(),
                                    torch.log(a.abs() + 0.25).sum(1))
    actual, expected = compile_function(function, x)(x), function(x)
    for got, want in zip(actual[:-1], expected[:-1]):
        assert_bitwise(got, want)
    # a VML call inside a reduction loop (called per lane there): exact terms, eager's order
    # of summation may differ
    torch.testing.assert_close(actual[-1], expected[-1], rtol=1e-6, atol=0, equal_nan=True)


def test_decompositions_keep_their_own_exp():
    """Only the user's ops are marked: softmax's exp (eager's own vectorised code) is not."""
    x = torch.randn(4, 8)

    def function(a):
        return torch.softmax(a, -1), torch.exp(a), torch.cos(a.double()), \
            torch.exp(a.to(torch.bfloat16))
    graph = trace_aten(torch.fx.symbolic_trace(function), [x]).module.graph
    marked = [node.args[1] for node in graph.nodes if node.target is VML]
    plain = [node.target for node in graph.nodes if node.target is torch.ops.aten.exp.default]
    assert marked == ["exp", "cos"]
    assert len(plain) == 2     # softmax's, and the bfloat16 one (eager: float code, not VML)


def test_eager_transcendentals_off_marks_nothing(monkeypatch):
    """`config.eager_transcendentals = False` keeps the plain ops (libmvec's speed)."""
    monkeypatch.setattr(inductor.config, "eager_transcendentals", False)
    graph = trace_aten(torch.fx.symbolic_trace(lambda a: torch.exp(a).cos()),
                       [torch.randn(4, 8)]).module.graph
    assert not any(node.target is VML for node in graph.nodes)
    assert sum(node.target in (torch.ops.aten.exp.default, torch.ops.aten.cos.default)
               for node in graph.nodes) == 2


def test_logsumexp_is_eager_vml_ops():
    """Eager's logsumexp kernel is `(self - maxes).exp_()`, a sum and `log_()`: VML calls."""
    graph = trace_aten(torch.fx.symbolic_trace(lambda a: torch.logsumexp(a, 1)),
                       [torch.randn(4, 8)]).module.graph
    assert [node.args[1] for node in graph.nodes if node.target is VML] == ["exp", "log"]


# graph fuzzer seed 5415's input (call 1)
SEED_5415 = (
    [[[-4.508121013641357, 1.2857338190078735, -1.081024169921875, 1.386999249458313,
    0.8717288970947266, 3.443977117538452], [-2.872143507003784, 3.9087090492248535,
    1.9424188137054443, -2.763185977935791, -2.9689128398895264, -3.340883255004883],
    [1.3516713380813599, -3.54840087890625, 1.2440567016601562, -0.26069873571395874,
    1.5117164850234985, 0.870654284954071], [-2.288928270339966, -2.5784614086151123,
    1.2912825345993042, -1.1167926788330078, -2.255643844604492, -2.0187487602233887],
    [-0.12144758552312851, 8.410171508789062, 0.8306304812431335, -2.3801498413085938,
    -7.685422897338867, -1.8435348272323608], [1.2598373889923096, 2.4581170082092285,
    0.951378345489502, -6.972813129425049, -6.906181335449219, -1.0122538805007935]]],
    (1, 6, 6))


@needs_vml
def test_seed_5415_exp_in_place_then_log_softmax(cpp):
    """`a.exp_()` is eager's VML exp bit for bit, and log_softmax's largest entry 0.0 (it was
    -3.05e-05: the libmvec exp was 1.3 ulp off)."""
    def function(a):
        a.exp_()
        return torch.log_softmax(a, 1)
    x = torch.tensor(SEED_5415[0]).reshape(SEED_5415[1])
    eager_input, compiled_input = x.clone(), x.clone()
    expected = function(eager_input)
    actual = compile_function(function, compiled_input)(compiled_input)
    assert_bitwise(compiled_input, eager_input)
    torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("generator", ["eager", "cpp", "triton"])
def test_seed_23912_cos_of_a_quarter(generator, monkeypatch):
    """`cos(-0.25)` through dynamo: eager's 0.96891242 (VML), not libmvec's 0.96891248."""
    if generator != "eager":
        monkeypatch.setattr(inductor.config, "cpu_backend", generator)
    if generator == "cpp" and vml_library() is None:
        pytest.skip("torch has no MKL VML here")

    def function(a):
        return torch.cos(a) * 1000
    a = torch.tensor([-0.25, 0.25, 1.75, -2.0, 0.5])
    expected = function(a)
    actual = dynamo.jit(function, backend="eager" if generator == "eager" else "inductor")(a)
    if generator == "triton":       # Triton computes cos its own way: near, not exact
        torch.testing.assert_close(actual, expected)
    else:
        assert_bitwise(actual, expected)


def test_without_vml_kernels_keep_libm(cpp, monkeypatch):
    """Where torch has no MKL VML (aarch64 wheels), the marked ops compile to libm/libmvec as
    before: no VML declaration, no `-DJIT_VML` (part of the cache key), close values."""
    from inductor.codegen.cpp import ops as cpp_ops
    from inductor.runtime import build
    monkeypatch.setattr(build, "vml_library", lambda: None)
    monkeypatch.setattr(cpp_ops, "vml_library", lambda: None)
    assert "-DJIT_VML" not in build.compile_flags()
    x = values(100, torch.float32)
    compiled = compile_function(every_op, x)
    assert "jit_vml" not in compiled.report.source and "expf(" in compiled.report.source
    for got, want in zip(compiled(x), every_op(x)):
        torch.testing.assert_close(got, want, equal_nan=True)


@needs_vml
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_vector_variants_bitwise(cpp, monkeypatch, dtype):
    """Loops left unblocked (collapsed parallel loops) call the vector-ABI variants that
    prelude.h defines (one VML call per 4, 8 or 16 lanes, and scalar calls in tails)."""
    from inductor.codegen.cpp import lines
    monkeypatch.setattr(lines, "strip_mine", lambda *arguments: None)
    for length in (5, 16, 37, 1000):
        x = values(length, dtype, seed=length)
        compiled = compile_function(every_op, x)
        assert "_block(" not in compiled.report.source
        for got, want in zip(compiled(x), every_op(x)):
            assert_bitwise(got, want)


@needs_vml
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_vml_values_do_not_depend_on_position(dtype):
    """The kernels call VML on blocks of 512, on 4 to 16 lanes or on one value, where eager
    calls it on whole rows: that gives eager's bits only if VML's value of an element does
    not depend on where it sits in the call (graph fuzzer seed 3007 on AVX-512: equal log2
    inputs at different positions). Checked on this host's VML code path, per function."""
    import ctypes
    from inductor.codegen.cpp.source import VML_NAMES
    prefix = "vms" if dtype == torch.float32 else "vmd"
    x = values(1000, dtype, seed=3007)
    for name, vml in VML_NAMES.items():
        function = getattr(vml_library(), prefix + vml)
        whole = torch.empty_like(x)
        function(ctypes.c_int(x.numel()), ctypes.c_void_p(x.data_ptr()),
                 ctypes.c_void_p(whole.data_ptr()), ctypes.c_longlong(0x140102))
        assert_bitwise(whole, getattr(torch, name)(x))
        for start in (0, 1, 3, 7, 15, 16, 17, 500):
            for count in (1, 2, 5, 8, 16, 33):
                part = x[start:start + count].clone()
                out = torch.empty_like(part)
                function(ctypes.c_int(count), ctypes.c_void_p(part.data_ptr()),
                         ctypes.c_void_p(out.data_ptr()), ctypes.c_longlong(0x140102))
                assert_bitwise(out, whole[start:start + count])


# graph fuzzer seed 3007's inputs (call 1): a3, a4, a5, a6
SEED_3007 = [
    ([[-0.2543752193450928, 0.2422402799129486, 2.9721291065216064, -0.4601494371891022],
     [0.6208401322364807, -0.18275082111358643, 0.1816253364086151, 0.5956613421440125],
     [-0.2563275694847107, 2.1016108989715576, -1.0032639503479004, -0.8866552710533142]],
     (3, 4)),
    ([[0.28157517313957214, -0.1056583970785141, -1.2309315204620361, -1.0305085182189941],
     [1.128543734550476, -0.7190147638320923, 0.8100579380989075, -0.23842671513557434],
     [1.9871327877044678, -0.22116562724113464, 0.0104500912129879, 1.0739535093307495]],
     (3, 4)),
    ([[0.24679704010486603, -0.19161356985569, -1.5309966802597046, 0.29055795073509216],
     [2.4401397705078125, -0.25247350335121155, 0.5904242396354675, 1.8549271821975708]],
     (2, 4)),
    ([[-0.6605006456375122, -0.336758017539978, -0.4246210753917694, 0.2682442367076874],
     [-0.7440686225891113, 0.07891544699668884, -0.304538756608963, -0.057742614299058914],
     [0.29058945178985596, 0.7246320247650146, -0.19922980666160583, 0.5243250727653503],
     [-1.6243109703063965, 0.5551154613494873, -0.3221990168094635, 0.6855018734931946]],
     (4, 4)),
]


@needs_vml
def test_seed_3007_stable_argsort_of_equal_log2_values(cpp):
    """a4 appears twice in the cat: its log2 values must be equal at both places (they were
    not on AVX-512 hosts) and the stable argsort keeps them in eager's order."""
    def function(a3, a4, a5, a6):
        v8 = torch.log2(torch.cat([a6, a3, a4, a5, a4], 0).abs() + 0.25)
        return v8, torch.argsort(v8, dim=0, stable=True)
    inputs = [torch.tensor(data).reshape(shape) for data, shape in SEED_3007]
    actual, expected = compile_function(function, *inputs)(*inputs), function(*inputs)
    assert_bitwise(actual[0], expected[0])
    assert torch.equal(actual[1], expected[1])


@needs_vml
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_blocks_split_over_threads_bitwise(cpp, monkeypatch, dtype):
    """Above the parallel threshold the blocks of 512 are what the threads share."""
    monkeypatch.setattr(inductor.config, "threads", 2)
    x = values(100003, dtype, seed=7)

    def function(a):
        return torch.exp(a), torch.cos(a * 2 + 1) * torch.log2(a.abs())
    compiled = compile_function(function, x)
    assert "#pragma omp parallel for" in compiled.report.source
    assert "jit_vml_exp" in compiled.report.source and "_block(" in compiled.report.source
    for got, want in zip(compiled(x), function(x)):
        assert_bitwise(got, want)
