"""Compile for an H100/H200 (sm_90), without a GPU, every Triton kernel of zoo models' graphs.

Triton's interpreter (what CPU tests run) accepts programs that the GPU compiler rejects; on a
GPU such a kernel makes inductor run its graph on eager's kernels (a silent slowdown: OPT's
AMP training once ran 1.05x eager for `tl.associative_scan` over a scalar). This runs a zoo
model's training step (or inference) on CPU, under CPU autocast where `--amp` is given
(close to CUDA's), records every ATen graph inductor's `_generate` receives (forward and
backward graphs), prints each for a 132-SM CUDA target (`interpret=False`) and compiles every
function of every kernel through Triton's compiler for sm_90 with its first two candidate
configurations, as `tests/triton/test_gpu_compile.py` does. Needs Triton's NVIDIA backend
(ptxas), not a GPU.

    python -m benchmarks.triton.zoo_gpu_compile opt gpt2 --amp bfloat16 --batch 2

Prints one line per graph (kernels compiled, failed) and each failure with its kernel's text;
exits 1 when a kernel failed. `check(name, ...)` returns the failures (for tests).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import traceback
from typing import Optional

import torch

POINTER_TYPES = {
    torch.float32: "*fp32", torch.float64: "*fp64", torch.bfloat16: "*bf16",
    torch.float16: "*fp16", torch.int64: "*i64", torch.int32: "*i32", torch.int16: "*i16",
    torch.int8: "*i8", torch.uint8: "*u8", torch.bool: "*i1",
}


@dataclasses.dataclass
class Failure:
    graph: int
    kernel: str
    error: str
    text: str


def capture_graphs(name: str, batch: int = 2, training: bool = True,
                   amp: Optional[torch.dtype] = torch.bfloat16) -> list:
    """(graph module, example values, output strides, `SymbolicSizes` or None) of every graph
    inductor generates code for (symbolic graphs, whose sizes vary between calls, too) while
    `dynamo.jit(model)` runs one step of zoo model `name` on CPU."""
    import dynamo
    from benchmarks.zoo import catalog
    from inductor import pipeline

    captured = []
    generate = pipeline._generate

    def recording(gm, example_inputs, output_strides, mode=None, symbols=None):
        captured.append((copy.deepcopy(gm), pipeline._fakes_for(gm, example_inputs),
                         output_strides, symbols))
        return generate(gm, example_inputs, output_strides, mode, symbols)

    workload = catalog.build_workload(name, batch=batch, training=training)
    function = dynamo.jit(workload.model)
    autocast = torch.autocast("cpu", dtype=amp, enabled=amp is not None)
    pipeline._generate = recording
    try:
        if training:
            with autocast:
                loss = workload.loss(function(*workload.args, **workload.kwargs),
                                     workload.targets)
            loss.backward()
        else:
            with torch.no_grad(), autocast:
                function(*workload.args, **workload.kwargs)
    finally:
        pipeline._generate = generate
        dynamo.reset()
    return captured


def cuda_module(gm, example_values, output_strides, processors: int = 132, symbols=None):
    """(Triton module, dtype lookup) of a graph printed for a CUDA target of `processors` SMs,
    through the stages `inductor.pipeline._generate_triton` runs (horizontal fusion included);
    `symbols`: the `SymbolicSizes` of a graph compiled over symbolic sizes (its kernels take
    the size symbols as int64 arguments), as `pipeline._compile_symbolic_aten` compiles it."""
    import contextlib

    from inductor.ir.symbols import hints_in_effect
    from inductor.size_variants import int_sizes_not_symbolic

    _as_cuda_graph(gm)
    if symbols is None:
        return _cuda_module(gm, example_values, output_strides, processors, None)
    with contextlib.ExitStack() as stack:
        stack.enter_context(hints_in_effect(symbols.hints))
        stack.enter_context(int_sizes_not_symbolic())
        return _cuda_module(gm, example_values, output_strides, processors, symbols)


def _cuda_module(gm, example_values, output_strides, processors: int, symbols):
    from inductor import lower as lowering
    from inductor.codegen.triton import source as triton_source
    from inductor.config import config
    from inductor.schedule.combine import combine_kernels
    from inductor.schedule.scheduler import schedule
    from inductor.schedule.tiling import Target, tile

    loop_graph = lowering.lower(gm, example_values, output_strides, torch.device("cpu"))
    plan = schedule(loop_graph)
    if symbols is not None:
        plan.size_hints, plan.symbol_bindings = dict(symbols.hints), dict(symbols.bindings)
    tile(plan, Target("cuda", processors, config.triton_persistent_limit,
                      config.triton_split_reductions))
    plan = combine_kernels(plan)

    def dtype_of(name):
        return plan.buffers[name].get_dtype()
    return triton_source.generate(plan, dtype_of, interpret=False), dtype_of


def _as_cuda_graph(gm) -> None:
    """A graph traced for CPU holds `framejit.vml(x, name)` (eager's VML rounding on CPU,
    `inductor/vml.py`), which Triton has no code for: a CUDA graph holds `aten.<name>`."""
    from inductor.vml import VML

    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is VML:
            node.target = getattr(torch.ops.aten, node.args[1]).default
            node.args = node.args[:1]
    gm.recompile()


def compile_module(module, dtype_of, graph: int = 0, candidates: int = 2) -> tuple:
    """(functions compiled, [Failure]) compiling every function of `module` for sm_90."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from inductor.runtime import triton_autotune as autotune
    from inductor.runtime import triton_build

    loaded = triton_build.load(module.text, interpret=False)
    compiled, failures = 0, []
    for kernel in module.kernels:
        roles = [function.role for function in kernel.functions]
        pointers = [POINTER_TYPES[dtype_of(name)] for name in kernel.arguments] + \
            ["i64"] * len(kernel.size_symbols) + \
            [POINTER_TYPES[dtype] for dtype in kernel.spec.workspaces]
        choices = autotune.candidates(_spec_at_hints(kernel), roles, exhaustive=False,
                                      interpret=False)
        for candidate in choices[:candidates]:
            positions = range(len(roles)) if kernel.spec.kind in ("split", "scatter") \
                else [candidate.variant]
            for position, arguments in zip(positions, candidate.arguments):
                function = kernel.functions[position]
                jit = getattr(loaded, function.name)
                blocks = {key: value for key, value in arguments.items()
                          if key.endswith("BLOCK")}
                signature = dict(zip(jit.arg_names, pointers))
                signature.update({key: "constexpr" for key in blocks})
                settings = {"num_warps": arguments.get("num_warps", 4)}
                if kernel.spec.programmatic:
                    settings["launch_pdl"] = True
                try:
                    triton.compile(ASTSource(jit, signature, blocks),
                                   target=GPUTarget("cuda", 90, 32), options=settings)
                    compiled += 1
                except Exception as error:  # noqa: BLE001  (every failure is reported)
                    failures.append(Failure(graph, function.name,
                                            f"{type(error).__name__}: {error}",
                                            getattr(function, "text", str(function))))
    return compiled, failures


def _spec_at_hints(kernel):
    """The `LaunchSpec` a kernel's candidates come from: over symbolic sizes, that of the size
    bucket of the example call's sizes (`triton_sizes.bucket_spec`), as a `SizedLauncher`
    chooses them."""
    if not kernel.size_symbols:
        return kernel.spec
    from inductor.runtime.triton_sizes import bucket_spec, extent_function

    extents = extent_function(kernel.spec, kernel.size_symbols)(
        *[kernel.size_hints[name] for name in kernel.size_symbols])
    return bucket_spec(kernel.spec, extents)


def check(name: str, batch: int = 2, training: bool = True,
          amp: Optional[torch.dtype] = torch.bfloat16, log=None) -> list:
    """The failures compiling for sm_90 every kernel of zoo model `name`'s graphs."""
    failures = []
    captured = capture_graphs(name, batch, training, amp)
    for graph, (gm, values, strides, symbols) in enumerate(captured):
        try:
            module, dtype_of = cuda_module(gm, values, strides, symbols=symbols)
            compiled, failed = compile_module(module, dtype_of, graph)
        except Exception as error:  # noqa: BLE001  (a graph that does not print: reported)
            failures.append(Failure(graph, "(graph)", f"{type(error).__name__}: {error}",
                                    traceback.format_exc()))
            continue
        failures += failed
        if log is not None:
            log(f"{name} graph {graph}{' (symbolic sizes)' if symbols else ''}: "
                f"{len(module.kernels)} kernels, {compiled} functions compiled, "
                f"{len(failed)} failed")
    return failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--amp", default="bfloat16", help="CPU autocast dtype; 'none': off")
    parser.add_argument("--inference", action="store_true", help="no backward graphs")
    options = parser.parse_args(argv)
    amp = None if options.amp == "none" else getattr(torch, options.amp)
    failed = False
    for name in options.models:
        failures = check(name, options.batch, not options.inference, amp, log=print)
        for failure in failures:
            print(f"== {name} graph {failure.graph} {failure.kernel}: {failure.error}\n"
                  f"{failure.text}")
        failed = failed or bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
