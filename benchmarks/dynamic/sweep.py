"""Stage "sweep": the batch-size sweep of issue 23, part (1).

Input: subject names, the batch sizes (20 by default, 2..256, called in increasing order),
the variants, the device and the trials. Output: one JSON-ready dict per subject: the
variants' summaries (`sizes.measure_sizes`) and per dynamic variant its per-call time over
its static counterpart's, per size and summarised (median, geometric mean, worst).

Done-when criteria it measures (evaluated in `report.criteria`): at most 2 compiles for the
whole sweep under framejit `dynamic=None` and `dynamic=True`; every call matches eager;
dynamic per-call time within 10% of static per-call time.
"""
from __future__ import annotations

import itertools
import math
import statistics
import time
from typing import Callable

from benchmarks.dynamic import subjects
from benchmarks.dynamic.sizes import measure_sizes

BATCH_SIZES = (2, 3, 4, 6, 8, 11, 16, 20, 27, 32, 45, 64, 80, 96, 128, 150, 180, 200, 224, 256)
QUICK_BATCH_SIZES = (2, 5, 16)
SWEEP_VARIANTS = ("eager", "framejit-static", "framejit-auto", "framejit-dynamic",
                  "torch.compile-auto", "torch.compile-dynamic")
BASELINE = {"framejit-auto": "framejit-static", "framejit-dynamic": "framejit-static",
            "torch.compile-auto": "torch.compile-static",
            "torch.compile-dynamic": "torch.compile-static"}


def ratios(variants: dict) -> dict:
    """{variant: {label: {per_size, median, geomean, worst}}}: per-call time of each dynamic
    variant over its static counterpart's (`vs_static`: framejit against framejit-static,
    torch.compile against torch.compile-static when measured), and of every variant over
    eager (`vs_eager`); from the medians of the trials, and (`_best` labels) from the best
    trials."""
    result = {}
    for name, row in variants.items():
        pairs = [(BASELINE.get(name), "vs_static"), ("eager", "vs_eager")]
        for (baseline, label), (field, suffix) in itertools.product(
                pairs, (("per_call_ms", ""), ("best_ms", "_best"))):
            base = variants.get(baseline) if baseline and baseline != name else None
            if base is None or not row.get(field) or not base.get(field):
                continue
            per_size = {size: round(row[field][size] / base[field][size], 3)
                        for size in row[field] if size in base[field] and base[field][size] > 0}
            label += suffix
            if per_size:
                values = list(per_size.values())
                result.setdefault(name, {})[label] = {
                    "per_size": per_size, "median": round(statistics.median(values), 3),
                    "geomean": round(math.exp(statistics.fmean(math.log(v) for v in values)),
                                     3),
                    "worst": round(max(values), 3)}
    return result


def run_sweep(names: list, sizes: list, variant_names: list, device: str, trials: int,
              progress: Callable[[str], None] = print) -> list:
    """One result per subject; a subject whose package is missing is skipped with a notice."""
    results = []
    for name in names:
        missing = subjects.missing_dependency(name)
        if missing:
            progress(f"sweep: {name} skipped: {missing} is not installed")
            results.append({"subject": name, "skipped": f"{missing} is not installed"})
            continue
        started = time.perf_counter()
        subject = subjects.sweep_subject(name, device)
        progress(f"sweep: {name} ({subject.description}), sizes {list(sizes)}")
        variants = measure_sizes(subject, list(variant_names), list(sizes), device, trials,
                                 progress)
        results.append({"subject": name, "description": subject.description,
                        "sizes": list(sizes), "variants": variants,
                        "ratios": ratios(variants),
                        "seconds": round(time.perf_counter() - started, 1)})
    return results
