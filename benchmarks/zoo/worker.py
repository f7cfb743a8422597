"""Stage "worker": run one benchmark job in this process and print its result row.

Input: a `Job` (model, mode, compiler, device, dtype, AMP, batch, compile mode, trial counts)
as JSON on the command line. Output: one JSON line on stdout, prefixed with `MARKER`.

Steps: build the workload; compute the float64 eager reference (a deep copy in float64) and
the eager result in the job's dtype; compile, timing the first call (cold compile, including
one execution); judge accuracy (`accuracy.compare`); warm up; time eager and compiled steps in
interleaved trials; count graphs again (new ones are recompiles); measure each step's peak
memory. A training step is forward, loss, backward and an SGD step; accuracy in training
compares the loss and every parameter's gradient after the first backward. Jobs of the
`framejit` compiler count the graphs inductor ran through eager kernels instead of generated
code (`inductor_fallbacks`, with their reasons). Any exception becomes a row with
`status: "error"` naming the step it happened in; the process exits 0.
"""
from __future__ import annotations

import copy
import dataclasses
import gc
import json
import sys
import time
import traceback
import warnings
from contextlib import nullcontext
from typing import Optional

import torch

from benchmarks import timing
from benchmarks.zoo import accuracy, catalog, compilers, machine, measure

MARKER = "ZOO-ROW "


@dataclasses.dataclass(frozen=True)
class Job:
    """One row to measure. `key()` identifies it in a results file (for resuming)."""

    model: str
    mode: str = "inference"  # or "training"
    compiler: str = "eager"
    device: str = "cpu"
    dtype: str = "float32"  # parameters and inputs; with `amp`, the autocast dtype is `amp`
    amp: Optional[str] = None  # e.g. "bfloat16": autocast around forward and loss
    batch: int = 1
    compile_mode: Optional[str] = None
    trials: int = 5
    warmup: int = 2
    trial_seconds: float = 0.2
    threads: Optional[int] = None  # torch.set_num_threads and OMP_NUM_THREADS; None: default
    suite: str = ""
    note: str = ""  # free text carried into the report (e.g. "shared machine")

    def key(self) -> tuple:
        return (self.model, self.mode, self.compiler, self.device, self.dtype, self.amp,
                self.batch, self.compile_mode, self.threads)

    @classmethod
    def from_dict(cls, values: dict) -> "Job":
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in names})


def row_key(row: dict) -> tuple:
    """The `Job.key()` of a result row."""
    return Job.from_dict(row).key()


class _Run:
    """The state of one job as it goes through its steps."""

    def __init__(self, job: Job):
        self.job = job
        self.training = job.mode == "training"
        self.dtype = getattr(torch, job.dtype)
        self.row: dict = {**dataclasses.asdict(job), "status": None, "step": "start"}

    def autocast(self, enabled: bool = True):
        if self.job.amp is None or not enabled:
            return nullcontext()
        return torch.autocast(self.job.device.split(":")[0], dtype=getattr(torch, self.job.amp))

    def forward(self, function, workload: catalog.Workload, amp: bool = True):
        """Inference: the outputs. Training: (loss, gradients), gradients then cleared.
        `amp=False` runs without autocast (the float64 reference)."""
        if not self.training:
            with torch.no_grad(), self.autocast(amp):
                return function(*workload.args, **workload.kwargs)
        with self.autocast(amp):
            loss = workload.loss(function(*workload.args, **workload.kwargs), workload.targets)
        loss.backward()
        gradients = [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone()
                     for p in workload.model.parameters()]
        workload.model.zero_grad(set_to_none=True)
        return loss.detach(), gradients

    def step(self, function, workload: catalog.Workload, optimizer):
        """A zero-argument iteration: an inference call, or a whole training step."""
        args, kwargs = workload.args, workload.kwargs
        if not self.training:
            def infer():
                with torch.no_grad(), self.autocast():
                    return function(*args, **kwargs)
            return infer

        def train():
            with self.autocast():
                loss = workload.loss(function(*args, **kwargs), workload.targets)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return train


def run_job(job: Job) -> dict:
    """Measure `job`; never raises (errors become the row's `status`/`error`)."""
    run = _Run(job)
    started = time.perf_counter()
    fallbacks_before = _inductor_fallbacks(job)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _measure(run)
        except Exception as error:  # one failing model or compiler is a row, never a crash
            run.row["status"] = "error"
            run.row["error"] = f"{type(error).__name__}: {error}"[:2000]
            run.row["traceback"] = traceback.format_exc()[-3000:]
    run.row["fallbacks"] = _product_warnings(caught)
    if fallbacks_before is not None:
        from inductor.runtime import fallbacks
        added = fallbacks.since(fallbacks_before)
        run.row["inductor_fallbacks"] = sum(added.values())
        run.row["inductor_fallback_reasons"] = dict(list(added.items())[:5])
    run.row["job_seconds"] = round(time.perf_counter() - started, 2)
    run.row["env"] = machine.describe(job.device)
    run.row["date"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return run.row


def _measure(run: _Run) -> None:
    job, row = run.job, run.row
    row["step"] = "build"
    cast = None if run.dtype == torch.float32 else run.dtype
    workload = catalog.build_workload(job.model, job.device, cast, job.batch, run.training)
    row["parameters_m"] = round(sum(p.numel() for p in workload.model.parameters()) / 1e6, 2)
    row["step"] = "float64 reference"
    reference = _reference(run, workload)
    row["step"] = "eager"
    eager_result = run.forward(workload.model, workload)
    row["step"] = "compile"
    compiled = compilers.compile_model(job.compiler, workload.model, job.compile_mode)
    result, first_call = timing.timed(lambda: run.forward(compiled.function, workload),
                                      lambda: measure.synchronize(job.device))
    row["compile_seconds"] = None if job.compiler == "eager" else round(first_call, 3)
    row["first_call_seconds"] = round(first_call, 4)
    first_stats = compiled.stats()
    row.update(first_stats)
    row["step"] = "accuracy"
    tolerance_dtype = getattr(torch, job.amp) if job.amp else run.dtype
    verdict = accuracy.compare(result, eager_result, reference, tolerance_dtype)
    row["accuracy"] = verdict.as_row()
    del reference, eager_result, result
    _release(job.device)
    row["step"] = "timing"
    _time(run, workload, compiled)
    stats = compiled.stats()
    row.update(stats)
    if stats.get("graphs") is not None and first_stats.get("graphs") is not None:
        row["recompiles"] = stats["graphs"] - first_stats["graphs"]
    row["step"] = "explain"
    _explain(run, workload)
    row["step"] = "done"
    row["status"] = _status(job, row, verdict)


def _reference(run: _Run, workload: catalog.Workload):
    """The float64 eager result from a deep copy (same weights and inputs)."""
    model64 = copy.deepcopy(workload.model).to(torch.float64)
    workload64 = catalog.Workload(
        model64, catalog.cast_tensors(workload.args, None, torch.float64),
        catalog.cast_tensors(workload.kwargs, None, torch.float64), workload.loss,
        catalog.cast_tensors(workload.targets, None, torch.float64))
    return run.forward(model64, workload64, amp=False)


def _time(run: _Run, workload: catalog.Workload, compiled: compilers.Compiled) -> None:
    job, row = run.job, run.row
    parameters = list(workload.model.parameters())
    optimizer = torch.optim.SGD(parameters, lr=1e-4) if run.training else None
    eager_step = run.step(workload.model, workload, optimizer)
    compiled_step = (None if job.compiler == "eager"
                     else run.step(compiled.function, workload, optimizer))
    for _ in range(job.warmup):
        eager_step()
        if compiled_step is not None:
            compiled_step()
    repeat = measure.calibrate_repeat(eager_step, job.device, job.trial_seconds)
    times = measure.interleaved(eager_step, compiled_step, job.trials, repeat, job.device)
    row["repeat"] = repeat
    row["eager_ms"] = round(times["eager"]["median"] * 1e3, 4)
    row["eager_trials_ms"] = [round(value * 1e3, 4) for value in times["eager"]["all"]]
    if compiled_step is not None:
        row["compiled_ms"] = round(times["compiled"]["median"] * 1e3, 4)
        row["compiled_trials_ms"] = [round(value * 1e3, 4) for value in times["compiled"]["all"]]
        row["speedup"] = round(measure.paired_speedup(times["eager"]["all"],
                                                       times["compiled"]["all"]), 4)
    else:
        row["compiled_ms"], row["speedup"] = row["eager_ms"], 1.0
    row["step"] = "memory"
    _release(job.device)
    eager_peak, method = measure.peak_memory(eager_step, job.device)
    row["eager_peak_mb"] = _megabytes(eager_peak)
    row["memory_method"] = method
    if compiled_step is not None:
        _release(job.device)
        row["peak_mb"] = _megabytes(measure.peak_memory(compiled_step, job.device)[0])
    else:
        row["peak_mb"] = row["eager_peak_mb"]


def _explain(run: _Run, workload: catalog.Workload) -> None:
    if not run.job.compiler.startswith("framejit"):
        return
    context = torch.no_grad() if not run.training else nullcontext()
    with context, run.autocast():
        counts = compilers.explain_counts(workload.model, workload.args, workload.kwargs)
    if counts is not None:
        run.row["records"] = {key: run.row.get(key) for key in ("graphs", "graph_breaks")}
        run.row.update(counts)


def _status(job: Job, row: dict, verdict: accuracy.Accuracy) -> str:
    if not verdict.passed:
        return "fail_accuracy"
    if job.compiler != "eager" and not row.get("graphs"):
        return "eager_fallback"  # ran correctly, but nothing was compiled
    return "pass"


def _inductor_fallbacks(job: Job) -> Optional[dict]:
    """For jobs compiling with inductor: its graph fallback counts so far (a job's own are the
    difference at its end), else None."""
    if job.compiler != "framejit":
        return None
    from inductor.runtime import fallbacks
    return fallbacks.fallbacks()


def _product_warnings(caught) -> list[str]:
    messages = [str(item.message) for item in caught if "framejit" in str(item.message)]
    return [message[:400] for message in dict.fromkeys(messages)][:5]


def _release(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def _megabytes(value: Optional[int]) -> Optional[float]:
    return None if value is None else round(value / 2**20, 2)


def main(argv: list[str]) -> int:
    """`python -m benchmarks.zoo.worker '<job as JSON>'`: print the row after `MARKER`."""
    job = Job.from_dict(json.loads(argv[0]))
    if job.threads:
        torch.set_num_threads(job.threads)
    row = run_job(job)
    sys.stdout.flush()
    print(MARKER + json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
