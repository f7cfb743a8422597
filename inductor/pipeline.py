"""The pipeline: the one module that knows the order of inductor's stages.

Input: an FX graph and example inputs (torch's backend signature). Output: a `CompiledGraph`,
a callable taking the same flat tensors and returning what the graph returns.

    torch-level FX graph --decompose--> functional ATen graph --lower--> loop IR
        --schedule--> kernel plans --codegen--> C++ source + Python wrapper --build--> callable
                                   (GPU, or cpu_backend "triton": tiling --> Triton source
                                    --build--> launchers; mode "reduce-overhead": CUDA graphs)

`compile_fx` handles what only a torch-level graph has (training, global-state calls, input
mutation, outputs that alias inputs); `compile_aten` compiles an already functional ATen graph.
"""
from __future__ import annotations

import functools
import logging
import operator
import os
import time
from typing import Callable, Optional, Sequence

import torch
import torch.fx
import torch.utils._pytree as pytree

from inductor import debug_artifacts
from inductor.config import config
from inductor.graph_calls import hookless
from inductor.decompose import (GRAD_MODE_CALLS, AtenGraph, SharedInputWrites, UnsupportedGraph,
                                trace_aten)
from inductor.runtime import fallbacks
from inductor.runtime.compiled_graph import (AnySharing, CompiledGraph, GraphReport,
                                             Specialized,
                                             StoragePattern)
from inductor.runtime.locks import serialized
from inductor.runtime import native_program
from inductor.runtime.output_aliases import alias_rebuilder
from inductor.ir.symbols import hints_in_effect
from inductor.size_variants import (NotSymbolic, SymbolicSizes, bind_symbols,
                                    blank_inputs, compile_per_size, concrete_inputs,
                                    evaluated, filled,
                                    has_symbolic_sizes, int_sizes_not_symbolic,
                                    layout_fallback, per_size_reason, sizes_fixed,
                                    specialize, specialize_aten, with_layout_fallback,
                                    symbol_bindings, symbol_hints, alias_geometry)

log = logging.getLogger("framejit.inductor")
output_code = logging.getLogger("framejit.output_code")


MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@serialized     # one compilation at a time per process (runtime/locks.py says why)
def compile_fx(gm: torch.fx.GraphModule, example_inputs: Sequence, *,
               mode: Optional[str] = None) -> CompiledGraph:
    """Compile a torch-level FX graph (torch's backend signature) into a `CompiledGraph`.

    `mode` (for graphs on GPUs): None or "default"; "reduce-overhead" replays the whole graph
    as a CUDA graph; "max-autotune" also times more kernel configurations;
    "max-autotune-no-cudagraphs" only the latter.

    With grad mode on and an input (or a parameter of `gm`) requiring grad, delegates to
    `inductor.autograd.compile_training`; where that package is missing, runs `gm` as is so
    results and gradients stay correct. Graphs that cannot be compiled (unpaired autocast
    regions) also run as is; the reason is on the result's `report`. Graphs with symbolic
    sizes get one static variant per input size (`inductor/size_variants.py`); training
    ones go to `compile_training` whole where it takes symbolic sizes.
    """
    if mode not in MODES:
        raise ValueError(f"inductor.compile_fx: unknown mode {mode!r}; expected one of "
                         f"{', '.join(repr(known) for known in MODES)}")
    started = time.perf_counter()
    if _makes_tensors_requiring_grad(gm):
        return _as_is(gm, "the graph creates tensors that require grad (their autograd "
                      "history starts inside it)", started)
    symbolic = has_symbolic_sizes(gm, example_inputs)
    training = _needs_autograd(gm, example_inputs)
    whole = training and _training_takes_symbolic_sizes() and \
        all(isinstance(value, (torch.Tensor, torch.SymInt, int)) and
            not isinstance(value, bool) for value in example_inputs)
    if symbolic and not whole:
        return _symbolic_or_per_size(
            gm, example_inputs, lambda: _compile_symbolic(gm, example_inputs, mode),
            lambda static, inputs, _: compile_fx(static, inputs, mode=mode), started)
    if training:
        stray = next((value for value in example_inputs
                      if not isinstance(value, torch.Tensor)), None)
        if stray is not None and not symbolic:  # a non-tensor input of a static graph
            return _as_is(gm, f"non-tensor graph input of type {type(stray).__name__} in a "
                          "training graph", started)
        try:
            from inductor.autograd import compile_training
        except ImportError:
            return _as_is(gm, "training graph: inductor.autograd is not available", started)
        inner = functools.partial(compile_aten, mode=mode)
        if mode in ("reduce-overhead", "max-autotune") and \
                _device_of(example_inputs).type == "cuda":   # forward, backward: CUDA graphs
            from inductor.runtime.cudagraphs import recording_training
            inner = recording_training(inner)
        return compile_training(gm, example_inputs, inner)
    compiled = _compile_inference(gm, example_inputs, mode, started)
    grad_mode = torch.is_grad_enabled() if _requires_grad(gm, example_inputs) else None
    pattern = compiled.report.input_pattern
    if grad_mode is None and pattern is None:
        return compiled
    # Compiled for this grad mode (where an input requires grad) and this sharing of storages
    # (where the graph writes into an input): calls presenting others get their own variant.
    run = Specialized(compiled.run, grad_mode, pattern,
                      lambda inputs: compile_fx(gm, inputs, mode=mode), gm.forward)
    return CompiledGraph(run, compiled.report)


def _symbolic_or_per_size(gm: torch.fx.GraphModule, example_inputs: Sequence,
                          compile_symbolic: Callable, compile_static: Callable, started: float,
                          specializer: Callable = specialize) -> CompiledGraph:
    """A graph with symbolic sizes compiled once for every size (`compile_symbolic`), or,
    where a stage raises `NotSymbolic`, one static variant per size (`compile_static`),
    counted as `per_size` fallbacks with the reason on the report."""
    if sizes_fixed(gm, example_inputs):     # the guards fixed every symbol: one size
        compiled = compile_per_size(gm, concrete_inputs(example_inputs), compile_static,
                                    reason=per_size_reason("sizes the guards fixed changed"),
                                    specializer=specializer, first_counted=False)
        compiled.report.compile_seconds = time.perf_counter() - started
        return compiled
    try:
        compiled = compile_symbolic()
    except NotSymbolic as error:
        log.info("a graph with symbolic sizes is compiled per size: %s", error.reason)
        compiled = compile_per_size(gm, concrete_inputs(example_inputs), compile_static,
                                    reason=per_size_reason(error.reason),
                                    specializer=specializer)
    except UnsupportedGraph:
        raise                   # by design, for every size: the caller runs it as is
    except Exception as error:  # noqa: BLE001  (a bug of the symbolic path: per size, counted)
        if not config.fallback_on_error:
            raise
        log.warning("inductor could not compile a graph over symbolic sizes (%s: %s); "
                    "compiling it per size", type(error).__name__, error)
        fallbacks.record("error", f"symbolic compile failed: {type(error).__name__}: {error}")
        compiled = compile_per_size(gm, concrete_inputs(example_inputs), compile_static,
                                    reason=per_size_reason(
                                        f"the symbolic compile failed: {type(error).__name__}"),
                                    specializer=specializer)
    compiled.report.compile_seconds = time.perf_counter() - started
    return compiled


def _compile_symbolic(gm: torch.fx.GraphModule, example_inputs: Sequence,
                      mode: Optional[str]) -> CompiledGraph:
    """One compile of a torch-level inference graph with symbolic sizes, for every size:
    traced in the graph's own fake mode (`decompose_symbolic.py`), then
    `_compile_symbolic_aten`."""
    if _needs_autograd(gm, example_inputs):     # (SymInt inputs: the training path's refusal)
        raise NotSymbolic("a graph computing gradients with SymInt inputs")
    from inductor.decompose_symbolic import trace_aten_symbolic
    try:
        aten_graph = trace_aten_symbolic(gm, example_inputs)
    except SharedInputWrites as error:  # as is for every size, as the static path for one
        return _as_is_for_this_sharing(gm, example_inputs, str(error), mode)
    except UnsupportedGraph as error:
        raise NotSymbolic(str(error)) from error
    inner = _compile_symbolic_aten(_without_alias_outputs(aten_graph), aten_graph.fake_inputs,
                                   aten_graph.output_strides, mode, layout_fallback=False)
    if mode in ("reduce-overhead", "max-autotune") and inner.report.reason is None and \
            _device_of(example_inputs).type == "cuda":   # one recording per size (bounded)
        from inductor.runtime.cudagraphs import CudaGraphRunner
        inner = CompiledGraph(CudaGraphRunner(inner, aten_graph), inner.report)
    requires_grad = _requires_grad(gm, example_inputs)
    geometry = alias_geometry(aten_graph.output_aliases, symbol_bindings(aten_graph.fake_inputs))
    # another input layout: per-size variants of the torch-level graph (eager's strides)
    blanks = blank_inputs(example_inputs)   # not the caller's tensors: made on first need

    def variants() -> CompiledGraph:
        return compile_per_size(
            gm, filled(blanks), lambda static, inputs, _: compile_fx(static, inputs, mode=mode),
            reason=per_size_reason("an input laid out otherwise than traced"))
    run = _wrap_observable_behaviour(aten_graph, inner, requires_grad,
                                     _version_steps(aten_graph), geometry=geometry,
                                     layout_fallback=layout_fallback(variants))
    compiled = CompiledGraph(run, inner.report)
    pattern = StoragePattern(example_inputs, aten_graph.constants) \
        if aten_graph.mutated_inputs() else None
    if not requires_grad and pattern is None:
        return compiled
    # compiled for this grad mode and this sharing of storages where the graph writes into
    # an input: a call presenting others gets its own compile
    return CompiledGraph(Specialized(compiled.run, torch.is_grad_enabled() if requires_grad
                                     else None, pattern,
                                     lambda inputs: compile_fx(gm, inputs, mode=mode),
                                     gm.forward), compiled.report)


def _as_is_for_this_sharing(gm: torch.fx.GraphModule, example_inputs: Sequence, reason: str,
                            mode: Optional[str]) -> CompiledGraph:
    """`gm` run as is for every call whose inputs share storages (a graph writing into
    inputs that share memory; any sizes, any offsets); calls without sharing get one compile."""
    compiled = _as_is(gm, reason, time.perf_counter())
    run = Specialized(compiled.run, None, AnySharing(),
                      lambda inputs: compile_fx(gm, inputs, mode=mode), gm.forward)
    return CompiledGraph(run, compiled.report)


def _compile_symbolic_aten(gm: torch.fx.GraphModule, example_inputs: Sequence,
                           output_strides: Optional[Sequence],
                           mode: Optional[str], layout_fallback: bool = True) -> CompiledGraph:
    """One compile of a functional ATen graph with symbolic sizes, for every size: the
    loop IR, plans and kernels over the graph's ShapeEnv symbols, which the wrapper binds
    from each call's input sizes (docs/inductor.md, "Symbolic sizes"). A call whose inputs
    are laid out otherwise runs per-size variants (`layout_fallback`; else the wrapper's
    `InputLayoutChanged` reaches the caller)."""
    fakes = _fakes_for(gm, example_inputs)
    stray = next((value for value in fakes
                  if not isinstance(value, (torch.Tensor, torch.SymInt))), None)
    if stray is not None:
        raise NotSymbolic(f"a graph input of type {type(stray).__name__}")
    if _eager_only_reason(example_inputs) is not None:
        raise NotSymbolic(_eager_only_reason(example_inputs))
    if output_strides is None:
        output_strides = recorded_output_strides(gm)
    symbols = SymbolicSizes(symbol_hints(fakes), symbol_bindings(fakes))
    with hints_in_effect(symbols.hints), int_sizes_not_symbolic():
        compiled = _generate(gm, fakes, output_strides, mode, symbols)
    if not layout_fallback:
        return compiled
    blanks = blank_inputs(example_inputs)   # not the caller's tensors: made on first need

    def variants() -> CompiledGraph:
        return compile_per_size(
            gm, filled(blanks), _static_aten(gm, output_strides, mode),
            reason=per_size_reason("an input laid out otherwise than traced"),
            specializer=specialize_aten)
    return CompiledGraph(with_layout_fallback(compiled.run, variants), compiled.report)


def _training_takes_symbolic_sizes() -> bool:
    """Whether `inductor.autograd` traces graphs with symbolic sizes in their own fake mode
    (its `SymbolicInputs`, issue 23): then a dynamic training graph goes there whole (one
    joint trace; its forward and backward ATen graphs come back to `compile_aten`, which
    compiles them per size), else it gets a static training compile per size here. Its
    SymInt placeholders (ints carried across a break) go there too."""
    try:
        import inductor.autograd as autograd
    except ImportError:
        return False
    return getattr(autograd, "SymbolicInputs", None) is not None


def _compile_inference(gm: torch.fx.GraphModule, example_inputs: Sequence,
                       mode: Optional[str], started: float) -> CompiledGraph:
    """decompose -> compile_aten -> the wrapper reproducing what eager's callers observe."""
    try:
        aten_graph = trace_aten(gm, example_inputs)
    except SharedInputWrites as error:
        compiled = _as_is(gm, str(error), started)
        compiled.report.input_pattern = StoragePattern(example_inputs)
        return compiled
    except UnsupportedGraph as error:
        return _as_is(gm, str(error), started)
    inner = compile_aten(_without_alias_outputs(aten_graph), aten_graph.fake_inputs,
                         output_strides=aten_graph.output_strides, mode=mode)
    if mode in ("reduce-overhead", "max-autotune") and inner.report.reason is None and \
            _device_of(example_inputs).type == "cuda":
        from inductor.runtime.cudagraphs import CudaGraphRunner
        inner = CompiledGraph(CudaGraphRunner(inner, aten_graph), inner.report)
    steps = _version_steps(aten_graph)
    run = _wrap_observable_behaviour(aten_graph, inner, _requires_grad(gm, example_inputs),
                                     steps)
    report = inner.report
    if aten_graph.mutated_inputs():
        report.input_pattern = StoragePattern(example_inputs, aten_graph.constants)
    report.compile_seconds = time.perf_counter() - started
    return CompiledGraph(run, report)


@serialized
def compile_aten(gm: torch.fx.GraphModule, example_inputs: Sequence,
                 output_strides: Optional[Sequence] = None, *,
                 mode: Optional[str] = None) -> CompiledGraph:
    """Compile a decomposed, functional ATen-level graph with no autograd.

    `example_inputs` are real or fake tensors, one per placeholder. Trailing `aten.copy_`
    nodes into placeholders write the new values into those inputs. The result returns a
    list of outputs in the order of the graph's output node, with `output_strides` (default:
    the strides of the output nodes' recorded `val` metas, where recorded). `mode`: as for
    `compile_fx` (here only the autotuning part; CUDA graphs wrap the result in `compile_fx`).
    A graph with symbolic sizes (inductor.autograd's symbolic forward and backward) gets one
    static variant per input size, `output_strides` (ints or SymInts) evaluated for it.
    """
    started = time.perf_counter()
    if has_symbolic_sizes(gm, example_inputs):
        return _symbolic_or_per_size(
            gm, example_inputs,
            lambda: _compile_symbolic_aten(gm, example_inputs, output_strides, mode),
            _static_aten(gm, output_strides, mode), started, specializer=specialize_aten)
    if output_strides is None:
        output_strides = recorded_output_strides(gm)
    reason = _eager_only_reason(example_inputs)
    if reason is None:
        try:
            compiled = _generate(gm, example_inputs, output_strides, mode)
            compiled.report.compile_seconds = time.perf_counter() - started
            return compiled
        except Exception as error:  # noqa: BLE001  (any compiler bug: fall back, or raise)
            if not config.fallback_on_error:
                raise
            log.warning("inductor could not compile a graph (%s: %s); running it through "
                        "eager kernels", type(error).__name__, error)
            reason = f"compilation failed: {type(error).__name__}: {error}"
            fallbacks.record("error", reason)
    elif config.fallback_only or reason == "Triton is not installed":
        fallbacks.record("configured", reason)
    else:
        fallbacks.record("unsupported", reason)
    report = GraphReport(reason=reason)
    run = _fallback_runner(gm, output_strides, report)
    report.compile_seconds = time.perf_counter() - started
    return CompiledGraph(run, report)


def _static_aten(gm: torch.fx.GraphModule, output_strides: Optional[Sequence],
                 mode: Optional[str]) -> Callable:
    """`compile_aten` of one static variant of the symbolic ATen graph `gm`: `output_strides`
    evaluated under the variant's sizes (the contract's symbol binding), else the variant's
    own recorded ones."""
    def compile_static(static: torch.fx.GraphModule, inputs: list,
                       all_inputs: list) -> CompiledGraph:
        strides = None
        if output_strides is not None:
            strides = evaluated(list(output_strides), bind_symbols(gm, all_inputs))
        return compile_aten(static, inputs, strides, mode=mode)
    return compile_static


def _eager_only_reason(example_inputs: Sequence) -> Optional[str]:
    """Why a graph runs through eager kernels without code generation, or None."""
    if config.fallback_only:
        return "inductor.config.fallback_only is set"
    devices = {value.device.type for value in example_inputs if isinstance(value, torch.Tensor)
               and not _host_scalar(value)} or \
        {value.device.type for value in example_inputs if isinstance(value, torch.Tensor)}
    if len(devices) > 1:
        return f"inputs on several devices ({', '.join(sorted(devices))})"
    if devices - {"cpu", "cuda"}:
        return f"no code generator for {', '.join(sorted(devices - {'cpu'}))} tensors"
    if devices == {"cuda"} or config.cpu_backend == "triton":
        try:
            import triton  # noqa: F401
        except ImportError:
            return "Triton is not installed"
    return None


def _host_scalar(value: torch.Tensor) -> bool:
    """A 0-d CPU tensor: eager mixes one with tensors of any device (as a scalar)."""
    return value.dim() == 0 and value.device.type == "cpu"


def _device_of(example_inputs: Sequence, gm: Optional[torch.fx.GraphModule] = None
               ) -> torch.device:
    """The graph's device: its first tensor input's (a 0-d CPU tensor only where no input
    lives elsewhere: eager reads one beside CUDA tensors as a scalar, and a backward graph may
    take such a saved divisor first); for a graph without tensor inputs, that of the first
    tensor it makes (`torch.randn(4, device="cuda")` was generated as C++)."""
    tensors = [value for value in example_inputs if isinstance(value, torch.Tensor)]
    for value in [value for value in tensors if not _host_scalar(value)] + tensors:
        return value.device
    for node in gm.graph.nodes if gm is not None else ():
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            return value.device
    return torch.device("cpu")


def _generate(gm: torch.fx.GraphModule, example_inputs: Sequence,
              output_strides: Optional[Sequence], mode: Optional[str] = None,
              symbols: Optional[SymbolicSizes] = None) -> CompiledGraph:
    """lower -> schedule -> codegen -> build (the stages of `compile_aten`); `symbols`:
    the hints and bindings of a graph compiled over symbolic sizes."""
    from inductor import lower as lowering
    from inductor.codegen import wrapper
    from inductor.codegen.cpp import source as cpp_source
    from inductor.ir.verifier import verify_graph, verify_plan
    from inductor.runtime import build
    from inductor.schedule.scheduler import schedule

    from inductor.codegen.devices import place_traced_constants
    from inductor.lower.common_subexpressions import eliminate_common_subexpressions
    device = _device_of(example_inputs, gm)
    place_traced_constants(gm, device)     # `torch.tensor(data, device=...)` (devices.py)
    eliminate_common_subexpressions(gm)
    loop_graph = debug_artifacts.timed("lower", lowering.lower, gm, _fakes_for(gm, example_inputs),
                                       output_strides, device)
    debug_artifacts.lowered(loop_graph)
    if config.verify_ir:
        verify_graph(loop_graph)
    plan = debug_artifacts.timed("schedule", schedule, loop_graph)
    if symbols is not None:
        plan.size_hints, plan.symbol_bindings = dict(symbols.hints), dict(symbols.bindings)
    if config.verify_ir:
        verify_plan(plan)
    dtype_of = _dtype_lookup(plan)
    if config.uses_triton(device):
        return _generate_triton(plan, loop_graph, dtype_of, device, mode)
    segments = cpp_source.segments(plan, dtype_of, config.resolved_threads(),
                                   config.parallel_threshold, config.vectorize)
    workers = config.compile_workers or os.cpu_count() or 1
    units = cpp_source.translation_units(segments, 2 * workers)
    functions = debug_artifacts.timed("build", build.build, units)
    entries = [None] * len(segments)
    for unit, unit_functions in zip(units, functions):
        for segment_index, position in unit.segment_entry.items():
            entries[segment_index] = unit_functions[position]
    text, run = wrapper.generate(plan, segments, entries)
    if symbols is not None:
        _check_bound(text, plan.symbol_bindings)
    source = "\n".join([text] + [segment.body for segment in segments])
    output_code.debug("generated code for a graph:\n%s", source)
    debug_artifacts.generated(plan, source)
    report = GraphReport(kernel_count=len(plan.kernels()),
                         fallback_ops=dict(loop_graph.fallback_ops),
                         library_calls=dict(loop_graph.library_calls), source=source,
                         channels_last=loop_graph.channels_last)
    return CompiledGraph(run, report)


def _check_bound(text: str, bindings: dict) -> None:
    """Every size symbol the wrapper reads is bound from the inputs, else `NotSymbolic`
    (a symbol only an input's size expression holds, `2*s0`, is not read off it)."""
    import re
    used = set(re.findall(r"\bs\d+\b", text)) - {symbol.name for symbol in bindings}
    if used:
        raise NotSymbolic(f"sizes {sorted(used)} are bound by no input size")


def _generate_triton(plan, loop_graph, dtype_of, device: torch.device,
                     mode: Optional[str]) -> CompiledGraph:
    """tiling -> Triton source -> build (parallel compilation) -> launchers -> wrapper."""
    from inductor.codegen.triton import source as triton_source
    from inductor.codegen.triton import wrapper as triton_wrapper
    from inductor.runtime import triton_build
    from inductor.runtime.triton_launch import Launcher, programmatic_steps
    from inductor.schedule.combine import combine_kernels
    from inductor.schedule.tiling import tile, target_for

    interpret = device.type == "cpu"
    tile(plan, target_for(device))
    plan = combine_kernels(plan)
    module = triton_source.generate(plan, dtype_of, interpret,
                                    triton_build.programmatic_launch(device), device=device)
    loaded = triton_build.load(module.text, interpret)
    exhaustive = mode in ("max-autotune", "max-autotune-no-cudagraphs")
    launchers, arguments, tasks = {}, {}, {}
    inputs = {buffer.get_name() for buffer in plan.inputs}
    programmatic = programmatic_steps(module.kernels)
    for kernel in module.kernels:
        outside = [position for position, name in enumerate(kernel.arguments) if name in inputs]
        launcher = Launcher(kernel, loaded, device, [dtype_of(name) for name in kernel.arguments],
                            exhaustive, interpret, outside, kernel.step in programmatic)
        launchers[kernel.step], arguments[kernel.step] = launcher, kernel.arguments
        tasks.update(launcher.compile_tasks())
    debug_artifacts.timed("build", triton_build.precompile, list(tasks.values()),
                          config.compile_workers or os.cpu_count() or 1)
    text, run = triton_wrapper.generate(plan, launchers, arguments)
    output_code.debug("generated code for a graph:\n%s\n%s\n%s", text, plan.describe(),
                      module.text)
    debug_artifacts.generated(plan, text + "\n" + module.text)
    report = GraphReport(kernel_count=len(plan.kernels()),
                         fallback_ops=dict(loop_graph.fallback_ops),
                         library_calls=dict(loop_graph.library_calls),
                         source=text + "\n" + module.text,
                         channels_last=loop_graph.channels_last)
    return CompiledGraph(run, report)


def _dtype_lookup(plan):
    def dtype_of(name: str) -> torch.dtype:
        return plan.buffers[name].get_dtype()
    return dtype_of


def _fakes_for(gm: torch.fx.GraphModule, example_inputs: Sequence) -> list:
    """Example values per placeholder: the graph's recorded fakes, else the given inputs."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    values = []
    for node, example in zip(placeholders, example_inputs):
        recorded = node.meta.get("val")
        values.append(recorded if isinstance(recorded, (torch.Tensor, torch.SymInt)) else example)
    return values


def _requires_grad(gm: torch.fx.GraphModule, example_inputs: Sequence) -> bool:
    """Whether an input, or a tensor the graph module holds, requires grad."""
    if any(isinstance(value, torch.Tensor) and value.requires_grad for value in example_inputs):
        return True
    attributes = (node.target for node in gm.graph.nodes if node.op == "get_attr")
    for target in attributes:
        value = gm
        for part in target.split("."):
            value = getattr(value, part, None)
        if isinstance(value, torch.Tensor) and value.requires_grad:
            return True
    return any(parameter.requires_grad for parameter in gm.parameters())


def _computes_with_grad(gm: torch.fx.GraphModule) -> bool:
    """Whether some op of the graph runs with grad mode on: the caller's grad mode, switched
    by the graph's own `_set_grad_enabled` calls (`with torch.no_grad():` regions)."""
    enabled = torch.is_grad_enabled()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in GRAD_MODE_CALLS:
            enabled = bool(node.args[0])
        elif enabled and node.op in ("call_function", "call_method", "call_module"):
            return True
    return False


def _needs_autograd(gm: torch.fx.GraphModule, example_inputs: Sequence) -> bool:
    """Whether autograd must see the graph: something requires grad and some op runs with
    grad mode on (regions included: `torch.enable_grad()` inside a `no_grad` caller). Never
    under `torch.inference_mode`, where autograd records nothing, `enable_grad` regions
    included (the front end guards the mode: another mode is another compile)."""
    return not torch.is_inference_mode_enabled() and _requires_grad(gm, example_inputs) and \
        _computes_with_grad(gm)


def _makes_tensors_requiring_grad(gm: torch.fx.GraphModule) -> bool:
    """A factory with `requires_grad=True` or `requires_grad_()` in the graph: the tensor is a
    leaf of autograd created by the graph (compiled as inference, it lost requires_grad)."""
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        if node.kwargs.get("requires_grad") is True:
            return True
        name = node.target if isinstance(node.target, str) else \
            getattr(node.target, "__name__", "")
        if name == "requires_grad_" and (len(node.args) < 2 or node.args[1] is not False) \
                and node.kwargs.get("requires_grad", True) is not False:
            return True
    return False


def _as_is(gm: torch.fx.GraphModule, reason: str, started: float) -> CompiledGraph:
    log.info("running the graph as is: %s", reason)
    fallbacks.record("unsupported", reason)
    report = GraphReport(reason=reason, fallback_ops={"<whole graph>": 1})
    report.compile_seconds = time.perf_counter() - started
    return CompiledGraph(gm.forward, report)


def _without_alias_outputs(aten_graph: AtenGraph) -> torch.fx.GraphModule:
    """The functional graph with outputs the wrapper rebuilds as views replaced by None."""
    module = aten_graph.module
    if not any(aten_graph.output_aliases):
        return module
    output_node = next(node for node in module.graph.nodes if node.op == "output")
    values = list(output_node.args[0])
    for position, alias in enumerate(aten_graph.output_aliases):
        if alias is not None:
            values[position] = None
    output_node.args = (values,)
    module.graph.eliminate_dead_code()
    module.recompile()
    return module


def _version_steps(aten_graph: AtenGraph) -> tuple:
    """(argument position, steps) for each input the graph writes: how far eager's in-place
    ops move its version counter (measured by `trace_aten` on fake copies; at least 1). The
    kernels write inputs in place without moving it, and autograd would not see that a
    tensor saved for a backward outside the graph was overwritten: a silently wrong
    gradient where eager raises."""
    return tuple((position, max(1, aten_graph.version_steps.get(position, 1)))
                 for position in aten_graph.mutated_inputs())


def _set_output_versions(results, output_versions: tuple) -> None:
    """Version counters of the outputs the graph made and wrote, as eager's in-place ops
    left them (`AtenGraph.output_versions`)."""
    tensors, versions = [], []
    for position, version in output_versions:
        value = results[position]
        if isinstance(value, torch.Tensor) and not value.is_inference():
            tensors.append(value)
            versions.append(version)
    if tensors:
        torch._C._autograd._unsafe_set_version_counter(tuple(tensors), tuple(versions))


def _wrap_observable_behaviour(aten_graph: AtenGraph, inner: CompiledGraph,
                               without_grad: bool, version_steps: tuple = (),
                               geometry: Optional[Callable] = None,
                               layout_fallback: Optional[Callable] = None) -> Callable:
    """Pass lifted constants, rebuild aliasing outputs (from their base: an input, or an
    output, hidden ones included, which are then dropped), set the grad mode the graph
    leaves, move written inputs' version counters as eager's in-place ops would
    (`version_steps`), unflatten. `without_grad`: an input requires grad but no op of the
    graph runs with grad mode on, so the call runs with grad mode off (library calls and
    rebuilt views must not record autograd history). `geometry`: for a graph compiled over
    symbolic sizes, this call's (size, stride, offset) of the aliases that depend on them
    (`size_variants.alias_geometry`). `layout_fallback`: for such a graph, what runs a call
    whose inputs the wrapper finds laid out otherwise than traced (`InputLayoutChanged`,
    raised before any work; `size_variants.layout_fallback`), caught here rather than in a
    frame around."""
    constants = tuple(aten_graph.constants)
    spec = aten_graph.output_spec
    aliases = aten_graph.output_aliases
    count = len(aliases)
    grad_mode = aten_graph.grad_mode_after
    rebuild = _fast_unflatten(spec)
    inner_run = inner.run
    # a generated wrapper's boxed form, called with a list of the arguments: a frame less per
    # call than `call(*arguments)`, which builds that list and calls it
    boxed = getattr(inner_run, "with_argument_list", None)
    rebuilt = alias_rebuilder(aliases, count) if any(aliases) else None

    output_versions = aten_graph.output_versions
    if not rebuilt and grad_mode is None and not constants and not without_grad and \
            not version_steps and not output_versions:
        return _plain_run(rebuild, inner_run, boxed, layout_fallback)

    if boxed is not None and layout_fallback is None and grad_mode is None and \
            not constants and not without_grad and not version_steps and not output_versions:
        program = _program(inner_run, rebuild, aliases) if geometry is None else None
        if program is not None:     # the aliases are fresh buffers: one native call
            return program

        def run_rebuilding(*inputs):    # only the aliases to rebuild: one frame, no `try`
            return rebuild(rebuilt(list(boxed(list(inputs))), inputs,
                                   geometry(inputs) if geometry is not None else None))
        return run_rebuilding

    written = _written_versions(version_steps)

    def run(*inputs):
        arguments = constants + inputs if constants else inputs
        versions = written(arguments) if version_steps else None
        if without_grad:
            entry = torch.is_grad_enabled()
            torch._C._set_grad_enabled(False)
        try:
            results = boxed(list(arguments)) if boxed is not None else inner_run(*arguments)
            if rebuilt:
                results = rebuilt(list(results), arguments,
                                  geometry(arguments) if geometry is not None else None)
        finally:
            if without_grad:
                torch._C._set_grad_enabled(entry)
        if versions:
            torch._C._autograd._unsafe_set_version_counter(*versions)
        if output_versions:
            _set_output_versions(results, output_versions)
        if grad_mode is not None:
            torch._C._set_grad_enabled(grad_mode)
        return rebuild(results)

    return _catching_layout_changes(run, layout_fallback)


def _written_versions(version_steps: tuple) -> Callable:
    """arguments -> (tensors, versions): the written inputs and the version counters eager's
    in-place ops leave them with (inference tensors, which have none, left out), or None.
    Positions and steps split once: an optimizer step writes ~450 inputs per call."""
    positions = tuple(position for position, _ in version_steps)
    steps = tuple(step for _, step in version_steps)
    fetch = operator.itemgetter(*positions) if len(positions) > 1 else \
        (lambda arguments: (arguments[positions[0]],)) if positions else (lambda arguments: ())

    def written(arguments):
        tensors = fetch(arguments)
        try:
            versions = tuple([tensor._version + step for tensor, step in zip(tensors, steps)])
        except RuntimeError:   # an inference tensor (no version counter)
            pairs = [(tensor, tensor._version + step) for tensor, step in zip(tensors, steps)
                     if not tensor.is_inference()]
            if not pairs:
                return None
            tensors = tuple(tensor for tensor, _ in pairs)
            versions = tuple(version for _, version in pairs)
        return (tensors, versions) if tensors else None
    return written


def _plain_run(rebuild: Callable, inner_run: Callable, boxed: Optional[Callable],
               layout_fallback: Optional[Callable]) -> Callable:
    """A graph with nothing to do around its call but unflatten the outputs (one frame: the
    per-call cost of small graphs is measured in these). `boxed`: the wrapper's form taking
    a list, else None."""
    if layout_fallback is None:
        program = _program(inner_run, rebuild)
        if program is not None:     # allocations and launches only: one native call
            return program
        if boxed is not None:
            def run_boxed(*inputs):
                return rebuild(boxed(list(inputs)))
            return run_boxed

        def run(*inputs):
            return rebuild(inner_run(*inputs))
        return run
    from inductor.codegen.wrapper import InputLayoutChanged

    def run_or_fall_back(*inputs):
        try:
            return rebuild(boxed(list(inputs)) if boxed is not None else inner_run(*inputs))
        except InputLayoutChanged:
            return layout_fallback(list(inputs))
    return run_or_fall_back


def _catching_layout_changes(run: Callable, layout_fallback: Optional[Callable]) -> Callable:
    """`run`, or where a graph compiled over symbolic sizes has a `layout_fallback`, `run`
    with the wrapper's `InputLayoutChanged` (raised before any work) sent to it."""
    if layout_fallback is None:
        return run
    from inductor.codegen.wrapper import InputLayoutChanged

    def run_or_fall_back(*inputs):
        try:
            return run(*inputs)
        except InputLayoutChanged:
            return layout_fallback(list(inputs))
    return run_or_fall_back


def _first(results):
    return results[0]


def _program(inner_run: Callable, rebuild: Callable, aliases: Optional[list] = None):
    """The wrapper run as one native call (`native_program`) returning what `rebuild` would
    make of its results (and the `aliases` it rebuilds), else None."""
    result = {tuple: native_program.TUPLE, list: native_program.LIST,
              _first: native_program.ONE}.get(rebuild)
    plan = getattr(inner_run, "native_plan", None)
    if aliases is not None:
        plan = native_program.owning_plan(plan, aliases)
    return native_program.runner(plan, result) if result is not None else None


def _fast_unflatten(spec) -> Callable:
    """Rebuild the output structure from the flat list (tuples and lists of tensors are built
    directly: pytree's general unflatten costs microseconds per call)."""
    if spec.type in (tuple, list) and spec.num_leaves == spec.num_children:
        return tuple if spec.type is tuple else list
    if spec.is_leaf():
        return _first
    return lambda results: pytree.tree_unflatten(list(results), spec)


def recorded_output_strides(gm: torch.fx.GraphModule) -> list:
    """Per output of `gm`: the strides of its node's recorded example value (`meta["val"]`,
    as make_fx records), or None."""
    output_node = next((node for node in reversed(gm.graph.nodes) if node.op == "output"), None)
    if output_node is None:
        return []
    values = output_node.args[0]
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    strides = []
    for value in values:
        example = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        strides.append(tuple(example.stride()) if isinstance(example, torch.Tensor) else None)
    return strides


def _fallback_runner(gm: torch.fx.GraphModule, output_strides, report: GraphReport) -> Callable:
    """Every op through its eager ATen kernel; outputs restrided to eager's strides."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            name = str(node.target.overloadpacket)
            report.fallback_ops[name] = report.fallback_ops.get(name, 0) + 1
    strides = list(output_strides or [])

    def run(*inputs):
        results = list(hookless(gm)(*inputs))
        for position, stride in enumerate(strides):
            value = results[position] if position < len(results) else None
            if isinstance(value, torch.Tensor) and stride is not None \
                    and not same_strides(value.shape, value.stride(), stride):
                results[position] = torch.empty_strided(
                    value.shape, stride, dtype=value.dtype, device=value.device).copy_(value)
        return results

    return run


def same_strides(shape, first, second) -> bool:
    """Whether two stride tuples address the same elements of a tensor of `shape`."""
    if any(size == 0 for size in shape):
        return True
    return all(size == 1 or a == b for size, a, b in zip(shape, first, second))
