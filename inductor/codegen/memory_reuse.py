"""Memory reuse planning of a wrapper (stage: codegen).

Input: the wrapper's allocations and frees in call order, with byte counts and pool keys
(bytes, dtype, device). Output: {allocated buffer: dead buffer whose memory it takes}, chosen
so that the call's peak of live bytes does not rise (`codegen/wrapper.py`'s module docstring
says why an unconditional pool was worse).
"""
from __future__ import annotations

from typing import Optional

import numpy


class ReusePlanner:
    """Decides which dead buffers hand their memory to later allocations.

    Fed the wrapper's allocations and frees in the order the call makes them, with byte
    counts, it keeps the curve of live bytes; `plan()` then walks the allocations in order and
    lets one reuse the most recently freed poolable buffer of the same kind only if holding
    that buffer from its free to this allocation keeps the curve at or below its peak (an
    older candidate would be held longer, over a superset of the same points, so it is never
    better). Returns {allocated name: donor name}."""

    def __init__(self, initial_bytes: int):
        self.events: list = []      # (kind, name, nbytes, key or None)
        self.initial = initial_bytes

    def allocate(self, name: str, nbytes: int, key: Optional[tuple]) -> None:
        self.events.append(("allocate", name, nbytes, key))

    def free(self, name: str, nbytes: int, key: Optional[tuple]) -> None:
        self.events.append(("free", name, nbytes, key))

    def plan(self) -> dict:
        deltas = [nbytes if kind == "allocate" else -nbytes
                  for kind, _, nbytes, _ in self.events]
        live = self.initial + numpy.cumsum(numpy.array(deltas, dtype=numpy.int64)) \
            if deltas else numpy.zeros(0, dtype=numpy.int64)
        peak = int(live.max()) if len(live) else 0
        pools: dict = {}            # key -> [(event index, name)] of dead poolable buffers
        reuse: dict = {}
        for index, (kind, name, nbytes, key) in enumerate(self.events):
            if key is None:
                continue
            if kind == "free":
                pools.setdefault(key, []).append((index, name))
                continue
            candidates = pools.get(key)
            if not candidates:
                continue
            freed_at, donor = candidates[-1]
            held = live[freed_at:index]
            if len(held) and int(held.max()) + nbytes <= peak:
                held += nbytes
                candidates.pop()
                reuse[name] = donor
        return reuse
