"""The product of the pipeline: a callable compiled graph and its report.

Input: the generated (or fallback) run function and what the stages recorded. Output: a
`CompiledGraph`, called with the graph's flat tensors, carrying a `GraphReport` that
`dynamo.explain()` shows (kernel count, ops run through eager kernels, library calls).

Compiled code holds for the facts it was compiled under. Two of them are checked on every
call where they matter (`Specialized`): how the input tensors share memory (`StoragePattern`:
only for graphs that write into an input, whose functional form assumes the aliasing seen at
compile time), and grad mode (only where an input requires grad). A call presenting other
facts runs a variant compiled for them (first sight compiles it).
"""
from __future__ import annotations

import dataclasses
import logging
import operator
import threading
from typing import Callable, Optional, Sequence

import torch

from inductor.runtime import fallbacks

log = logging.getLogger("framejit.inductor")


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
    input_pattern: for graphs that write into an input, how the compile-time inputs shared
        storages (calls that share them otherwise run another variant), else None.
    size_reason: for a graph with symbolic sizes compiled per concrete size
        (`inductor/size_variants.py`), why it was not compiled once for all sizes, else None.
    size_variants: static variants compiled so far for such a graph (one per input size).
    """

    kernel_count: int = 0
    fallback_ops: dict = dataclasses.field(default_factory=dict)
    library_calls: dict = dataclasses.field(default_factory=dict)
    reason: Optional[str] = None
    compile_seconds: float = 0.0
    source: str = ""
    channels_last: bool = False
    input_pattern: Optional["StoragePattern"] = None
    size_reason: Optional[str] = None
    size_variants: int = 0

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
        if self.size_reason:
            parts.append(f"{self.size_variants} size variant(s): {self.size_reason}")
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

    # `compiled(*args)` is `compiled.run(*args)` without a Python frame of its own: the type's
    # call slot looks `__call__` up through this property, which hands back `run` (a frame
    # forwarding `*args` cost about 0.15 us of a small graph's 2 us call, 2-core VM)
    __call__ = property(operator.attrgetter("run"))

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


def _storage_id(value) -> int:
    return value.untyped_storage()._cdata


class StoragePattern:
    """Which tensor inputs share a storage, and where the sharing ones start in it.

    `matches(inputs)` is the per-call check: for the usual pattern (no two tensors share a
    storage) one storage lookup per tensor and a set; otherwise the whole key. Positions of
    non-tensors are skipped (they are constants of the graph). `prefix`: tensors the graph
    holds itself (lifted constants), checked before the inputs."""

    def __init__(self, inputs: Sequence, prefix: Sequence = ()):
        self.prefix = tuple(prefix)
        inputs = self.prefix + tuple(inputs)
        self.positions = tuple(index for index, value in enumerate(inputs)
                               if isinstance(value, torch.Tensor))
        self.key = self._key(inputs)
        self.distinct = all(group == index for index, (group, _) in enumerate(self.key))
        from inductor.runtime.native import storages_shared
        self.shared = storages_shared()   # one pointer per tensor, in C++ where it builds

    def key_of(self, inputs: Sequence) -> tuple:
        """Per tensor: (index of the first tensor with its storage, storage offset where
        shared, else None)."""
        return self._key(self.prefix + tuple(inputs) if self.prefix else inputs)

    def _key(self, inputs: Sequence) -> tuple:
        first: dict = {}
        groups = []
        for order, position in enumerate(self.positions):
            groups.append(first.setdefault(_storage_id(inputs[position]), order))
        shared = {group for index, group in enumerate(groups) if group != index}
        return tuple((group, int(inputs[position].storage_offset()) if group in shared else None)
                     for group, position in zip(groups, self.positions))

    def matches(self, inputs: Sequence) -> bool:
        """Whether `inputs` share storages exactly as the compile-time inputs did."""
        if self.prefix:
            inputs = self.prefix + tuple(inputs)
        if self.distinct:
            return not self.shared(inputs)
        return self._key(inputs) == self.key

    @staticmethod
    def sharing(inputs: Sequence):
        """None when no two tensors of `inputs` share a storage (one lookup per tensor and a
        set), else the full key of their pattern."""
        from inductor.runtime.native import storages_shared
        if not storages_shared()(inputs):
            return None
        return StoragePattern(inputs).key

    @property
    def shares(self) -> bool:
        """Whether some tensors share a storage."""
        return not self.distinct


class AnySharing:
    """The storage pattern of a graph run as is for calls whose tensors share storages
    (eager's kernels take any sharing, at any offsets: a graph with symbolic sizes writing
    into views of one tensor): matches every call where some tensors share a storage; the
    others (no sharing) are one variant, compiled."""

    def __init__(self):
        from inductor.runtime.native import storages_shared
        self.shared = storages_shared()

    def matches(self, inputs: Sequence) -> bool:
        return bool(self.shared(inputs))

    def key_of(self, inputs: Sequence) -> bool:
        return bool(self.shared(inputs))


class Specialized:
    """Runs `run` when a call presents the facts it was compiled under (grad mode, when
    `grad_mode` is not None; the storage pattern of its tensors, when `pattern` is not None),
    else the variant `compile_variant(inputs)` returns for that call's facts, compiled on
    first sight and kept (at most `limit` variants; past that, `fallback` runs)."""

    def __init__(self, run: Callable, grad_mode: Optional[bool],
                 pattern: Optional[StoragePattern], compile_variant: Callable,
                 fallback: Callable, limit: int = 8):
        self.run = run
        self.grad_mode = grad_mode
        self.pattern = pattern
        self.compile_variant = compile_variant
        self.fallback = fallback
        self.limit = limit
        self.variants: dict = {}
        self.lock = threading.Lock()
        self.gave_up = False

    def __call__(self, *inputs):
        grad_mode = self.grad_mode
        if grad_mode is not None and torch.is_grad_enabled() is not grad_mode:
            return self.other(inputs)
        pattern = self.pattern
        if pattern is not None and not pattern.matches(inputs):
            return self.other(inputs)
        return self.run(*inputs)

    def key(self, inputs) -> tuple:
        """The facts of a call that select its variant."""
        return (torch.is_grad_enabled() if self.grad_mode is not None else None,
                self.pattern.key_of(inputs) if self.pattern is not None else None)

    def other(self, inputs):
        """Run (compiling first if new) the variant for this call's facts."""
        key = self.key(inputs)
        variant = self.variants.get(key)
        if variant is None:
            with self.lock:
                variant = self.variants.get(key)
                if variant is None:
                    if len(self.variants) >= self.limit:
                        if not self.gave_up:  # counted once per graph, as other give-ups
                            self.gave_up = True
                            fallbacks.record("unsupported", f"more than {self.limit} variants "
                                             "of a graph for other input aliasing or grad "
                                             "mode: new ones run as is")
                        return self.fallback(*inputs)
                    log.info("compiling a variant of a graph for other input aliasing or "
                             "grad mode: %s", key)
                    variant = self.compile_variant(list(inputs))
                    self.variants[key] = variant
        return variant(*inputs)
