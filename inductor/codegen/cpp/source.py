"""C++ translation units: runs of consecutive kernels become one exported entry point.

Input: a `GraphPlan`. Output: one `Segment` per run of kernels between library calls: a
self-contained C++ source (prelude + static kernels + `extern "C" int entry(...)`) whose
names depend only on its content, so identical segments (repeated layers) share one build,
and the graph buffers its entry point takes, in order. The entry point returns 0, or an
error code a kernel raised (division by zero, index out of range).
"""
from __future__ import annotations

import dataclasses
import functools
import os

from inductor.codegen.cpp.expressions import storage_type
from inductor.codegen.cpp.kernel import CppKernel
from inductor.codegen.cpp.scatter import CppScatterKernel
from inductor.schedule.plans import GraphPlan, KernelPlan, ScatterPlan

ENTRY_POINT = "jit_entry"


@functools.lru_cache(maxsize=1)
def prelude() -> str:
    """The text pasted at the top of every source."""
    path = os.path.join(os.path.dirname(__file__), "prelude.h")
    with open(path) as handle:
        return handle.read()


@dataclasses.dataclass
class Segment:
    """One translation unit: source text, the buffers its entry takes, its kernels."""

    source: str
    body: str               # the source without the prelude (for logs and reports)
    arguments: list         # graph buffer names, in entry-point parameter order
    kernels: list           # kernel plan names, in order
    first_step: int         # index of its first kernel in the graph plan's steps


def segments(plan: GraphPlan, dtype_of, threads: int, threshold: int,
             vectorize: bool) -> list[Segment]:
    """Group consecutive kernels and print each group as one translation unit."""
    result, run, first = [], [], 0
    for position, step in enumerate(plan.steps):
        if isinstance(step, KernelPlan):
            if not run:
                first = position
            run.append(step)
            continue
        if run:
            result.append(_segment(run, first, dtype_of, threads, threshold, vectorize))
            run = []
    if run:
        result.append(_segment(run, first, dtype_of, threads, threshold, vectorize))
    return result


def _segment(kernels: list, first: int, dtype_of, threads, threshold, vectorize) -> Segment:
    arguments: list = []
    for kernel in kernels:
        for name in list(kernel.loads) + list(kernel.stores):
            if name not in arguments:
                arguments.append(name)
    parameter = {name: f"a{position}" for position, name in enumerate(arguments)}
    functions, calls = [], []
    for position, kernel in enumerate(kernels):
        kind = CppScatterKernel if isinstance(kernel, ScatterPlan) else CppKernel
        printer = kind(kernel, dtype_of, threads, threshold, vectorize)
        functions.append(printer.source(f"kernel{position}"))
        call_arguments = ", ".join(parameter[name] for name in printer.arguments())
        calls.append(f"  kernel{position}({call_arguments});")
    stored = {name for kernel in kernels for name in kernel.stores}
    parameters = ", ".join(
        f"{'' if name in stored else 'const '}{storage_type(dtype_of(name))}* {parameter[name]}"
        for name in arguments)
    entry = [f'extern "C" int {ENTRY_POINT}({parameters}) {{', "  jit_error = 0;", *calls,
             "  return jit_error;", "}"]
    body = "\n\n".join(functions + ["\n".join(entry)]) + "\n"
    return Segment(prelude() + "\n\n" + body, body, arguments,
                   [kernel.name for kernel in kernels], first)
