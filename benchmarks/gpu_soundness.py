"""GPU soundness run (issue 21, class 7): transformers models the H100 failed on, compiled by
framejit, checked against eager, in bounds mode and under compute-sanitizer.

Input: the stages, models and modes to run (command line). Output: one line per job on stdout
(`PASS`/`FAIL` with the reason) and a summary; each job's full output in `--logs`.

Models (random weights, bf16, batch 16, 128 tokens; `benchmarks/zoo` small configs: hidden 256,
4 layers, 4 heads): `deberta-v2` (DebertaV2ForMaskedLM), `deberta-v2-model` (DebertaV2Model,
the issue's class: `CUDA error: an illegal memory access` from a generated Triton kernel),
`mistral` (MistralForCausalLM, no cache), `mistral-cache` (the same with transformers' default
`use_cache=True`, whose DynamicCache builds `torch.tensor([], device=...)` constants, and a
0-d `torch.tensor(4096)` sliding window: the path of `Pointer argument (at 0) cannot be
accessed from Triton (cpu tensor?)`), `bart` (BartForConditionalGeneration). Modes:
`inference` (bf16 parameters, no_grad) and `training` (float32 parameters, bf16 autocast,
forward + loss + backward; gradients compared).

Stages, each job in its own process (a device-side assert ends the CUDA context):
- `bounds`: `dynamo.jit(model)` with `JIT_BOUNDS_CHECK=1` (every generated load and store
  asserts its index: `inductor/codegen/bounds.py`), two calls, outputs (or loss and
  gradients) judged against eager and a float64 copy as the zoo judges them;
- `default`: the same without bounds mode (does the failure reproduce as the issue saw it?);
- `sanitizer`: the default job under `compute-sanitizer --tool memcheck` with torch's
  caching allocator off (`PYTORCH_NO_CUDA_MEMORY_CACHING=1`, so an access past a tensor is
  past its allocation), eager and compiled in one process; the sanitizer's error count and
  first errors are reported.

    python3 -m benchmarks.gpu_soundness [--stages bounds,default,sanitizer]
        [--models deberta-v2,...] [--modes inference,training] [--budget 560] [--logs DIR]
    python3 -m benchmarks.gpu_soundness child '<job as JSON>'     # one job, used internally

`benchmarks/gpu_soundness.sh` is the one command to run on the GPU machine.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

MARKER = "SOUNDNESS-ROW "
MODELS = ("deberta-v2", "deberta-v2-model", "mistral", "mistral-cache", "bart")
STAGES = ("bounds", "default", "sanitizer")
BATCH = 16
TIMEOUT = {"bounds": 420, "default": 300, "sanitizer": 560}


# -- one job (child process) -------------------------------------------------------------------
def build(name: str, training: bool, batch: int = BATCH):
    """The workload of `name`: a zoo entry, or one of this script's two variants (the
    catalog's `soundness/` entries, `benchmarks/zoo/variants.py`)."""
    from benchmarks.zoo import catalog
    entry = name if name in catalog.names() else f"soundness/{name}"
    if entry not in catalog.names(None):
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    return catalog.build_workload(entry, "cpu", None, batch, training)


def run_child(job: dict) -> dict:
    """Eager, then `dynamo.jit` twice, on the GPU; the verdict as a row."""
    import torch

    import dynamo
    import inductor
    from benchmarks.zoo import accuracy, worker
    row = dict(job, status="error", step="start")
    started = time.perf_counter()
    try:
        training = job["mode"] == "training"
        inductor.config.bounds_check = job["stage"] == "bounds"
        row["step"] = "build"
        dtype = None if training else torch.bfloat16
        device = job.get("device", "cuda")
        batch = job.get("batch", BATCH)
        run = worker._Run(worker.Job(job["model"], job["mode"], "framejit", device,
                                     "float32" if training else "bfloat16",
                                     "bfloat16" if training else None, batch))
        workload = build(job["model"], training, batch).to(device, dtype)
        row["step"] = "float64 reference"
        reference = worker._reference(run, workload)
        row["step"] = "eager"
        eager = run.forward(workload.model, workload)
        _synchronize(device)
        row["step"] = "compile and first call"
        jitted = dynamo.jit(workload.model)
        run.forward(jitted, workload)
        _synchronize(device)
        row["step"] = "second call"
        result = run.forward(jitted, workload)
        _synchronize(device)
        row["step"] = "accuracy"
        verdict = accuracy.compare(result, eager, reference, torch.bfloat16)
        row["accuracy"] = verdict.as_row()
        row["status"] = "pass" if verdict.passed else "fail_accuracy"
        row["step"] = "done"
    except BaseException as error:  # noqa: BLE001  (every failure is a row)
        row["error"] = f"{type(error).__name__}: {error}"[:3000]
        row["traceback"] = traceback.format_exc()[-4000:]
    row["fallbacks"] = inductor.fallbacks() if "inductor" in sys.modules else {}
    row["seconds"] = round(time.perf_counter() - started, 1)
    return row


def _synchronize(device: str) -> None:
    """Wait for the GPU, so that an asynchronous fault surfaces in the step that caused it."""
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# -- the driver ----------------------------------------------------------------------------------
def _command(job: dict) -> list:
    command = [sys.executable, "-m", "benchmarks.gpu_soundness", "child", json.dumps(job)]
    if job["stage"] != "sanitizer":
        return command
    sanitizer = shutil.which("compute-sanitizer") or next(
        (str(path) for path in sorted(Path("/usr/local").glob("cuda*/bin/compute-sanitizer"))),
        None)
    if sanitizer is None:
        raise FileNotFoundError("compute-sanitizer is not on PATH or under /usr/local/cuda*")
    return [sanitizer, "--tool", "memcheck", "--print-limit", "20", "--error-exitcode", "97",
            "--launch-timeout", "0", *command]


def _environment(job: dict) -> dict:
    environment = dict(os.environ, PYTHONUNBUFFERED="1")
    environment["JIT_BOUNDS_CHECK"] = "1" if job["stage"] == "bounds" else "0"
    if job["stage"] == "sanitizer":
        environment["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    return environment


def run_job(job: dict, logs: Path, timeout: float) -> dict:
    """Run one job in its own process; its row, with what stderr and the sanitizer said."""
    name = f"{job['stage']}-{job['model']}-{job['mode']}"
    try:
        command = _command(job)
    except FileNotFoundError as error:
        return dict(job, status="not run", error=str(error))
    try:
        process = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                 env=_environment(job))
        output, errors, code = process.stdout, process.stderr, process.returncode
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout or ""
        errors = (expired.stderr or "") if isinstance(expired.stderr, str) else ""
        code = "timeout"
    (logs / f"{name}.log").write_text(f"$ {' '.join(command)}\n--- stdout\n{output}\n"
                                      f"--- stderr\n{errors}\n--- exit {code}\n")
    row = next((json.loads(line[len(MARKER):]) for line in output.splitlines()
                if line.startswith(MARKER)), None)
    if row is None:
        row = dict(job, status="crash" if code != "timeout" else "timeout",
                   error=_last_lines(errors + output))
    row["exit"] = code
    row["bounds_messages"] = sorted(set(re.findall(r"framejit bounds check: [^\"\n]*",
                                                   output + errors)))[:5]
    if job["stage"] == "sanitizer":
        row.update(_sanitizer_summary(output + errors))
    return row


def _sanitizer_summary(text: str) -> dict:
    found = re.search(r"ERROR SUMMARY: (\d+) error", text)
    errors = [line.strip("= ").strip() for line in text.splitlines()
              if line.startswith("=========") and ("Invalid" in line or "Error" in line
                                                   or "at " in line and "kernel" in line)]
    return {"sanitizer_errors": int(found.group(1)) if found else None,
            "sanitizer_first": errors[:6]}


def _last_lines(text: str, count: int = 6) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-count:])[-1500:]


def describe(row: dict) -> str:
    """One line for people."""
    label = f"{row['stage']:<9} {row['model']:<16} {row['mode']:<9}"
    ok = row.get("status") == "pass" and not row.get("sanitizer_errors") and \
        not row.get("bounds_messages")
    verdict = "PASS" if ok else "FAIL"
    parts = [f"{row.get('status')}"]
    accuracy = row.get("accuracy") or {}
    if accuracy.get("max_abs_vs_eager") is not None:
        parts.append(f"max|compiled-eager| {accuracy['max_abs_vs_eager']}")
    if accuracy.get("reason"):
        parts.append(accuracy["reason"])
    fallbacks = sum((row.get("fallbacks") or {}).values())
    if fallbacks:
        parts.append(f"{fallbacks} inductor fallback(s): "
                     + "; ".join(list(row["fallbacks"])[:2]))
    if row.get("sanitizer_errors") is not None:
        parts.append(f"compute-sanitizer: {row['sanitizer_errors']} error(s)")
    parts += row.get("bounds_messages") or []
    parts += row.get("sanitizer_first") or []
    if row.get("error"):
        parts.append(f"at {row.get('step', '?')}: {row['error'][:600]}")
    parts.append(f"{row.get('seconds', '?')} s")
    return f"{verdict}  {label} " + "; ".join(str(part) for part in parts)


def main(argv: list) -> int:
    if argv[:1] == ["child"]:
        row = run_child(json.loads(argv[1]))
        print(MARKER + json.dumps(row, default=str), flush=True)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default="inference,training")
    parser.add_argument("--sanitizer-modes", default="inference",
                        help="modes run under compute-sanitizer (slow: inference by default)")
    parser.add_argument("--budget", type=float, default=560.0,
                        help="seconds; jobs that would start later are listed as not run")
    parser.add_argument("--logs", default=os.environ.get("OUT") or "/tmp/gpu-soundness")
    parser.add_argument("--device", default="cuda",
                        help="cpu: try the plumbing on a machine without a GPU")
    parser.add_argument("--batch", type=int, default=BATCH)
    options = parser.parse_args(argv)
    logs = Path(options.logs)
    logs.mkdir(parents=True, exist_ok=True)
    jobs = [{"stage": stage, "model": model, "mode": mode, "device": options.device,
             "batch": options.batch}
            for stage in options.stages.split(",") for model in options.models.split(",")
            for mode in (options.sanitizer_modes if stage == "sanitizer" else
                         options.modes).split(",")]
    started, rows = time.monotonic(), []
    for job in jobs:
        left = options.budget - (time.monotonic() - started)
        if left < 30:
            row = dict(job, status="not run", error="out of budget (--budget)")
        else:
            row = run_job(job, logs, min(TIMEOUT[job["stage"]], left))
        rows.append(row)
        print(describe(row), flush=True)
    with open(logs / "gpu-soundness.jsonl", "a") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=str) + "\n")
    failed = [row for row in rows if not describe(row).startswith("PASS")]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} jobs passed; logs in {logs}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
