"""Write counts standing in for the version counters inference tensors lack (stage: trace;
input: the fake operations of one graph; output: a count per storage, read like `_version`).

The tracer tells an operation that writes (`x[m] = v`, `t.add_(1)`, `out=`) from one that does
not by the version counters of its fake arguments: a write bumps the counter every view of the
storage shares, and a graph input whose counter moved was written. A tensor made under
`torch.inference_mode` (an input made there, or any result while the call runs there) has no
counter: without another record every write into one read as no write, the node was dropped as
dead code and the program's write was lost (program fuzzer, calls under inference mode).

`WriteCounts` is that record: while a fake operation runs with an inference tensor among its
arguments (or under inference mode), a dispatch mode counts each write into an argument the
ATen schema marks as written, per storage; `version` reads a tensor's counter, or its count when
it is an inference tensor.
"""
from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def _storage(tensor: torch.Tensor) -> StorageWeakRef:
    return StorageWeakRef(tensor.untyped_storage())


class _Recorder(TorchDispatchMode):
    """Counts the writes of every ATen operation into its written arguments, per storage."""

    def __init__(self, counts: Counter) -> None:
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        for position, argument in enumerate(schema.arguments):
            info = argument.alias_info
            if info is None or not info.is_write:
                continue
            value = args[position] if position < len(args) else kwargs.get(argument.name)
            for leaf in tree_leaves(value):
                if isinstance(leaf, torch.Tensor) and leaf.is_inference():
                    self.counts[_storage(leaf)] += 1
        return func(*args, **kwargs)


class WriteCounts:
    """Per storage, the writes the trace made into inference tensors (see the module
    docstring)."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()

    def recording(self, *values: Any):
        """A context counting the writes of the fake operation about to run on `values`:
        active only where an inference tensor can be written (one among `values`, or inference
        mode on, where every result is one)."""
        if not torch.is_inference_mode_enabled() and not any(
                isinstance(leaf, torch.Tensor) and leaf.is_inference()
                for leaf in tree_leaves(values)):
            return contextlib.nullcontext()
        return _Recorder(self.counts)

    def version(self, tensor: torch.Tensor) -> int:
        """`tensor._version`, or for an inference tensor the writes counted into its storage."""
        if tensor.is_inference():
            return self.counts[_storage(tensor)]
        return tensor._version
