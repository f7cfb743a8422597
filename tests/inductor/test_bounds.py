"""Bounds mode (`inductor.config.bounds_check`, `JIT_BOUNDS_CHECK=1`): every load and store of
a generated kernel checks its index against the elements its buffer spans (issue 21: an
out-of-bounds Triton kernel gave DeBERTa-v2 `CUDA error: an illegal memory access` on the H100).

A bounded set of graphs covering the kernel shapes (pointwise with broadcasting and views,
reductions over either dim, softmax, cumulative sums, indirect reads and writes, padding,
concatenation, pooling, split reductions) compiled in the mode on both code generators (C++;
Triton through its interpreter) must give eager's results without tripping a check; a planted
violation (an extent shrunk by one) must be reported with the kernel, buffer and index.
"""
import os
import subprocess
import sys

import pytest
import torch

import inductor
from inductor.codegen import bounds

from tests.inductor.conftest import check_same


def _graphs():
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator)
    index = torch.tensor([[0, 2, 1], [3, 3, 0]])
    return {
        "broadcast_views": (lambda x, y: (x.t() * y[:, None] + x.t()[:, :1]).exp(),
                            randn(5, 4), randn(4)),
        "reductions": (lambda x: (x.sum(0), x.amax(1), x.var(1), x.argmin(0)), randn(37, 65)),
        "softmax": (lambda x: torch.softmax(x * 3, -1) + torch.log_softmax(x, 0), randn(6, 129)),
        "cumsum_slices": (lambda x: (x[:, 1:].cumsum(1), x[::2, ::3] + 1), randn(7, 9)),
        "gather_embedding": (lambda x, i: (torch.gather(x, 1, i), x[i[0]],
                                           torch.nn.functional.embedding(i, x)),
                             randn(4, 5), index),
        "scatter_add": (lambda x, i, s: x.scatter_add(1, i, s), randn(2, 5), index,
                        randn(2, 3)),
        "pad_cat": (lambda x, y: torch.cat([torch.nn.functional.pad(x, (1, 2)), y], 1) * 2,
                    randn(3, 4), randn(3, 2)),
        "pooling": (lambda x: (torch.nn.functional.max_pool2d(x, 3, 2, 1),
                               torch.nn.functional.avg_pool2d(x, 2)), randn(2, 3, 9, 9)),
        "long_rows": (lambda x: (x.sum(1), (x - x.mean(1, keepdim=True)).square().mean(0)),
                      randn(3, 40000)),
        "layer_norm": (lambda x, w: torch.nn.functional.layer_norm(x, (24,), w) * w,
                       randn(10, 24), randn(24)),
    }


GRAPHS = _graphs()


@pytest.fixture
def bounds_mode():
    saved = inductor.config.snapshot()
    inductor.config.bounds_check = True
    yield inductor.config
    inductor.config.update(**saved)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_graphs_run_in_bounds_mode(bounds_mode, backend, name):
    if backend == "triton":
        pytest.importorskip("triton")
    bounds_mode.cpu_backend = backend
    function, *inputs = GRAPHS[name]
    compiled = check_same(function, *inputs)
    source = compiled.report.source
    assert ("jit_check_bounds(" if backend == "cpp" else "tl.device_assert(") in source


def _shrink(monkeypatch, name: str):
    """Report buffer `name` one element shorter than it is: its last element is then outside."""
    extents = bounds.buffer_extents

    def shrunk(plan):
        found = extents(plan)
        found[name] -= 1
        return found
    monkeypatch.setattr(bounds, "buffer_extents", shrunk)
    for module in ("inductor.codegen.cpp.source", "inductor.codegen.triton.source"):
        monkeypatch.setattr(f"{module}.buffer_extents", shrunk)


def test_cpp_violation_names_kernel_buffer_and_index(bounds_mode, monkeypatch, capfd):
    _shrink(monkeypatch, "arg0")
    x = torch.randn(3, 4)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(lambda x: x * 2 + 1), [x])
    with pytest.raises(IndexError, match="outside a buffer"):
        compiled(x)
    error = capfd.readouterr().err
    assert "framejit bounds check: kernel0: load arg0: index 11 outside [0, 11)" in error


def test_triton_violation_names_kernel_buffer_and_index(bounds_mode, monkeypatch):
    pytest.importorskip("triton")
    bounds_mode.cpu_backend = "triton"
    _shrink(monkeypatch, "buf0")
    x = torch.randn(3, 4)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(lambda x: x * 2 + 1), [x])
    with pytest.raises(Exception, match=r"framejit bounds check: kernel0: store buf0 "
                                        r"outside \[0, 11\)"):
        compiled(x)


def test_default_kernels_carry_no_checks():
    x = torch.randn(3, 4)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(lambda x: x * 2 + 1), [x])
    assert "jit_check_bounds" not in compiled.report.source


def test_environment_switches_the_mode_on():
    code = "import inductor; print(inductor.config.bounds_check)"
    environment = dict(os.environ, JIT_BOUNDS_CHECK="1")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=environment, timeout=300)
    assert result.stdout.strip() == "True", result.stderr[-2000:]


def test_gpu_kernels_compile_with_their_asserts(bounds_mode):
    """The H100's kernels in bounds mode: printed for sm_90 and compiled with `debug=True`
    (without it Triton drops device asserts), asserts included in the PTX."""
    pytest.importorskip("triton.backends.nvidia")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from inductor.runtime import triton_build
    from tests.triton.conftest import gpu_module
    module, dtype_of, _plan = gpu_module(lambda x, w: torch.softmax(x * w, -1), torch.randn(
        8, 96), torch.randn(96))
    assert "tl.device_assert(" in module.text
    loaded = triton_build.load(module.text, interpret=False)
    pointer = {torch.float32: "*fp32"}
    kernel = module.kernels[0]
    function = kernel.functions[0]
    jit = getattr(loaded, function.name)
    blocks = {name: 16 for name in jit.arg_names if name.endswith("BLOCK")}
    signature = {name: pointer[dtype_of(argument)]
                 for name, argument in zip(jit.arg_names, kernel.arguments)}
    signature.update({name: "constexpr" for name in blocks})
    try:
        compiled = triton.compile(ASTSource(jit, signature, blocks),
                                  target=GPUTarget("cuda", 90, 32), options={"debug": True})
    except Exception as error:  # noqa: BLE001  (no ptxas here: nothing to check)
        pytest.skip(f"cannot compile for sm_90 here: {type(error).__name__}: {error}")
    assert "assertfail" in compiled.asm["ptx"] or "__assertfail" in compiled.asm["ptx"]


EMPTY_DESTINATION = r"""
import sys, torch, inductor
inductor.config.update(fallback_on_error=False, cpu_backend=sys.argv[1])
cases = {
    "index_add": (lambda x, i, s: (x.index_add(1, i, s) + 0,),
                  torch.empty(1, 0), torch.tensor([0]), torch.ones(1, 1)),
    "gather": (lambda x, i: (torch.gather(x, 1, i) * 2,), torch.empty(2, 0),
               torch.zeros(2, 3, dtype=torch.long)),
}
for name, (function, *inputs) in cases.items():
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), list(inputs))
    assert "has no elements" in compiled.report.source, name
    try:
        compiled(*inputs)
    except IndexError:
        continue
    assert name == "index_add", f"{name}: eager raises, the compiled graph returned"
print("no access to empty buffers")
"""


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_empty_buffers_are_never_accessed(backend, tmp_path):
    """An indirect index into an empty dimension is always outside it; the kernel used the
    substitute index 0 anyway and read or wrote memory that is not there (graph fuzzer seed
    19, `x.index_add_(1, index, source)` with `x` of shape (1, 0): a segmentation fault,
    which bounds mode reported as `load buf0: index 0 outside [0, 0)`). In a subprocess, so
    that a regression crashes it and not the test session."""
    if backend == "triton":
        pytest.importorskip("triton")
    environment = dict(os.environ, JIT_CACHE_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", EMPTY_DESTINATION, backend],
                            capture_output=True, text=True, env=environment, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no access to empty buffers" in result.stdout


def test_integer_arithmetic_wraps_in_bounds_mode(bounds_mode):
    """Bounds mode turns on Triton's `debug` option, which also turned on its overflow
    sanitizer, for the rest of the process under the interpreter: integer `+`, `-`, `*` that
    wrap (as eager's do) raised `int32 overflow detected for operation mul` in every later
    interpreted kernel (integer powers, random-number hashes)."""
    pytest.importorskip("triton")
    bounds_mode.cpu_backend = "triton"
    x = torch.tensor([2**30, 3, -2**31 + 1, 77], dtype=torch.int32)
    check_same(lambda x: (x * 4 + x, x - 2**31 + 5, x.to(torch.int8) * 100,
                          x.to(torch.uint8) ** 3), x)
