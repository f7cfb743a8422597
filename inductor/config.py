"""The one configuration object of `inductor` and its environment overrides.

Input: the process environment (`JIT_<FIELD>`, the prefix shared with `dynamo`). Output:
`inductor.config`, a `Config` read by every stage at the moment it needs a value, so
assignments take effect for the next compiled graph. Parsing and checking of values are
`guards.environment`'s. `docs/inductor.md` lists every field.
"""
from __future__ import annotations

import dataclasses

from guards.environment import Settings, default_cache_dir, setting


@dataclasses.dataclass
class Config(Settings):
    """Options of the code generator. Assign attributes to change them at run time."""

    OWNER = "inductor.config"

    cache_dir: str = setting(factory=default_cache_dir, kind="path")
    """Where built kernels live, keyed by source, flags and compiler version (`JIT_CACHE_DIR`)."""

    fallback_only: bool = False
    """Run every ATen op through its eager kernel: no lowering, no code generation."""

    backward_ahead_of_time: bool = True
    """Training graphs: compile each autograd node's backward when its forward is compiled,
    from examples made of the joint graph's metadata, not lazily inside the caller's
    `loss.backward()` (docs/training.md, "Backward ahead of time")."""

    cpu_backend: str = setting("cpp", choices=("cpp", "triton"))
    """Code generator for CPU tensors: "cpp" (C++/OpenMP) or "triton" (Triton kernels run by
    Triton's interpreter, so every Triton path is testable without a GPU)."""

    autotune: bool = True
    """Time a few block configurations of each Triton kernel on its first call and keep the
    fastest (remembered on disk); off: the first candidate (GPU only)."""

    triton_persistent_limit: int = 32768
    """Longest reduction row (elements) a Triton kernel may keep in registers; longer rows
    loop over blocks."""

    triton_split_reductions: bool = True
    """Split long reductions with few rows over several programs (partials + combine)."""

    triton_direct_launch: bool = True
    """After tuning, launch Triton's compiled kernels directly (less Python per launch)."""

    triton_programmatic_launch: bool = True
    """On GPUs of compute capability 9.0 and later (Hopper), start every generated kernel by
    waiting for the kernels before it (`gdc_wait`, before any memory access) and launch it
    with programmatic dependent launch (except right after a library call of the graph): the
    GPU schedules it while its predecessor drains instead of after. Same results. On the H100
    a kernel boundary costs 0.3-0.6 us less (a CUDA graph of 100 dependent pointwise kernels:
    1.12 -> 0.80 us per kernel at 65,536 elements, 8.21 -> 7.58 at 8M); the first-dim sum's
    two kernels 0.89 -> 0.95 of the copy bandwidth; whole models in reduce-overhead mode
    within noise. Kernels never signal their dependents early: that slowed kernels of more
    than one wave of programs (8M elements: 10.4 us)."""

    cudagraph_max_records: int = 8
    """mode="reduce-overhead": CUDA graphs recorded per compiled graph (one per input shape
    and static-input address set); further signatures run without CUDA graphs."""

    size_variant_limit: int = 8
    """Graphs with symbolic sizes: static variants compiled per graph, one per distinct set of
    input sizes and strides (`inductor/size_variants.py`); calls with further sizes run the
    graph as is (eager kernels, counted once as a fallback)."""

    cudagraph_copy_outputs: bool = True
    """mode="reduce-overhead": return copies of the recorded outputs (valid across calls);
    False returns the recorded buffers themselves, overwritten by the next replay."""

    cxx: str = "g++"
    """The C++ compiler used to build kernels (`JIT_CXX`)."""

    cxx_flags: str = "-O3 -march=native -fno-math-errno -fno-trapping-math"
    """Optimisation flags; part of every cache key. Never `-ffast-math`: NaN must propagate."""

    vectorize: bool = True
    """Mark inner loops `#pragma omp simd` so the compiler vectorises them."""

    threads: int = 0
    """OpenMP threads per kernel; 0 means `torch.get_num_threads()`."""

    parallel_threshold: int = 32768
    """Smallest loop nest (elements of work) a kernel splits over threads."""

    native_allocation: bool = True
    """Generated wrappers allocate buffers through `runtime/native.cpp` (`at::empty_strided`
    without torch's Python argument parser) where it builds; off: `torch.empty_strided`."""

    compile_workers: int = 0
    """Processes building independent kernels in parallel; 0 means one per CPU core."""

    channels_last: bool = True
    """In graphs with 2-D convolutions on CPU tensors (C++ backend) whose activations outweigh
    their weights, keep 4-D activations channels-last (NHWC): oneDNN's convolutions run
    faster on them (mobilenet_v3_large 32.6 -> 23.6 ms at batch 1, resnet18 134 -> 129 ms
    at batch 8; measured on the shared 2-core machine). Outputs keep eager's strides."""

    gpu_channels_last: bool = False
    """Also keep CUDA graphs with 2-D convolutions (none grouped with several channels per
    group) channels-last, cuDNN getting NHWC activations and the weights as they are. Off:
    on the H100 (2026-11-23, ResNet-50 bf16 at batch 16) it cuts device time from 1.48 to
    1.02 ms, but the call is host-bound and its wall time did not move (3.84 vs 3.88 ms in
    alternating rounds; MobileNetV3 2.78 vs 3.00 ms). `benchmarks/experiments/diag_kernels.py`
    measures both."""

    convolutions_without_library: bool = True
    """On the Triton backend, lower 1x1 convolutions (unit strides, no padding) to matrix
    products and depthwise convolutions to generated kernels that BatchNorm and activations
    fuse into, instead of calling cuDNN (`lower/convolution.py` says why)."""

    eager_rounding: bool = True
    """Round bf16 and fp16 results to their type after every op inside a fused kernel, as eager
    computes them: results as close to eager's bits as a fused kernel gets. False keeps them in
    float32 until a store or an explicit cast, as torch.compile does: fewer instructions on long
    pointwise chains (GPT-2's `gelu_new` kernel on the H100: 15.3 us with, 10.0 us without;
    torch.compile's 9.5 us), results that differ from eager's in the last bits."""

    eager_transcendentals: bool = True
    """C++ backend: the user's float32/float64 exp, log, log2, log10, sin, cos, tan, tanh, asin,
    acos, atan, erf and erfc call eager's own MKL VML functions (`inductor/vml.py`): eager's bits,
    at about eager's speed. False: glibc's libmvec, 2-4x faster on kernels made of these ops,
    results an ulp apart from eager's on a quarter to a half of the values."""

    eager_layout_run: bool = True
    """CPU graphs: run the torch-level graph once by eager's kernels at compile time (written
    inputs copied, random state restored; `inductor/eager_run.py`) and give outputs, the bases
    their views view and input version counters exactly eager's layouts and counts. False:
    torch's fake tensors predict them, which for a few dozen ops (`batch_norm` of a transposed
    input, `floor_divide` by a 0-d tensor) lay results out otherwise than eager's kernels."""

    triton_products: bool = True
    """Compute bf16 and fp16 matrix products whose result rows are not 16-byte aligned on
    GPUs (GPT-2's and BERT's logits) with one Triton kernel writing the contiguous result,
    instead of aligned cuBLAS products and copies (`runtime/triton_product.py`; on the H100,
    GPT-2's logits 505 -> 342 us of device time and about 500 -> 80 us of host time)."""

    max_fusion_nodes: int = 64
    """Upper bound on the scheduler nodes fused into one kernel."""

    combo_kernels: bool = True
    """Triton backend: run independent small pointwise kernels that follow each other (the
    per-parameter updates of an optimizer step) as one launch, each program running one
    part's block (`schedule/combine.py`, docs/inductor.md "Horizontal fusion"). Same results;
    fewer launches. The C++ backend already runs a run of kernels from one entry point."""

    combo_max_kernels: int = 16
    """Most kernels one combined launch runs."""

    combo_max_arguments: int = 96
    """Most buffer arguments of one combined launch (registers and parameter space)."""

    combo_max_numel: int = 1 << 22
    """Largest kernel (elements) that joins a combined launch; larger ones launch alone."""

    fallback_on_error: bool = True
    """When a stage fails on a graph, run that graph through eager kernels (with a warning)
    instead of raising; tests switch this off so compiler bugs surface."""

    verify_ir: bool = False
    """Run the loop-IR and kernel-plan verifiers between stages (on in the test suite)."""

    fallback_ops: str = ""
    """Comma-separated ATen op names (`aten.sum`) that always run through eager kernels."""

    bounds_check: bool = False
    """Debug mode (`JIT_BOUNDS_CHECK=1`): every load and store of a generated kernel checks its
    index against the element count its buffer spans. C++: a violation prints the kernel, the
    buffer, the index and the extent on stderr and the call raises `IndexError`; Triton: a
    `tl.device_assert` per access (kernels compiled with `debug=True`; under Triton's
    interpreter too), which on a GPU stops the kernel with a device-side assert. Slower
    kernels and separate cache entries; for finding out-of-bounds accesses, not for speed."""

    def uses_triton(self, device) -> bool:
        """Whether graphs on `device` (a `torch.device`) get Triton kernels: CUDA always,
        CPU with `cpu_backend = "triton"`."""
        return device.type == "cuda" or (device.type == "cpu" and self.cpu_backend == "triton")

    def resolved_threads(self) -> int:
        """The number of OpenMP threads kernels use."""
        import torch
        return self.threads if self.threads > 0 else max(1, torch.get_num_threads())


config = Config.from_environment()
