"""Stage "run", bookkeeping: the graphs inductor ran through eager kernels, counted by reason.

Input: `record(kind, reason)` from the pipeline wherever it gives a whole graph up (runs it
as is, or op by op through ATen) instead of generating code for it. Output: the process-wide
counts, `inductor.fallbacks()`, which `dynamo.explain()`, the benchmarks' zoo report and the
test suite's fallback check read. A fallback keeps results right but is slow, and it hides
the compiler bug behind it (issue 21, class 6: reductions failing in the lowering ran as FX
for weeks, only a log line saying so). The kinds are the table `KINDS`.
"""
from __future__ import annotations

import collections
import logging
import threading
from typing import Iterable, Optional

log = logging.getLogger("framejit.inductor")

KINDS = {
    "error": "a stage raised and `config.fallback_on_error` caught it: a compiler bug",
    "unsupported": "a graph inductor does not compile by design (more sizes of a symbolic "
                   "graph than `config.size_variant_limit`, more than 8 grad-mode or "
                   "input-aliasing variants of one graph, an "
                   "unpaired autocast region, writes into inputs sharing a storage, inputs "
                   "on several devices, a device without a code generator)",
    "per_size": "a graph with symbolic sizes compiled as one static variant per distinct input "
                "size (`inductor/size_variants.py`): generated code at static speed, but a "
                "compile per new size instead of one for all sizes",
    "configured": "the configuration asks for eager kernels (`config.fallback_only`), or "
                  "Triton is missing",
}

_REASON_LENGTH = 200
_lock = threading.Lock()
_counts: collections.Counter = collections.Counter()    # (kind, reason) -> graphs


def record(kind: str, reason: str) -> None:
    """Count one graph given up for `reason` (first line, at most 200 characters kept)."""
    if kind not in KINDS:
        raise ValueError(f"unknown fallback kind {kind!r}; expected one of {sorted(KINDS)}")
    reason = (reason.splitlines() or [""])[0][:_REASON_LENGTH]
    with _lock:
        _counts[(kind, reason)] += 1
    log.debug("fallback (%s): %s", kind, reason)


def fallbacks(kinds: Optional[Iterable[str]] = None) -> dict:
    """`{"<kind>: <reason>": graphs}` since the process started (or `reset()`), for the
    given kinds (default: all)."""
    wanted = set(KINDS if kinds is None else kinds)
    with _lock:
        return {f"{kind}: {reason}": count for (kind, reason), count in sorted(_counts.items())
                if kind in wanted}


def total(kinds: Optional[Iterable[str]] = None) -> int:
    """The number of graphs given up, of the given kinds (default: all)."""
    return sum(fallbacks(kinds).values())


def reset() -> None:
    """Forget the counts."""
    with _lock:
        _counts.clear()


def since(before: dict) -> dict:
    """The counts added since `before` (a `fallbacks()` result)."""
    now = fallbacks()
    return {key: count - before.get(key, 0) for key, count in now.items()
            if count > before.get(key, 0)}
