"""Stage "measure": one subject called at a list of sizes under several variants.

Input: a `Subject`, variant names, the sizes in call order, the device and the number of
timing trials. Output: a JSON-ready dict per variant: status, compiles and what they cost,
per size the first call's seconds, the steady per-call time (median of interleaved trials,
its spread) and whether every call matched eager.

Method, per size in the given order (a batch sweep grows, as a serving system sees it):
1. the eager reference: `subject.target(*inputs)` under `torch.no_grad()`;
2. the first call of every variant, in an order rotated by one per size (so no variant is
   always first after the reference): a compile if the variant has no entry serving this
   size, else a cached call; timed, compiles counted, compared with the reference
   (`torch.testing.assert_close` at the tolerance of the dtype, plus `requires_grad` of
   every output tensor);
3. steady per-call time of every live variant, eager included: `benchmarks.timing.
   interleaved` (warm-up, calls per trial filling about 50 ms, trials in rotating order, the
   median per call, and the best trial: on a loaded machine the steadier estimate); any
   compile during these calls is counted as `compiles_while_timing`
   (a recompile in steady state would be a guard bug, not a cost of new sizes); before
   timing, each variant is called a second time with the same inputs, counted: compiles or
   fallbacks (inductor's per-size code variants included) there are `second_call_compiles`.
`compile_seconds`: the sum over sizes of (first call - steady per-call time), floored at 0:
the same measure for both compilers, whatever each counts as compile time internally.
A variant that raises is marked `error` with the exception and leaves the remaining sizes.
"""
from __future__ import annotations

import traceback
from typing import Callable, Optional

import torch
from torch.utils import _pytree

from benchmarks.dynamic.subjects import Subject
from benchmarks.dynamic.variants import Variant, torch_compiles_total
from benchmarks.timing import interleaved

TOLERANCE = {torch.float32: (1e-3, 1e-3), torch.float64: (1e-7, 1e-7),
             torch.bfloat16: (3e-2, 3e-2), torch.float16: (1e-2, 1e-2)}


def synchronizer(device: str) -> Callable[[], None]:
    """A callable waiting for queued work on `device` (a no-op on the CPU)."""
    if device.startswith("cuda"):
        return torch.cuda.synchronize
    return lambda: None


def compare(expected, actual) -> Optional[str]:
    """None when `actual` matches eager's `expected` (values within the dtype's tolerance,
    dtypes, shapes, structure, requires_grad), else the first lines of the difference."""
    try:
        leaves = [leaf for leaf in _pytree.tree_leaves(expected)
                  if isinstance(leaf, torch.Tensor) and leaf.is_floating_point()]
        rtol, atol = TOLERANCE.get(leaves[0].dtype if leaves else torch.float32,
                                   TOLERANCE[torch.float32])
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
    except (AssertionError, TypeError, ValueError) as error:
        return " ".join(str(error).split("\n")[:4])[:400]
    expected_flags = [leaf.requires_grad for leaf in _pytree.tree_leaves(expected)
                      if isinstance(leaf, torch.Tensor)]
    actual_flags = [leaf.requires_grad for leaf in _pytree.tree_leaves(actual)
                    if isinstance(leaf, torch.Tensor)]
    if expected_flags != actual_flags:
        return f"requires_grad {actual_flags} where eager has {expected_flags}"
    return None


def _call(function: Callable, args: tuple) -> Callable[[], object]:
    return lambda: function(*args)


class _Record:
    """What one variant gave over the sizes so far."""

    def __init__(self, variant: Optional[Variant], error: Optional[str] = None):
        self.variant = variant
        self.error = error
        self.first_call_seconds: dict = {}
        self.per_call: dict = {}  # size -> (median seconds, spread, best trial's seconds)
        self.mismatches: list = []
        self.checked = 0
        self.compiles_while_timing = 0
        self.second_call_compiles = 0

    def summary(self) -> dict:
        compile_seconds = sum(max(0.0, self.first_call_seconds[size] - self.per_call[size][0])
                              for size in self.per_call)
        row = {"status": "error" if self.error else ("pass" if not self.mismatches
                                                     else "mismatch"),
               "matched_eager": not self.mismatches and self.error is None,
               "calls_checked": self.checked, "mismatches": self.mismatches[:5],
               "compile_seconds": round(compile_seconds, 3),
               "compiles_while_timing": self.compiles_while_timing,
               "second_call_compiles": self.second_call_compiles,
               "first_call_s": {str(s): round(v, 5) for s, v in self.first_call_seconds.items()},
               "per_call_ms": {str(s): round(v[0] * 1e3, 5) for s, v in self.per_call.items()},
               "best_ms": {str(s): round(v[2] * 1e3, 5) for s, v in self.per_call.items()},
               "spread": {str(s): round(v[1], 3) for s, v in self.per_call.items()}}
        if self.error:
            row["error"] = self.error
        if self.variant is not None:
            row.update(self.variant.counts())
        return row


def _first_calls(records: dict, names: list, args: tuple, size: int, expected,
                 synchronize: Callable) -> None:
    for name in names:
        record = records[name]
        try:
            result, seconds = record.variant.first_call(args, synchronize)
        except Exception as error:  # one failing variant is a result, never a crash
            record.error = f"size {size}: {type(error).__name__}: {error}"[:1500]
            record.traceback = traceback.format_exc()[-2000:]
            continue
        record.first_call_seconds[size] = seconds
        record.checked += 1
        if name != "eager":
            mismatch = compare(expected, result)
            if mismatch:
                record.mismatches.append(f"size {size}: {mismatch}")
        before = record.variant.work_count()
        record.variant.first_call(args, synchronize)  # the same call again reuses its code
        record.second_call_compiles += record.variant.work_count() - before


def _live(records: dict) -> list:
    return [name for name, record in records.items() if record.error is None]


def measure_sizes(subject: Subject, variant_names: list, sizes: list, device: str = "cpu",
                  trials: int = 7, progress: Callable[[str], None] = print) -> dict:
    """{variant name: summary} for `subject` called at every size in `sizes`, in order."""
    synchronize = synchronizer(device)
    records = {}
    for name in variant_names:
        try:
            records[name] = _Record(Variant(name, subject.target, len(sizes)))
        except Exception as error:
            records[name] = _Record(None, f"building: {type(error).__name__}: {error}")
    with torch.no_grad():
        for index, size in enumerate(sizes):
            args = subject.inputs(size)
            expected = subject.target(*args)
            live = _live(records)
            order = live[index % max(1, len(live)):] + live[:index % max(1, len(live))]
            _first_calls(records, order, args, size, expected, synchronize)
            _time_size(records, args, size, synchronize, trials)
            progress(f"  {subject.name} size {size}: " + ", ".join(
                f"{name} {records[name].per_call[size][0] * 1e3:.3f} ms"
                for name in _live(records) if size in records[name].per_call))
    return {name: record.summary() for name, record in records.items()}


def _time_size(records: dict, args: tuple, size: int, synchronize: Callable,
               trials: int) -> None:
    live = _live(records)
    before = {name: records[name].variant.compiles() for name in live}
    torch_before = torch_compiles_total()
    calls = {name: _call(records[name].variant.function, args) for name in live}
    try:
        timings = interleaved(calls, trials=trials, warmup=1, synchronize=synchronize)
    except Exception as error:
        for name in live:
            records[name].error = f"timing size {size}: {type(error).__name__}: {error}"[:1500]
        return
    for name in live:
        records[name].per_call[size] = timings[name]  # (median, spread, best)
        records[name].compiles_while_timing += records[name].variant.compiles() - before[name]
    torch_after = torch_compiles_total()
    if torch_before is not None and torch_after != torch_before:
        for name in live:
            if records[name].variant.framework == "torch.compile":
                records[name].compiles_while_timing += torch_after - torch_before
