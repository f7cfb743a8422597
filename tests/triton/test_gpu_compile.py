"""The GPU variants of generated kernels compile for an H100 (sm_90) without a GPU.

The interpreter runs kernels as NumPy, so it accepts programs the GPU compiler rejects (type
mismatches, unsupported casts, non-constexpr globals). Here representative graphs are printed
for a CUDA target (`interpret=False`: no status word, native bfloat16 rounding) and every
function is compiled through Triton's compiler for sm_90 with its first two candidate
configurations. Skipped where Triton lacks its NVIDIA backend.
"""
import pytest
import torch

from inductor.runtime import triton_autotune as autotune
from inductor.runtime import triton_build
from tests.triton.conftest import gpu_module

POINTER_TYPES = {
    torch.float32: "*fp32", torch.float64: "*fp64", torch.bfloat16: "*bf16",
    torch.float16: "*fp16", torch.int64: "*i64", torch.int32: "*i32", torch.int16: "*i16",
    torch.int8: "*i8", torch.uint8: "*u8", torch.bool: "*i1",
}


def compile_all(function, *inputs, record=None, **options):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    module, dtype_of, _plan = gpu_module(function, *inputs, **options)
    loaded = triton_build.load(module.text, interpret=False)
    compiled = 0
    for kernel in module.kernels:
        roles = [function.role for function in kernel.functions]
        candidates = autotune.candidates(kernel.spec, roles, exhaustive=False, interpret=False)
        pointers = [POINTER_TYPES[dtype_of(name)] for name in kernel.arguments] + \
            [POINTER_TYPES[dtype] for dtype in kernel.spec.workspaces]
        for candidate in candidates[:2]:
            positions = range(len(roles)) if kernel.spec.kind in ("split", "scatter") \
                else [candidate.variant]
            for position, kwargs in zip(positions, candidate.arguments):
                text = kernel.functions[position]
                jit = getattr(loaded, text.name)
                blocks = {key: value for key, value in kwargs.items() if key.endswith("BLOCK")}
                names = jit.arg_names
                signature = dict(zip(names, pointers))
                signature.update({name: "constexpr" for name in blocks})
                source = ASTSource(jit, signature, blocks)
                settings = {"num_warps": kwargs.get("num_warps", 4)}
                if kernel.spec.programmatic:
                    settings["launch_pdl"] = True
                result = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                        options=settings)
                if record is not None:
                    record.append(result)
                compiled += 1
    return compiled


@pytest.fixture(scope="module", autouse=True)
def _needs_nvidia_backend():
    pytest.importorskip("triton.backends.nvidia")
    try:
        compile_all(lambda x: x + 1, torch.randn(8))
    except Exception as error:  # noqa: BLE001  (no ptxas or no backend: nothing to check)
        pytest.skip(f"cannot compile for sm_90 here: {type(error).__name__}: {error}")


def test_pointwise_math_and_half_types_compile():
    def function(x, y, z):
        return (torch.sigmoid(x) * torch.erf(y) + torch.atan2(x, y) + torch.remainder(x, y),
                (x.to(torch.bfloat16) * 3).to(torch.float16),
                torch.div(z, z + 5, rounding_mode="floor"),
                torch.bitwise_left_shift(z, z.abs() % 9), z.abs() ** 3, torch.isfinite(x / y))

    assert compile_all(function, torch.randn(33, 70), torch.randn(33, 70),
                       torch.randint(-9, 9, (33, 70))) >= 2


def test_reductions_compile_in_every_form():
    def rows(x):
        return (x.sum(-1), x.argmax(-1), torch.var(x, -1), (x > 0).any(-1), x.amin(-1),
                torch.softmax(x, -1))

    assert compile_all(rows, torch.randn(64, 3000), persistent_limit=4096) >= 2
    assert compile_all(rows, torch.randn(64, 300)) >= 2
    assert compile_all(lambda x: (x.sum(), x.var(), x.argmax()), torch.randn(1 << 16)) >= 2


def test_reductions_without_row_masks_compile():
    """Rows that divide into blocks print without `rmask` (whole rows, looped, split, and
    over the first dimension); the interpreter broadcasts what sm_90 rejects."""
    def rows(x):
        return (x.sum(-1), x.argmax(-1), torch.var(x, -1), (x > 0).any(-1), x.amin(-1),
                torch.softmax(x, -1), x.sum(0), x.argmin(0))

    assert compile_all(rows, torch.randn(64, 256)) >= 2
    assert compile_all(rows, torch.randn(64, 3072), persistent_limit=1024) >= 2
    assert compile_all(lambda x: (x.sum(-1), x.argmax(-1), torch.var(x, -1)),
                       torch.randn(4, 65536)) >= 2
    assert compile_all(lambda x: (x.sum(0), x.argmin(0), torch.var(x, 0)),
                       torch.randn(4096, 64)) >= 2


def test_tiles_scatters_and_random_compile():
    def function(x, index, source):
        transposed = x.t().contiguous() * 2
        added = torch.zeros(64, 32).scatter_add(0, index, source)
        return transposed, added, torch.rand_like(x) + torch.randn_like(x)

    x = torch.randn(64, 32)
    assert compile_all(function, x, torch.randint(0, 64, (8, 32)), torch.randn(8, 32)) >= 3


def test_kernels_that_wait_for_their_predecessors_compile_for_programmatic_launch():
    """Printed for programmatic dependent launch, every function of every kernel kind starts
    with `griddepcontrol.wait` and compiles with `launch_pdl`; printed without, none waits."""
    def function(x, index, source):
        return (x.sum(0), torch.softmax(x, -1), x.t().contiguous() + 1,
                torch.zeros(4096, 64).scatter_add(0, index, source))

    inputs = (torch.randn(4096, 64), torch.randint(0, 4096, (8, 64)), torch.randn(8, 64))
    for waits in (True, False):
        compiled = []
        assert compile_all(function, *inputs, record=compiled, wait_for_prior=waits) >= 5
        for kernel in compiled:
            assert ("griddepcontrol.wait" in kernel.asm["ptx"]) == waits
            assert bool(kernel.metadata.launch_pdl) == waits


def test_scans_of_values_constant_along_the_line_compile():
    """OPT's position ids, `ones(...).cumsum(1)`, printed `tl.associative_scan` over a scalar
    `tl.full([], ...)`: sm_90 rejected it ("invalid axis 1"; the interpreter accepts it) and
    AMP training of `opt` fell back to eager for its forward graph."""
    def function(x):
        return (torch.ones_like(x).cumsum(1), x[:, :1].expand(8, 128).cumsum(1),
                x[:1, :].expand(8, 128).cumprod(1))

    assert compile_all(function, torch.randn(8, 128)) >= 3
