"""Stage "compile": wrap a model with one of the compared compilers and count what it did.

Input: a compiler name, an `nn.Module` and a compile mode. Output: a `Compiled` whose
`function` is called like the model and whose `stats()` reports graphs, graph breaks, frames
that fell back to eager, and where the numbers came from.

Compilers:
- `eager`: the model itself (the baseline);
- `framejit`: `dynamo.jit(model)`: our frame capture and our inductor;
- `framejit-eager`: `dynamo.jit(model, backend=dynamo.CountingBackend())`: our capture, graphs
  run as FX Python, so its time over eager is the capture's own cost;
- `torch.compile`: PyTorch's compiler with its default inductor backend (the anchor);
- `torch.compile-eager`: `torch.compile(model, backend="eager")`, the anchor's capture alone,
  to set next to `framejit-eager`.

Counting: torch.compile from `torch._dynamo.utils.counters` (unique graphs, graph-break
reasons). framejit from the compile records of its frame driver when the product exposes them
(graphs installed, frames that fell back with their reasons), else from a counting backend;
`dynamo.explain`, once it exists, is called by the worker after the measurements.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import torch

COMPILERS = ("eager", "framejit", "framejit-eager", "torch.compile", "torch.compile-eager")
_REASONS_KEPT = 5


@dataclasses.dataclass
class Compiled:
    """A compiled model: call `function` like the model; `stats()` counts so far."""

    compiler: str
    function: Callable
    stats: Callable[[], dict]


def compile_model(compiler: str, model: torch.nn.Module, mode: Optional[str] = None) -> Compiled:
    """Wrap `model` with `compiler` (one of `COMPILERS`); `mode` is passed to the compiler."""
    if compiler == "eager":
        return Compiled(compiler, model, lambda: {"graphs": 0, "stats_source": "none"})
    if compiler in ("torch.compile", "torch.compile-eager"):
        return _torch_compile(compiler, model, mode)
    if compiler in ("framejit", "framejit-eager"):
        return _framejit(compiler, model, mode)
    raise ValueError(f"unknown compiler {compiler!r}; known: {', '.join(COMPILERS)}")


def _torch_compile(compiler: str, model: torch.nn.Module, mode: Optional[str]) -> Compiled:
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    if compiler == "torch.compile-eager":
        function = torch.compile(model, backend="eager")
    else:
        function = torch.compile(model, mode=mode)

    def stats() -> dict:
        breaks = counters["graph_break"]
        return {
            "graphs": int(counters["stats"]["unique_graphs"]),
            "graph_breaks": int(sum(breaks.values())),
            "break_reasons": [_first_line(reason) for reason in list(breaks)[:_REASONS_KEPT]],
            "stats_source": "torch._dynamo counters",
        }
    return Compiled(compiler, function, stats)


def _framejit(compiler: str, model: torch.nn.Module, mode: Optional[str]) -> Compiled:
    import dynamo
    counting = dynamo.CountingBackend() if compiler == "framejit-eager" else None
    backend = counting if counting is not None else "inductor"
    jitted = dynamo.jit(model, backend=backend, mode=mode)
    driver = getattr(jitted, "_framejit_driver", None)

    def stats() -> dict:
        records = getattr(driver, "records", None)
        if records is not None:
            return _from_records(records, counting)
        return {"graphs": counting.frame_count if counting else None,
                "stats_source": "dynamo.CountingBackend" if counting else "none"}
    return Compiled(compiler, jitted, stats)


def _from_records(records: list, counting) -> dict:
    installed = [record for record in records if getattr(record, "replacement", None)]
    failed = [record for record in records if getattr(record, "failure", None) is not None]
    seconds: dict[str, float] = {}
    for record in records:
        for stage, value in (getattr(record, "seconds", None) or {}).items():
            if stage != "total":
                seconds[stage] = seconds.get(stage, 0.0) + value
    reasons = list(dict.fromkeys(_first_line(str(record.failure)) for record in failed))
    stopped = {(record.code, str(record.failure)) for record in failed}
    stats = {
        "graphs": len(installed),
        "graph_breaks": len(stopped),  # distinct frames (and reasons) whose capture stopped
        "break_reasons": reasons[:_REASONS_KEPT],
        "ops": sum(_op_count(record.graph) for record in installed),
        "capture_seconds": {stage: round(value, 4) for stage, value in seconds.items()},
        "stats_source": "dynamo driver records",
    }
    if counting is not None:
        stats["backend_graphs"] = counting.frame_count
    return stats


def _op_count(graph) -> int:
    if graph is None:
        return 0
    return sum(1 for node in graph.graph.nodes
               if node.op in ("call_function", "call_method", "call_module"))


def explain_counts(model: torch.nn.Module, args: tuple, kwargs: dict) -> Optional[dict]:
    """Graph and break counts from `dynamo.explain` where the product has it, else None."""
    import dynamo
    explain = getattr(dynamo, "explain", None)
    if explain is None:
        return None
    report = explain(model)(*args, **kwargs)
    counts = {"stats_source": "dynamo.explain"}
    for field, names in (("graphs", ("graph_count", "graphs")),
                         ("graph_breaks", ("graph_break_count", "breaks"))):
        for name in names:
            value = getattr(report, name, None)
            if value is not None:
                counts[field] = value if isinstance(value, int) else len(value)
                break
    return counts


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]
