"""Graphs with symbolic sizes (issue 23) on the Triton backend (CPU tensors through Triton's
interpreter, `cpu_backend="triton"`; CUDA tensors where a GPU is present): one compile
serves every size with eager's answers. Kernels take the size symbols as int64 arguments,
mask every symbolic axis and get their grid per call; autotuning is per size bucket (next
power of two of each symbolic extent); with `mode="reduce-overhead"` each distinct size
records its own CUDA graph, up to `cudagraph_max_records`. No test here allows a `per_size`
fallback (tests/conftest.py fails a test on any fallback it does not expect)."""
import copy
import re
import types

import pytest
import torch

import inductor
from inductor.runtime import triton_sizes
from inductor.runtime.cudagraphs import CudaGraphRunner
from tests.inductor.test_dynamic_sizes import assert_same, in_float64, symbolic_graph
from tests.triton.conftest import DEVICES, kernel_source

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
SIZES = (0, 1, 2, 3, 13, 97, 1031)


def _check(function, make_inputs, dynamic, sizes, device, mode=None, one_compile=True):
    """Compile once with the first size, then compare with eager for every size (and the
    first again): values, dtypes, shapes, strides, written inputs; `one_compile`: and no
    per-size variant was compiled."""
    first = make_inputs(sizes[0], device)
    compiled = inductor.compile_fx(symbolic_graph(function, first, dynamic),
                                   copy.deepcopy(first), mode=mode)
    for size in sizes + sizes[:1]:
        inputs = make_inputs(size, device)
        eager_inputs, compiled_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
        assert_same(compiled(*compiled_inputs), function(*eager_inputs))
        torch.testing.assert_close(compiled_inputs, eager_inputs)
    if one_compile:
        assert compiled.report.size_variants == 0 and compiled.report.size_reason is None
    return compiled


# -- one compile, every size ------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_pointwise_and_broadcast(device):
    def function(x, y):
        return x * 2 + 1, torch.sigmoid(x) * y, x.unsqueeze(-1) * x.unsqueeze(1)
    compiled = _check(function, lambda n, device: [torch.randn(n, 7, device=device),
                                                   torch.randn(7, device=device)],
                      [[0], []], (5,) + SIZES, device)
    source = kernel_source(compiled)      # the ShapeEnv names the symbol (s0, s23, ...)
    assert re.search(r'@triton.jit\(do_not_specialize=\["(s[0-9]+)"\]\)\n'
                     r'def \w+\(pointer0, [^)]*\1: tl.int64', source)
    assert re.search(r"xnumel = \(?7\*s[0-9]+", source) and "xmask = xindex < xnumel" in source


@pytest.mark.parametrize("device", DEVICES)
def test_two_symbols_and_a_large_size(device):
    def function(x, y):
        return (x + y).relu(), x.t() * 3
    _check(function, lambda n, device: [torch.randn(n, n % 11 + 2, device=device),
                                        torch.randn(n % 11 + 2, device=device)],
           [[0, 1], [0]], (6, 1, 2, 29, 70001), device)


@pytest.mark.parametrize("device", DEVICES)
def test_a_transpose_tiles_over_a_static_y_axis(device):
    def function(x):
        return (x.t() * 3).contiguous()
    # no size 1: eager's (20, 1) result keeps the strides (1, 20) of x.t() (a size-1 dim
    # makes it contiguous already), the symbolic graph's are (1, 1); the frontend specialises
    # sizes 0 and 1 (the ShapeEnv's 0/1 rule), so only a direct inductor call meets this
    compiled = _check(function, lambda n, device: [torch.randn(n, 20, device=device)], [[0]],
                      (33, 0, 2, 17, 300), device)
    source = kernel_source(compiled)      # [YBLOCK, XBLOCK] tiles: 20 rows on Y, n on X
    assert "ynumel = 20" in source and re.search(r"xnumel = s[0-9]+\n", source)


@pytest.mark.parametrize("device", DEVICES)
def test_sums_over_a_symbolic_and_a_static_axis(device):
    def function(x):
        return x.sum(-1), x.sum(0), x.amax(0), x.argmax(-1)
    _check(function, lambda n, device: [torch.randn(n, 9, device=device)], [[0]],
           (4,) + SIZES[1:], device)
    _check(function, lambda n, device: [torch.randn(9, n, device=device)], [[1]],
           (4,) + SIZES[1:], device)


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_and_layer_norm_over_symbolic_rows(device):
    def function(x, weight, bias):
        return torch.softmax(x, -1), torch.nn.functional.layer_norm(x, x.shape[-1:]), \
            torch.log_softmax(x * 2, 0)
    _check(function, lambda n, device: [torch.randn(5, n, device=device),
                                        torch.randn(n, device=device),
                                        torch.randn(n, device=device)],
           [[1], [0], [0]], (8, 1, 2, 31, 67, 1500), device)


@pytest.mark.parametrize("device", DEVICES)
def test_rows_past_the_persistent_limit_loop(device, settings):
    settings.triton_persistent_limit = 64    # buckets of rows above 64 take the looped variant

    def function(x):
        return torch.softmax(x, -1), torch.var(x, -1)
    compiled = _check(function, lambda n, device: [torch.randn(3, n, device=device)], [[1]],
                      (16, 1, 63, 64, 65, 300), device)
    assert re.search(r"for roffset in range\(0, s[0-9]+, RBLOCK\)", kernel_source(compiled))


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_rows_and_columns(device):
    def function(x):
        return torch.softmax(x, -1) * x.mean(0)
    _check(function, lambda n, device: [torch.randn(n, n + 3, device=device)], [[0, 1]],
           (5, 1, 2, 17, 40), device)


@pytest.mark.expect_fallback("per_size", reason="the symbolic lowering compiles graphs that "
                             "write into their inputs per size (not the Triton side)")
@pytest.mark.parametrize("device", DEVICES)
def test_write_into_an_input(device):
    def function(x):
        x.mul_(2)
        return x.sum(1)
    compiled = _check(function, lambda n, device: [torch.randn(n, 3, device=device)], [[0]],
                      (2, 0, 1, 33), device, one_compile=False)
    if compiled.report.size_variants:       # eager's answers, but one compile per size
        pytest.xfail(f"compiled per size: {compiled.report.size_reason}")


def _compile_for_sm_90(printed: list) -> int:
    """Compile every function of the GPU modules `printed` ((module, dtype lookup) pairs) for
    sm_90 at the size bucket of 5, with every candidate; the number compiled."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from inductor.runtime import triton_autotune as autotune
    from inductor.runtime import triton_build
    from tests.triton.test_gpu_compile import POINTER_TYPES
    compiled = 0
    for module, dtype_of in printed:
        loaded = triton_build.load(module.text, interpret=False)
        for kernel in module.kernels:
            roles = [function.role for function in kernel.functions]
            extents = triton_sizes.extent_function(kernel.spec, kernel.size_symbols)(
                *[5] * len(kernel.size_symbols))
            spec = triton_sizes.bucket_spec(kernel.spec, extents)
            for candidate in autotune.candidates(spec, roles, False, False):
                # a split or scatter candidate: arguments for each function in launch order
                positions = range(len(roles)) if spec.kind in ("split", "scatter") \
                    else [candidate.variant]
                for position, kwargs in zip(positions, candidate.arguments, strict=True):
                    jit = getattr(loaded, kernel.functions[position].name)
                    blocks = {key: value for key, value in kwargs.items()
                              if key.endswith("BLOCK")}
                    signature = dict(zip(jit.arg_names, [POINTER_TYPES[dtype_of(name)]
                                                         for name in kernel.arguments]))
                    signature.update({name: "i64" for name in kernel.size_symbols})
                    signature.update({name: "constexpr" for name in blocks})
                    triton.compile(ASTSource(jit, signature, blocks),
                                   target=GPUTarget("cuda", 90, 32),
                                   options={"num_warps": kwargs.get("num_warps", 4),
                                            "launch_pdl": True})
                    compiled += 1
    return compiled


def _print_for_the_gpu_too(monkeypatch) -> list:
    """The (module, dtype lookup) of every graph's GPU variant (no status word, programmatic
    launch) printed beside the interpreter's."""
    from inductor.codegen.triton import source as triton_source
    printed, generate = [], triton_source.generate

    def both(plan, dtype_of, interpret, *arguments, **keywords):
        printed.append((generate(plan, dtype_of, False, True), dtype_of))
        return generate(plan, dtype_of, interpret, *arguments, **keywords)
    monkeypatch.setattr(triton_source, "generate", both)
    return printed


def test_kernels_over_symbolic_sizes_compile_for_sm_90(monkeypatch):
    """The GPU variants (no status word, programmatic launch) of the kernels of a symbolic
    graph compile for an H100 with Triton's compiler (the interpreter accepts more)."""
    pytest.importorskip("triton.backends.nvidia")
    printed = _print_for_the_gpu_too(monkeypatch)

    def function(x):
        return torch.softmax(x, -1), x.sum(0), (x.t() * 2).to(torch.bfloat16), \
            x.unsqueeze(-1) * x.unsqueeze(1)
    _check(function, lambda n, device: [torch.randn(n, 2 * n + 1, device=device)], [[0, 1]],
           (3, 5), "cpu")
    for module, _dtype_of in printed:
        assert all(kernel.size_symbols for kernel in module.kernels)
    assert _compile_for_sm_90(printed) >= 3


def _gather_rows(x, index):
    return x[index].to(torch.bfloat16), x * 2


def _rows_and_an_index(n, device):
    generator = torch.Generator().manual_seed(n)
    return [torch.randn(n, 4, generator=generator).to(device),
            torch.randint(-n, n, (150,), generator=generator).to(device)]


@pytest.mark.parametrize("device", DEVICES)
def test_a_static_gather_from_rows_of_symbolic_count(device):
    """fasterrcnn's box gather (stop 47): 150 static rows picked from a buffer of `s0` rows.
    The kernel's extent is static but its body bounds the index by `s0`: the size is a
    parameter of that kernel too (the GPU compile raised NameError: 's97 is not defined')."""
    compiled = _check(_gather_rows, _rows_and_an_index, [[0], []], (5, 1, 2, 3, 13, 97),
                      device)
    source = kernel_source(compiled)
    size = re.search(r"def \w+\(pointer0, pointer1, pointer2, (s[0-9]+): tl.int64,", source)
    assert size is not None and f">= {size.group(1)})" in source


def test_a_static_gather_from_rows_of_symbolic_count_compiles_for_sm_90(monkeypatch):
    pytest.importorskip("triton.backends.nvidia")
    printed = _print_for_the_gpu_too(monkeypatch)
    _check(_gather_rows, _rows_and_an_index, [[0], []], (5, 3), "cpu")
    assert _compile_for_sm_90(printed) >= 2


def _scatters(x, index, updates, y, z):
    """Scatters of a graph over `s0`: into rows of count s0 from static indices; of s0
    updates into static rows; of static updates read through a gather bounded by s0 and
    through a column of stride s0 (static extents, a size printed in the body)."""
    into_rows = x.index_add(0, index, updates)
    x.index_put_((index,), updates * 2, accumulate=True)
    from_rows = torch.zeros(8, 4).index_add(0, y[:, 0].long() % 8, y)
    gathered = torch.zeros(8).scatter_add(0, index % 8, x[index - 5, 0])
    strided = torch.zeros(8).index_add(0, index[:4] % 8, z[:, 0] * 2)
    return into_rows, from_rows, gathered, strided


def _scatter_inputs(n, device):
    generator = torch.Generator().manual_seed(n)
    return [torch.randn(n, 4, generator=generator).to(device),
            torch.randint(0, 5, (10,), generator=generator).to(device),
            torch.randn(10, 4, generator=generator).to(device),
            torch.randn(n, 4, generator=generator).mul(8).round().to(device),
            torch.randn(4, n, generator=generator).to(device)]


@pytest.mark.parametrize("device", DEVICES)
def test_scatters_over_symbolic_sizes(device):
    """Scatter kernels take the size parameters too (before, a symbolic graph with any
    scatter was compiled per size: their write loop variables were named `s0, s1`, as the
    graph's sizes are). One compile; values, and the written input, eager's."""
    compiled = _check(_scatters, _scatter_inputs, [[0], [], [], [0], [1]],
                      (5, 6, 7, 13, 97), device)
    source = kernel_source(compiled)
    assert "w0 = xindex" in source and "tl.atomic_add(" in source


def test_scatters_over_symbolic_sizes_compile_for_sm_90(monkeypatch):
    pytest.importorskip("triton.backends.nvidia")
    printed = _print_for_the_gpu_too(monkeypatch)
    _check(_scatters, _scatter_inputs, [[0], [], [], [0], [1]], (5, 7), "cpu")
    scatters = [kernel for module, _dtype_of in printed for kernel in module.kernels
                if kernel.spec.kind == "scatter"]
    assert len(scatters) >= 4 and all(kernel.size_symbols for kernel in scatters)
    assert _compile_for_sm_90(printed) >= 8


def test_random_sizes_give_eager_answers():
    """One compile, then sizes drawn by hypothesis (small, primes) for both symbols. From 2
    up: the ShapeEnv traces dynamic sizes as at least 2 (0/1 specialisation) and the graph may
    use it (`var`'s divisor `max(0, n - 1)` traced as `n - 1`: a (0, 1) input gave -0.0 where
    eager gives nan), so a size 0 or 1 is the frontend's to specialise."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st

    def function(x):
        return torch.softmax(x, -1), x.sum(0), x * 2 + 1, torch.var(x, 0)
    first = [torch.randn(6, 10)]
    compiled = inductor.compile_fx(symbolic_graph(function, first, [[0, 1]]), first)
    extents = st.one_of(st.integers(2, 70), st.sampled_from([97, 257, 1031]))

    @hypothesis.given(rows=extents, columns=extents)
    @hypothesis.settings(max_examples=20, deadline=None)
    def check(rows, columns):
        x = torch.randn(rows, columns)
        assert_same(compiled(x.clone()), function(x), exact=in_float64(function, [x]))
    check()
    assert compiled.report.size_variants == 0


# -- launching: grids, buckets, the tuning bound (stand-ins, no Triton) --------------------------
class StandIn:
    """A bucket's launcher: records its calls; `choice` None means it would tune."""

    def __init__(self, spec, tunes=True):
        self.spec = spec
        self.calls = []
        self.candidates = ["first candidate"]
        self.choice = None if tunes else "first candidate"
        self.device = torch.device("cpu")

    def _call(self, *arguments):
        self.calls.append(arguments)

    def compile_tasks(self):
        return {}


def _sized(monkeypatch=None, tunes=True, **extents):
    import sympy

    from inductor.codegen.triton.kernel import LaunchSpec
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    spec = LaunchSpec("reduction", extents.get("xnumel", s0 * 7), rnumel=extents.get(
        "rnumel", s1), strategy="persistent")
    source = types.SimpleNamespace(plan_name="kernel0", spec=spec, size_symbols=["s0", "s1"],
                                   arguments=["buf0", "buf1"])
    made = []

    def make(bucket_spec):
        made.append(StandIn(bucket_spec, tunes))
        return made[-1]
    return triton_sizes.SizedLauncher(source, make, {"s0": 100, "s1": 30}), made


def test_sizes_of_one_bucket_share_a_launcher_and_the_grid_is_per_call():
    launcher, made = _sized()
    assert len(made) == 1 and (made[0].spec.xnumel, made[0].spec.rnumel) == (1024, 32)
    launcher("a", "b", 100, 17)     # 700 rows (bucket 1024), rows of 17 (bucket 32)
    launcher("a", "b", 130, 32)
    assert len(made) == 1
    assert made[0].calls == [("a", "b", 100, 17, 700, 1, 17), ("a", "b", 130, 32, 910, 1, 32)]
    launcher("a", "b", 200, 32)     # 1400 rows: the next bucket
    assert len(made) == 2 and made[1].spec.xnumel == 2048 and made[1].calls


def test_an_empty_grid_launches_nothing_but_empty_rows_do():
    launcher, made = _sized()
    launcher("a", "b", 0, 5)
    assert made[0].calls == [] and len(made) == 1
    launcher("a", "b", 3, 0)        # rows of no element: the kernel writes the identity
    assert made[-1].calls == [("a", "b", 3, 0, 21, 1, 0)]


def test_tuned_buckets_are_bounded_and_counted(monkeypatch):
    monkeypatch.setattr(triton_sizes, "TUNED_BUCKETS", 2)
    launcher, made = _sized()
    for rows in (1, 2, 3, 5, 9):    # buckets 8, 16, 32, 64, 128 of 7 * rows
        launcher("a", "b", rows, 4)
    assert [stand_in.choice for stand_in in made] == [None, None, "first candidate",
                                                      "first candidate", "first candidate"]
    assert launcher.untuned_buckets == 3


def test_bucket_candidates_drop_the_persistent_variant_past_its_limit():
    from inductor.codegen.triton.kernel import LaunchSpec
    from inductor.runtime import triton_autotune as autotune
    roles = ["main", "looped"]
    short = LaunchSpec("reduction", 64, rnumel=64, strategy="persistent", row_limit=128)
    long = LaunchSpec("reduction", 64, rnumel=256, strategy="persistent", row_limit=128)
    assert {candidate.variant for candidate in autotune.candidates(short, roles, False, False)} \
        == {0, 1}
    assert {candidate.variant for candidate in autotune.candidates(long, roles, False, False)} \
        == {1}
    assert autotune.candidates(long, roles, False, True)[0].variant == 1


def test_the_direct_function_computes_the_grid_per_call(monkeypatch):
    from inductor.runtime import triton_launch
    from inductor.runtime.triton_launch import Launcher
    monkeypatch.setattr(triton_launch, "_stream_function", lambda: (lambda index: 7))
    launcher = Launcher.__new__(Launcher)
    launcher.name, launcher.device, launcher.sized = "kernel0", torch.device("cuda", 0), True
    launcher.spec = types.SimpleNamespace(workspaces=[], kind="reduction", status=False)
    launcher.argument_dtypes = [torch.float32, torch.float32, 2]    # two buffers, one size
    launcher.outside, launcher.alignment, launcher.needs_scratch = [0], (False,), False
    launched = []
    run = lambda *arguments: launched.append(arguments)  # noqa: E731
    grid = launcher.grid_text("main", {"XBLOCK": 8})
    launcher.fast = [((run, "function0", "metadata0"), tuple(grid) + ("1", "1"), [8])]
    direct = launcher._direct_function()
    direct("a", "b", 5, 17, 1, 5)
    direct("a", "b", 0, 1, 1, 0)
    assert [arguments[:3] for arguments in launched] == [(3, 1, 1), (1, 1, 1)]
    assert launched[0][9:] == ("a", "b", 5, 8)


# -- CUDA graphs: one recording per size, bounded ---------------------------------------------
class RecordingStandIn(CudaGraphRunner):
    """The runner's bookkeeping with recording and replay stood in (no GPU)."""

    def __init__(self):
        self.compiled = lambda *inputs: ["ran", inputs[0].shape]
        self.constants, self.mutated, self.recordings = 0, [], {}
        self.disabled, self.recorded = None, 0
        self.unrecorded_calls, self.unrecorded_signatures = 0, set()
        self.replayed = []

    def _record(self, signature, inputs):
        self.recordings[signature] = signature
        self.recorded += 1

    def _replay(self, recording, inputs):
        self.replayed.append(recording)
        return ["replayed"]


def test_one_recording_per_size_up_to_the_limit(settings, caplog, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    settings.cudagraph_max_records = 2
    runner = RecordingStandIn()
    for rows in (3, 3, 5, 5, 9, 9, 11, 3):
        runner(torch.zeros(rows, 4))
    assert runner.recorded == 2 and len(runner.replayed) == 3
    assert runner.unrecorded_calls == 3 and len(runner.unrecorded_signatures) == 2
    assert sum("CUDA graphs recorded" in record.message for record in caplog.records) == 1


@cuda
def test_reduce_overhead_records_one_graph_per_size(settings):
    from tests.triton.test_cudagraphs import _runner
    settings.cudagraph_max_records = 3

    def function(x):
        return (x.cos() * 2).sum(-1)
    compiled = _check(function, lambda n, device: [torch.randn(n, 64, device=device)], [[0]],
                      (4, 100, 1000, 7, 100), "cuda", mode="reduce-overhead")
    runner = _runner(compiled)     # sizes 4, 100 and 1000 recorded; 7 ran kernel by kernel
    assert runner.recorded == 3 and runner.unrecorded_calls == 1


@cuda
def test_two_sizes_of_one_bucket_tune_once(monkeypatch):
    from inductor.runtime.triton_launch import Launcher
    tuned = []
    original = Launcher._tune

    def counting(self, tensors, extents):
        tuned.append((self.name, extents))
        return original(self, tensors, extents)
    monkeypatch.setattr(Launcher, "_tune", counting)

    def function(x):
        return torch.softmax(x * 3, -1)
    _check(function, lambda n, device: [torch.randn(n, 1000, device=device)], [[0]],
           (33, 40, 64, 65, 100), "cuda")
    assert [extents[0] for _name, extents in tuned] == [33, 65]    # buckets 64 and 128
