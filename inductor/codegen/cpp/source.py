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
from typing import Optional

import torch

from inductor.codegen.cpp.expressions import storage_type
from inductor.codegen.cpp.kernel import CppKernel
from inductor.codegen.cpp.ops import math_declarations
from inductor.codegen.cpp.scan import CppScanKernel
from inductor.codegen.cpp.scatter import CppScatterKernel
from inductor.codegen.bounds import CPP_HELPER, buffer_extents
from inductor.codegen.devices import check_kernel_arguments
from inductor.config import config
from inductor.runtime.build import PACKED_SUFFIX
from inductor.ir.primitives import PRIMITIVES
from inductor.schedule.plans import GraphPlan, KernelPlan, ScanPlan, ScatterPlan

ENTRY_POINT = "jit_entry"
CPU = torch.device("cpu")
# `ops.vml_<name>` -> the name of its MKL VML function (vms<Name>, vmd<Name>; prelude.h), from
# the table of primitives
VML_NAMES = {row.name: row.vml for row in PRIMITIVES if row.vml}
VML_BIND = "jit_vml_bind"


@functools.lru_cache(maxsize=1)
def prelude() -> str:
    """The text pasted at the top of every source: prelude.h, with the declarations of the
    libm functions the table of primitives spells (`cpp/ops.py`'s `math_declarations`)."""
    path = os.path.join(os.path.dirname(__file__), "prelude.h")
    with open(path) as handle:
        text = handle.read()
    marker = "// JIT_MATH_DECLARATIONS\n"
    assert marker in text, "prelude.h lost the place of the table's libm declarations"
    return text.replace(marker, math_declarations() + "\n")


@dataclasses.dataclass
class Segment:
    """A run of kernels between library calls: its code, and the buffers its entry takes."""

    body: str               # static kernels and `static int segment_run(...)`
    signature: str          # the parameter list of `segment_run`
    arguments: list         # graph buffer names, in parameter order
    kernels: list           # kernel plan names, in order
    first_step: int         # index of its first kernel in the graph plan's steps
    # size symbols its entry takes after the buffers (int64_t, sorted by name): the union of
    # its kernels' (`KernelPlan.size_symbols`); empty for static graphs
    size_symbols: list = dataclasses.field(default_factory=list)
    # the C++ pointer type of each buffer argument (`const float*`), for the packed entry
    pointer_types: list = dataclasses.field(default_factory=list)

    def parameter_count(self) -> int:
        return len(self.arguments) + len(self.size_symbols)


@dataclasses.dataclass
class TranslationUnit:
    """One C++ source: the prelude, then segments each in its own namespace, each with an
    `extern "C"` entry point `jit_entry_<n>` (n counts within the unit)."""

    source: str
    entries: list           # (symbol, argument count) per distinct segment body
    segment_entry: dict     # segment index -> position in `entries`


def segments(plan: GraphPlan, dtype_of, threads: int, threshold: int,
             vectorize: bool) -> list[Segment]:
    """Group consecutive kernels into segments and print each. Every buffer they take must
    be in host memory (else `codegen/devices.py`'s `DeviceMismatch`, at compile time)."""
    extents = buffer_extents(plan)
    result, run, first = [], [], 0
    for position, step in enumerate(plan.steps):
        if isinstance(step, KernelPlan):
            if not run:
                first = position
            run.append(step)
            continue
        if run:
            result.append(_segment(run, first, dtype_of, threads, threshold, vectorize,
                                   extents))
            run = []
    if run:
        result.append(_segment(run, first, dtype_of, threads, threshold, vectorize, extents))
    check_kernel_arguments(plan, CPU, [(", ".join(segment.kernels), segment.arguments)
                                       for segment in result])
    return result


def _segment(kernels: list, first: int, dtype_of, threads, threshold, vectorize,
             extents: Optional[dict] = None) -> Segment:
    arguments: list = []
    for kernel in kernels:
        for name in list(kernel.loads) + list(kernel.stores):
            if name not in arguments:
                arguments.append(name)
    parameter = {name: f"a{position}" for position, name in enumerate(arguments)}
    functions, calls, symbols = [], [], set()
    for position, kernel in enumerate(kernels):
        kind = CppScatterKernel if isinstance(kernel, ScatterPlan) else CppKernel
        kind = CppScanKernel if isinstance(kernel, ScanPlan) else kind
        printer = kind(kernel, dtype_of, threads, threshold, vectorize)
        printer.extents = extents
        functions.append(printer.source(f"kernel{position}"))
        kernel_symbols = [symbol.name for symbol in getattr(printer, "size_symbols", [])]
        symbols.update(getattr(printer, "size_symbols", []))
        call_arguments = ", ".join([parameter[name] for name in printer.arguments()] +
                                   kernel_symbols)
        calls.append(f"  kernel{position}({call_arguments});")
    stored = {name for kernel in kernels for name in kernel.stores}
    size_symbols = sorted(symbols, key=lambda symbol: symbol.name)
    pointer_types = [f"{'' if name in stored else 'const '}{storage_type(dtype_of(name))}*"
                     for name in arguments]
    signature = ", ".join(
        [f"{kind} {parameter[name]}" for kind, name in zip(pointer_types, arguments)] +
        [f"int64_t {symbol.name}" for symbol in size_symbols])
    reset = ["  jit_bounds_reported = 0;"] if config.bounds_check else []
    entry = [f"static int segment_run({signature}) {{", "  jit_error = 0;", *reset, *calls,
             "  return jit_error;", "}"]
    body = "\n\n".join(functions + ["\n".join(entry)]) + "\n"
    return Segment(body, signature, arguments, [kernel.name for kernel in kernels], first,
                   size_symbols, pointer_types)


def translation_units(segments: list, count: int) -> list[TranslationUnit]:
    """Distinct segment bodies spread over at most `count` sources (balanced by length), so
    the compiler runs `count` processes at most and repeated layers compile once."""
    distinct: dict = {}
    for position, segment in enumerate(segments):
        distinct.setdefault(segment.body, []).append(position)
    bodies = sorted(distinct, key=len, reverse=True)
    count = max(1, min(count, len(bodies)))
    buckets: list = [[] for _ in range(count)]
    sizes = [0] * count
    for body in bodies:
        smallest = sizes.index(min(sizes))
        buckets[smallest].append(body)
        sizes[smallest] += len(body)
    units = []
    for bucket in buckets:
        parts, entries, segment_entry = [prelude()], [], {}
        if any("jit_check_bounds(" in body for body in bucket):
            parts.append(CPP_HELPER)
        used = [name for name in VML_NAMES
                if any(f"jit_vml_{name}{suffix}(" in body for body in bucket
                       for suffix in ("f", "", "f_block", "_block"))]
        if used:
            parts.append(_vml_declarations(used))
        for number, body in enumerate(sorted(bucket)):
            segment = segments[distinct[body][0]]
            call = ", ".join([f"a{position}" for position in range(len(segment.arguments))] +
                             [symbol.name for symbol in segment.size_symbols])
            parts.append(f"namespace segment{number} {{\n{body}}}\n"
                         f'extern "C" int {ENTRY_POINT}_{number}({segment.signature}) {{\n'
                         f"  return segment{number}::segment_run({call});\n}}\n" +
                         _packed_entry(segment, number))
            entries.append((f"{ENTRY_POINT}_{number}", segment.parameter_count()))
            for position in distinct[body]:
                segment_entry[position] = number
        units.append(TranslationUnit("\n\n".join(parts), entries, segment_entry))
    return units


def _packed_entry(segment: Segment, number: int) -> str:
    """`jit_entry_<n>_packed(pointers, sizes)`: the same call with the buffers' data pointers
    and the size symbols' values in two arrays, the one signature `runtime/native.cpp`'s
    `launch` calls (ctypes calls the unpacked entry where that extension is unavailable)."""
    values = [f"static_cast<{kind}>(pointers[{position}])"
              for position, kind in enumerate(segment.pointer_types)]
    values += [f"sizes[{position}]" for position in range(len(segment.size_symbols))]
    return (f'extern "C" int {ENTRY_POINT}_{number}{PACKED_SUFFIX}(void* const* pointers, '
            f"const int64_t* sizes) {{\n"
            f"  return segment{number}::segment_run({', '.join(values)});\n}}\n")


def _vml_declarations(used: list) -> str:
    """The VML functions a source calls, and `jit_vml_bind`, which the loader calls
    (`runtime/build.py`) with a resolver of VML's symbols (prelude.h)."""
    lines = [f"JIT_VML_UNARY({name}, {VML_NAMES[name]})" for name in used]
    binds = " ".join(f"JIT_VML_BIND({VML_NAMES[name]})" for name in used)
    lines += ["#ifdef JIT_VML",
              f'extern "C" int {VML_BIND}(void* (*lookup)(const char*)) {{',
              f"  int bound = 1; {binds}", "  return bound;", "}", "#endif"]
    return "\n".join(lines) + "\n"
