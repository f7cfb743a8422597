"""The product of the pipeline: a callable compiled graph and its report.

Input: the generated (or fallback) run function and what the stages recorded. Output: a
`CompiledGraph`, called with the graph's flat tensors, carrying a `GraphReport` that
`dynamo.explain()` shows (kernel count, ops run through eager kernels, library calls).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional


@dataclasses.dataclass
class GraphReport:
    """What inductor did with one graph.

    kernel_count: generated kernels (fused loops) the graph runs per call.
    fallback_ops: ATen op name -> number of nodes run through their eager kernels because no
        lowering exists (`"<whole graph>"` when the graph runs as is; see `reason`).
    library_calls: ATen op name -> number of nodes kept as library calls (mm, convolution,
        attention) by design.
    reason: why the whole graph runs as is, or None.
    compile_seconds: wall time of the compilation.
    source: the generated code (wrapper and kernels), for people.
    channels_last: whether 4-D activations were kept channels-last (graphs with 2-D
        convolutions on CPU whose activations outweigh their weights).
    """

    kernel_count: int = 0
    fallback_ops: dict = dataclasses.field(default_factory=dict)
    library_calls: dict = dataclasses.field(default_factory=dict)
    reason: Optional[str] = None
    compile_seconds: float = 0.0
    source: str = ""
    channels_last: bool = False

    def summary(self) -> str:
        """One line: kernels, library calls and fallbacks."""
        parts = [f"{self.kernel_count} kernel(s)"]
        if self.library_calls:
            parts.append("library calls: " + ", ".join(
                f"{name} x{count}" for name, count in sorted(self.library_calls.items())))
        if self.fallback_ops:
            parts.append("eager fallbacks: " + ", ".join(
                f"{name} x{count}" for name, count in sorted(self.fallback_ops.items())))
        if self.channels_last:
            parts.append("channels-last activations")
        if self.reason:
            parts.append(f"ran as is: {self.reason}")
        return "; ".join(parts)


class CompiledGraph:
    """A compiled graph: call it with the graph's tensors as positional arguments, or with
    one list of them through `with_argument_list` (which empties the list).

    Attributes: `report` (a `GraphReport`), and for convenience `kernel_count` and
    `fallback_ops` (the same values as on the report).
    """

    __slots__ = ("run", "report")

    def __init__(self, run: Callable, report: GraphReport):
        self.run = run
        self.report = report

    def __call__(self, *args):
        return self.run(*args)

    def with_argument_list(self, arguments: list):
        """The boxed calling convention: the graph's inputs as one list, which this call
        empties, so that an input the caller no longer holds is freed after its last reader
        (where the generated wrapper supports that) rather than when the call returns."""
        boxed = getattr(self.run, "with_argument_list", None)
        if boxed is not None:
            return boxed(arguments)
        values = list(arguments)
        arguments.clear()
        return self.run(*values)

    @property
    def kernel_count(self) -> int:
        return self.report.kernel_count

    @property
    def fallback_ops(self) -> dict:
        return self.report.fallback_ops

    def __repr__(self) -> str:
        return f"<CompiledGraph: {self.report.summary()}>"
