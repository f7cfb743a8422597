"""Autotuning of Triton kernels: candidate block configurations, timing on first call, and
the on-disk record of the winner.

Input: a kernel's `LaunchSpec`, its function variants and the tuning mode. Output: the
candidates (`Candidate`: a variant and keyword arguments per function) and, after timing them
on the first call's real tensors, the fastest, remembered in memory and under
`<cache_dir>/triton/tuning/<key[:2]>/<key>.json`, keyed by the kernel's source, its launch
needs, the device name and the Triton version. A small set is timed by default; `exhaustive`
(`mode="max-autotune"`) times more. A kernel over symbolic sizes is tuned once per size
bucket (`triton_sizes.py`): its spec here is the bucket's, each symbolic extent replaced by
its next power of two, so the candidates and the record's key are the bucket's. Interpreted
(CPU) kernels take one configuration chosen for few, large programs, since the
interpreter's cost is per program and per operation.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tempfile
import time
from typing import Callable, Optional

import torch

from inductor.config import config

ELEMENTS_PER_PROGRAM = 8192       # register tile a reduction program aims for
INTERPRETER_BLOCK = 16384         # elements per interpreted program


@dataclasses.dataclass
class Candidate:
    """One way to launch a kernel: a variant (list of functions) and their keywords."""

    variant: int
    arguments: list             # one dict per function: block sizes, num_warps

    def describe(self) -> str:
        return f"variant {self.variant}: " + "; ".join(
            ", ".join(f"{key}={value}" for key, value in sorted(kwargs.items()))
            for kwargs in self.arguments)


def power_of_two(value: int) -> int:
    """The smallest power of two at least `value` (and at least 1)."""
    return 1 << max(0, math.ceil(math.log2(max(1, value))))


def _unique(configurations: list) -> list:
    seen, result = set(), []
    for kwargs in configurations:
        key = tuple(sorted(kwargs.items()))
        if key not in seen:
            seen.add(key)
            result.append(kwargs)
    return result


def _warps(elements: int, low: int = 2, high: int = 16) -> int:
    return max(low, min(high, elements // 256))


def pointwise_configs(spec, exhaustive: bool, interpret: bool) -> list:
    limit = power_of_two(spec.xnumel)
    if interpret:
        return [{"XBLOCK": min(limit, INTERPRETER_BLOCK)}]
    # 16 elements per thread first: on an H100 they beat 8 by 3-5% on broadcast and
    # transcendental streaming kernels (benchmarks/experiments/diag_streaming.py), and tie on x*2+1.
    shapes = [(1024, 16), (2048, 16), (1024, 8)]
    if exhaustive:
        shapes += [(512, 8), (4096, 16), (2048, 8), (256, 8), (128, 4)]
    configurations = []
    for block, per_thread in shapes:
        block = max(min(block, limit), 16)
        warps = max(1, min(16, block // (32 * per_thread)))
        configurations.append({"XBLOCK": block, "num_warps": warps})
    return _unique(configurations)


def tiled_configs(spec, exhaustive: bool, interpret: bool) -> list:
    x_limit, y_limit = power_of_two(spec.xnumel), power_of_two(spec.ynumel)
    if interpret:
        return [{"YBLOCK": min(y_limit, 128), "XBLOCK": min(x_limit, 128)}]
    shapes = [(32, 32, 4), (64, 64, 8), (16, 128, 4)]
    if exhaustive:
        shapes += [(128, 16, 4), (64, 32, 4), (32, 64, 4), (128, 128, 8)]
    return _unique([{"YBLOCK": max(min(y, y_limit), 1), "XBLOCK": max(min(x, x_limit), 1),
                     "num_warps": warps} for y, x, warps in shapes])


def persistent_configs(spec, exhaustive: bool, interpret: bool) -> list:
    row = power_of_two(spec.rnumel)
    rows = power_of_two(spec.xnumel)
    if interpret:
        return [{"XBLOCK": min(rows, max(1, INTERPRETER_BLOCK // row)), "RBLOCK": row}]
    if spec.outer_contiguous:
        blocks = [64, 128, 32] + ([256, 16] if exhaustive else [])
        return _unique([{"XBLOCK": min(block, rows), "RBLOCK": row,
                         "num_warps": _warps(min(block, rows) * row, 2, 8)} for block in blocks])
    most = max(1, ELEMENTS_PER_PROGRAM // row)
    blocks = [most, most // 4, most // 16] if exhaustive else [most, most // 4]
    configurations = []
    for block in blocks:
        block = max(1, min(block, rows))
        warps = _warps(block * row, 2, 16)
        configurations.append({"XBLOCK": block, "RBLOCK": row, "num_warps": warps})
        if row >= 16384 or exhaustive:
            configurations.append({"XBLOCK": block, "RBLOCK": row,
                                   "num_warps": min(32, 2 * warps)})
    return _unique(configurations)


def looped_configs(spec, exhaustive: bool, interpret: bool, row: Optional[int] = None) -> list:
    split = row is not None
    row = power_of_two(row or spec.rnumel)
    rows = power_of_two(spec.xnumel)
    if interpret:  # small blocks exercise the loop; split chunks are long, take bigger ones
        return [{"XBLOCK": min(rows, 64), "RBLOCK": min(row, 1024 if split else 64)}]
    if spec.outer_contiguous:
        shapes = [(64, 16, 4), (128, 16, 8), (256, 16, 8), (64, 64, 8), (128, 32, 8)]
        if exhaustive:
            shapes += [(128, 8, 4), (32, 32, 4), (256, 32, 8), (512, 8, 8)]
    else:
        shapes = [(1, 2048, 8), (1, 4096, 16), (1, 1024, 4)]
        if exhaustive:
            shapes += [(1, 512, 4), (2, 1024, 8), (4, 512, 8), (1, 8192, 16)]
    return _unique([{"XBLOCK": max(1, min(x, rows)), "RBLOCK": max(1, min(r, row)),
                     "num_warps": warps} for x, r, warps in shapes])


def combine_config(spec) -> dict:
    width = power_of_two(spec.split)
    return {"XBLOCK": max(1, min(power_of_two(spec.xnumel), 4096 // width)), "SBLOCK": width,
            "num_warps": 4}


def _fit_even(spec, found: list) -> list:
    """`found` with each block of `spec.even` cut to the largest power of two dividing its
    extent: the kernel was printed without that axis's mask."""
    extents = {"XBLOCK": spec.xnumel, "YBLOCK": spec.ynumel,
               "RBLOCK": spec.chunk if spec.kind == "split" else spec.rnumel}
    for candidate in found:
        for kwargs in candidate.arguments:
            for block in spec.even:
                if block in kwargs:
                    kwargs[block] = math.gcd(kwargs[block], extents[block])
    unique, seen = [], set()
    for candidate in found:
        key = (candidate.variant, tuple(tuple(sorted(kwargs.items()))
                                        for kwargs in candidate.arguments))
        if key not in seen:
            seen.add(key)
            unique.append(candidate)
    return unique


def candidates(spec, roles: list, exhaustive: bool, interpret: bool) -> list:
    """Every `Candidate` of a kernel whose functions have `roles` (in `functions()` order)."""
    return _fit_even(spec, _candidates(spec, roles, exhaustive, interpret))


def _candidates(spec, roles: list, exhaustive: bool, interpret: bool) -> list:
    kind = spec.kind
    if kind == "pointwise":
        return [Candidate(0, [kwargs]) for kwargs in
                pointwise_configs(spec, exhaustive, interpret)]
    if kind == "tiled":
        return [Candidate(0, [kwargs]) for kwargs in tiled_configs(spec, exhaustive, interpret)]
    if kind == "combo":     # the parts' blocks are fixed in its text (codegen/triton/combo.py)
        return [Candidate(0, [{} if interpret else {"num_warps": spec.num_warps}])]
    if kind == "scatter":
        block = {"XBLOCK": INTERPRETER_BLOCK if interpret else 1024}
        return [Candidate(0, [dict(block), dict(block)])]
    if kind == "split":
        final = combine_config(spec)
        if interpret:
            final.pop("num_warps")
        return [Candidate(0, [kwargs, dict(final)]) for kwargs in
                looped_configs(spec, exhaustive, interpret, row=spec.chunk)]
    result, row_fits = [], not getattr(spec, "row_limit", 0) or spec.rnumel <= spec.row_limit
    for variant, role in enumerate(roles):
        strategy = spec.strategy if role == "main" else role
        if strategy == "persistent" and not row_fits and len(roles) > 1:
            continue    # a size bucket's row past the limit (triton_sizes.py): looped only
        build = looped_configs if strategy == "looped" else persistent_configs
        result += [Candidate(variant, [kwargs]) for kwargs in build(spec, exhaustive, interpret)]
    return result


# -- timing ------------------------------------------------------------------------------------
# A GPU spin of `seconds * _CYCLES_PER_SECOND` cycles lasts at least `seconds` on any SM clock
# up to 2 GHz (an H100 boosts to 1.98).
_CYCLES_PER_SECOND = 2.0e9


def time_launch(launch: Callable[[], None]) -> float:
    """Milliseconds of device time per call of `launch` (GPU launches), the best of three
    batches. Each batch is queued behind a GPU spin (`torch.cuda._sleep`) that outlasts the
    host's enqueueing of the whole batch, so the launches run back to back and the timing is
    the device's alone: a kernel shorter than its host launch (most kernels of a model at
    batch 16; a 50 us split reduction through the `@triton.jit` path) would otherwise time
    the host, and the choice among candidates would be noise."""
    launch()
    torch.cuda.synchronize()
    started = time.perf_counter()
    launch()
    host = time.perf_counter() - started
    torch.cuda.synchronize()
    events = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    estimate = max(_batch(launch, 1, host, events), 1e-3)
    repeats = max(3, min(200, int(1.0 / estimate), int(0.02 / max(host, 1e-6))))
    return min(_batch(launch, repeats, host, events) for _ in range(3))


def _batch(launch: Callable[[], None], repeats: int, host: float, events: tuple) -> float:
    start, end = events
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        sleep(int((2 * host * repeats + 20e-6) * _CYCLES_PER_SECOND))
    start.record()
    for _ in range(repeats):
        launch()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats


# -- the record on disk ------------------------------------------------------------------------
def record_key(source: str, spec, device_name: str, exhaustive: bool) -> str:
    import triton
    digest = hashlib.sha256()
    for part in (source, repr(spec), device_name, triton.__version__, str(exhaustive)):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _record_path(key: str) -> str:
    return os.path.join(config.cache_dir, "triton", "tuning", key[:2], f"{key}.json")


def recorded(key: str, options: list) -> Optional[Candidate]:
    """The winner recorded for `key`, if it is still among `options`."""
    try:
        with open(_record_path(key)) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    for option in options:
        if option.variant == data.get("variant") and option.arguments == data.get("arguments"):
            return option
    return None


def remember(key: str, winner: Candidate, timings: dict) -> None:
    """Write the winner (and every timing, for people) under `key`."""
    path = _record_path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix="tuning-", dir=os.path.dirname(path))
    with os.fdopen(handle, "w") as stream:
        json.dump({"variant": winner.variant, "arguments": winner.arguments,
                   "timings_ms": timings}, stream, indent=1)
    os.replace(temporary, path)
