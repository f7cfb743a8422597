"""Triton modules: the kernels of one graph become one Python module of `@triton.jit`
functions.

Input: a `GraphPlan` whose kernels carry a `tiling`. Output: a `TritonModule`: the module text
(the prelude, then each distinct function once, named by a hash of its text so repeated
layers share one function and one compilation) and, per kernel plan, a `TritonKernelSource`
naming its functions, the graph buffers it takes, the size symbols it takes after them
(graphs with symbolic sizes: the wrapper passes their values) and its `LaunchSpec`.
"""
from __future__ import annotations

import dataclasses
import hashlib

import torch

from inductor.codegen.bounds import buffer_extents
from inductor.codegen.devices import check_kernel_arguments
from inductor.codegen.triton.combo import ComboKernel
from inductor.codegen.triton.kernel import NAME, LaunchSpec, TritonKernel
from inductor.codegen.triton.prelude import PRELUDE
from inductor.codegen.triton.scan import TritonScanKernel
from inductor.codegen.triton.scatter import TritonScatterKernel
from inductor.config import config
from inductor.ir.nodes import ConstantBuffer, InputBuffer
from inductor.schedule.combine import ComboPlan
from inductor.schedule.plans import GraphPlan, KernelPlan, ScanPlan, ScatterPlan
from inductor.size_variants import NotSymbolic


@dataclasses.dataclass
class TritonKernelSource:
    """One kernel plan's functions and launch needs."""

    plan_name: str
    step: int                   # index of the plan in the graph plan's steps
    arguments: list             # graph buffer names, in parameter order
    functions: list             # KernelFunction, named
    spec: LaunchSpec
    in_place: list              # positions of arguments the kernel both reads and writes
    size_symbols: list = dataclasses.field(default_factory=list)  # names, after the buffers
    size_hints: dict = dataclasses.field(default_factory=dict)    # name -> example value

    def source(self) -> str:
        """The text of this kernel's functions (the autotuning cache key hashes it)."""
        return "\n\n".join(function.text.replace(NAME, function.name)
                           for function in self.functions)


@dataclasses.dataclass
class TritonModule:
    """The generated module of one graph."""

    text: str
    kernels: list               # TritonKernelSource per kernel plan, in step order


def function_name(role: str, text: str) -> str:
    """A name that depends only on the function's text."""
    return f"triton_{role}_{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def generate(plan: GraphPlan, dtype_of, interpret: bool,
             wait_for_prior: bool = False, device=None) -> TritonModule:
    """Print every kernel of `plan` (see the module docstring); `interpret`: for Triton's CPU
    interpreter (kernels report errors eager raises through a status word); `wait_for_prior`:
    for programmatic dependent launch (`triton_build.programmatic_launch`); `device`: the
    graph's (default: that of its first input or buffer), where every kernel argument must
    live (else `codegen/devices.py`'s `DeviceMismatch`, at compile time)."""
    device = device if device is not None else graph_device(plan)
    symbolic = bool(plan.size_hints)
    if symbolic and config.bounds_check:
        raise NotSymbolic("bounds mode (JIT_BOUNDS_CHECK) over symbolic sizes")
    extents = buffer_extents(plan)
    kernels, texts = [], {}
    inputs = {name for name, buffer in plan.buffers.items() if isinstance(buffer, InputBuffer)}
    bound = {symbol.name for symbol in plan.symbol_bindings}
    hints = {symbol.name: int(value) for symbol, value in plan.size_hints.items()}
    for position, step in enumerate(plan.steps):
        if not isinstance(step, KernelPlan):
            continue
        kind = TritonScatterKernel if isinstance(step, ScatterPlan) else TritonKernel
        kind = TritonScanKernel if isinstance(step, ScanPlan) else kind
        kind = ComboKernel if isinstance(step, ComboPlan) else kind
        printer = kind(step, dtype_of, interpret, wait_for_prior)
        printer.extents, printer.check_bounds = extents, config.bounds_check
        printer.symbolic = symbolic
        functions = printer.functions()
        for helper in getattr(printer, "helpers", ()):  # a combo's parts, called by name
            texts.setdefault(helper.name, helper.text.replace(NAME, helper.name))
        for function in functions:
            function.name = function_name(function.role, function.text)
            texts.setdefault(function.name, function.text.replace(NAME, function.name))
        arguments = printer.arguments()
        # Arguments a launch changes that the next launch reads: tuning runs a kernel once
        # per candidate and restores them after (an update of a graph input reads the input
        # it writes, which the plan lists among stores only: `x.add_(1)` was applied once
        # per candidate on the GPU).
        in_place = [index for index, name in enumerate(arguments)
                    if name in step.stores and (name in step.loads or name in inputs)]
        unbound = [name for name in printer.size_names if name not in bound]
        if unbound:
            raise NotSymbolic(f"kernel {step.name} prints size symbols the wrapper cannot "
                              f"bind from the inputs: {', '.join(unbound)}")
        kernels.append(TritonKernelSource(step.name, position, arguments, functions,
                                          printer.spec, in_place, list(printer.size_names),
                                          {name: hints.get(name, 1)
                                           for name in printer.size_names}))
    written = frozenset(name for step in plan.kernels() for name in step.stores)
    check_kernel_arguments(plan, device, [(kernel.plan_name, kernel.arguments)
                                          for kernel in kernels], written)
    text = PRELUDE + "\n\n" + "\n\n".join(texts.values())
    return TritonModule(text, kernels)


def graph_device(plan: GraphPlan):
    """The device of a graph's first input that is not a constant, else of its first buffer
    with a layout (the pipeline passes the device of the graph's example inputs)."""
    buffers = list(plan.buffers.values())
    for buffer in [b for b in buffers if isinstance(b, InputBuffer) and
                   not isinstance(b, ConstantBuffer)] + buffers:
        layout = getattr(buffer, "layout", None)
        if layout is not None:
            return layout.device
    return torch.device("cpu")
