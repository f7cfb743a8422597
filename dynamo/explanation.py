"""`dynamo.explain`: why a program became several graphs.

Input: a function or module and the arguments of one call. Output: an `ExplainReport` built
from what the per-frame driver recorded while compiling that call: the graphs, each graph
break (kind, reason, the user's `file:line` and source line, the calls that led to it, a
hint), the frames that ran eagerly, guards, recompile reasons, compile time per stage, and
the graphs the inductor backend ran through eager kernels instead of generated code.

    report = dynamo.explain(model)(x)
    print(report)            # reads well in a terminal
    report.graph_break_count

A callable from `dynamo.jit` (function or module) is explained as what it wraps, compiled
with that wrapper's backend and options unless `explain` is given its own.
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Any, Callable, Optional

import torch

from dynamo.backends import CountingBackend, with_mode
from dynamo.debug.report import source_line
from dynamo.api import is_jitted, jit, reset


@dataclasses.dataclass(frozen=True)
class BreakInfo:
    """One graph break, as it reads in the user's program."""

    kind: str  # stable id, e.g. "GB001"
    title: str
    reason: str
    location: Optional[str]  # file:line of the construct
    source_line: str
    hint: str
    calls: tuple = ()  # file:line of the calls leading to it (outermost last), when inlined
    resumed: bool = True  # False: the whole frame ran eagerly instead
    count: int = 1  # how often it was met while compiling

    def __str__(self) -> str:
        where = self.location or "<unknown location>"
        lines = [f"{self.kind} {self.title} at {where}"]
        if self.source_line:
            lines.append(f"    {self.source_line}")
        lines.append(f"    reason: {self.reason}")
        lines += [f"    called from {call}" for call in self.calls]
        if not self.resumed:
            lines.append("    (the frame ran eagerly: framejit could not resume after it)")
        lines.append(f"    hint: {self.hint}")
        return "\n".join(lines)


@dataclasses.dataclass
class ExplainReport:
    """What compiling one call produced; `str(report)` is a terminal-friendly summary."""

    graphs: list  # torch.fx.GraphModule, in the order they were compiled
    graph_count: int
    graph_break_count: int
    breaks: list  # BreakInfo, in the order first met
    ops_per_graph: list  # per graph, the names of the operations it calls
    guards: list  # per compiled entry, its guards (one line each)
    recompiles: list  # why an entry was compiled again
    compile_time: dict  # stage -> seconds, summed over frames
    eager_frames: list  # (qualified name, file:line, reason) of frames that ran eagerly
    output: Any = None  # what the call returned
    fallbacks: dict = dataclasses.field(default_factory=dict)  # inductor: reason -> graphs

    def __str__(self) -> str:
        lines = [f"framejit explain: {self.graph_count} graph(s), "
                 f"{self.graph_break_count} graph break(s)"]
        for index, ops in enumerate(self.ops_per_graph):
            shown = ", ".join(ops[:8]) + (", ..." if len(ops) > 8 else "")
            lines.append(f"  graph {index}: {len(ops)} op(s): {shown}")
        if self.breaks:
            lines.append("graph breaks:")
            for number, info in enumerate(self.breaks, 1):
                text = str(info).replace("\n", "\n    ")
                lines.append(f"  {number}. {text}")
        if self.eager_frames:
            lines.append("frames run eagerly:")
            lines += [f"  {name} ({where}): {reason}" for name, where, reason in
                      self.eager_frames]
        if self.fallbacks:
            lines.append("graphs run through eager kernels instead of generated code "
                         "(inductor fallbacks):")
            lines += [f"  {count} x {reason}" for reason, count in self.fallbacks.items()]
        if self.recompiles:
            lines.append("recompiles:")
            lines += [f"  {reason}" for reason in self.recompiles]
        times = ", ".join(f"{stage} {seconds * 1000:.1f} ms"
                          for stage, seconds in self.compile_time.items())
        lines.append(f"compile time: {times or 'none'}")
        return "\n".join(lines)


def explain(fn_or_module: Callable, backend=None, **jit_options) -> Callable:
    """`explain(fn)(*args, **kwargs)` compiles and runs one call, and returns its report.

    It starts from an empty cache (as after `dynamo.reset()`), so that every frame of the call
    is compiled and reported. `backend` and the other options are those of `dynamo.jit`;
    without `backend`, "eager" (capture alone). `fn_or_module` may come from `dynamo.jit`:
    the function or module it wraps is explained, with the wrapper's backend, mode,
    `fullgraph`, `dynamic` and `options` where `explain` is not given its own.
    """
    target, backend, jit_options = _unwrapped(fn_or_module, backend, jit_options)
    inner = with_mode(backend, jit_options.pop("mode", None))

    def run(*args, **kwargs) -> ExplainReport:
        reset()
        counting = CountingBackend(inner)
        jitted = jit(target, backend=counting, **jit_options)
        before = _inductor_fallbacks()
        output = jitted(*args, **kwargs)
        records = list(jitted._framejit_driver.records)
        report = build_report(records, counting, output)
        after = _inductor_fallbacks()
        report.fallbacks = {reason: count - before.get(reason, 0) for reason, count in
                            after.items() if count > before.get(reason, 0)}
        return report
    return run


def _unwrapped(fn_or_module: Callable, backend, jit_options: dict) -> tuple:
    """(what to compile, its backend, its `jit` options): a `dynamo.jit` wrapper gives the
    function or module it wraps and its own settings, overridden by `explain`'s arguments.
    The wrapper's backend is already bound to its mode; a backend given to `explain` takes
    `explain`'s mode only."""
    if not is_jitted(fn_or_module):
        return fn_or_module, "eager" if backend is None else backend, jit_options
    settings = fn_or_module._framejit_driver.settings
    original = getattr(fn_or_module, "_framejit_original", None)
    if original is None:
        original = fn_or_module.__wrapped__
    inherited = {"fullgraph": settings.fullgraph, "dynamic": settings.dynamic,
                 "options": dict(settings.options)}
    if backend is None:
        backend = settings.backend
    return original, backend, {**inherited, **jit_options}


def _inductor_fallbacks() -> dict:
    """inductor's graph fallbacks so far (reason -> graphs), if a backend has loaded inductor:
    dynamo reaches inductor only through the backend registry, so never imports it here."""
    module = sys.modules.get("inductor.runtime.fallbacks")
    return module.fallbacks() if module is not None else {}


def build_report(records: list, counting: CountingBackend, output=None) -> ExplainReport:
    breaks = _breaks(records)
    eager = [(record.code.co_qualname,
              f"{record.code.co_filename}:{record.code.co_firstlineno}", str(record.failure))
             for record in records if record.failure is not None]
    times: dict = {}
    for record in records:
        for stage, seconds in record.seconds.items():
            if stage != "total":
                times[stage] = times.get(stage, 0.0) + seconds
    return ExplainReport(
        graphs=list(counting.graphs), graph_count=counting.frame_count,
        graph_break_count=len(breaks), breaks=breaks,
        ops_per_graph=[_ops(graph) for graph in counting.graphs],
        guards=[record.guards for record in records if record.replacement is not None],
        recompiles=[record.reason for record in records if record.reason],
        compile_time=times, eager_frames=eager, output=output)


def _breaks(records: list) -> list:
    found: dict = {}
    for record in records:
        for met in record.breaks:
            key = (met.kind_id, met.location, met.detail)
            if key in found:
                found[key] = dataclasses.replace(found[key], count=found[key].count + 1,
                                                 resumed=found[key].resumed and met.resumed)
                continue
            found[key] = BreakInfo(met.kind_id, met.title, met.detail, met.location,
                                   source_line(met.location), met.hint,
                                   tuple(met.frames[1:]), met.resumed)
    return list(found.values())


def _ops(graph: torch.fx.GraphModule) -> list:
    names = []
    for node in graph.graph.nodes:
        if node.op == "call_function":
            names.append(getattr(node.target, "__name__", str(node.target)))
        elif node.op == "call_method":
            names.append(f"Tensor.{node.target}")
        elif node.op == "call_module":
            names.append(str(node.target))
    return names
