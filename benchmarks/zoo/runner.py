"""Stage "runner": a suite of jobs -> result rows appended to a JSON-lines file.

Input: a list of `Job`s and an output path. Output: one JSON line per job in that file.

Each job runs in its own Python process (`python -m benchmarks.zoo.worker`) with a timeout
and fresh compiler caches (TMPDIR, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, framejit's
JIT_CACHE_DIR and XDG_CACHE_HOME point into a new temporary folder, removed afterwards), so
every compile time is a cold one (framejit's two native libraries, the guard matcher and the
wrappers' allocation helper, are built once per torch version like an installed extension:
`prepare_native` builds them before the first job into JIT_NATIVE_CACHE_DIR, which every job
shares) and one model's crash, hang or memory blow-up cannot take down the suite: a
timeout or a crash is a row with that status. Runs are resumable: a job whose key already has
a row in the output file is skipped (`retry` names statuses to run again). A time `budget`
stops the run between jobs, leaving the rest for the next call (the GPU script's chunks).
Progress is one plain line per job, so it reads the same in a terminal, a log or a pipe.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from benchmarks.zoo.worker import MARKER, Job, row_key

REPOSITORY = Path(__file__).resolve().parents[2]
_TAIL = 3000


@dataclasses.dataclass
class Outcome:
    """What `run_jobs` did: rows written, jobs skipped as done, jobs left for a later call."""

    written: int = 0
    skipped: int = 0
    left: int = 0


def load_rows(path: Path) -> list[dict]:
    """Every row of a JSON-lines results file (unreadable lines are ignored)."""
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def pending(jobs: list[Job], path: Path, retry: Optional[Iterable[str]] = ()
            ) -> tuple[list, int]:
    """The jobs without a row in `path` (or whose row's status is in `retry`; `retry=None`:
    every job), and how many were skipped as done."""
    if retry is None:
        return list(jobs), 0
    retry = set(retry)
    done = {row_key(row) for row in load_rows(path) if row.get("status") not in retry}
    todo = [job for job in jobs if job.key() not in done]
    return todo, len(jobs) - len(todo)


def run_jobs(jobs: list[Job], output: Path, timeout: float, budget: Optional[float] = None,
             min_start: float = 60.0, retry: Optional[Iterable[str]] = (),
             progress: Callable[[str], None] = print) -> Outcome:
    """Run the jobs of `jobs` that have no row in `output` yet, appending one row each."""
    todo, skipped = pending(jobs, output, retry)
    outcome = Outcome(skipped=skipped)
    if todo:
        prepare_native(progress)
    output.parent.mkdir(parents=True, exist_ok=True)
    progress(f"zoo: {len(todo)} jobs to run, {skipped} already in {output}")
    started = time.monotonic()
    for index, job in enumerate(todo):
        remaining = None if budget is None else budget - (time.monotonic() - started)
        if remaining is not None and remaining < min_start:
            outcome.left = len(todo) - index
            break
        limit = timeout if remaining is None else min(timeout, remaining)
        row = run_one(job, limit)
        if row["status"] == "timeout" and limit < timeout:
            outcome.left = len(todo) - index  # cut by the budget, not by its own timeout
            progress(f"zoo: budget reached during {_label(job)}; it runs again next time")
            break
        with output.open("a") as stream:
            stream.write(json.dumps(row) + "\n")
        outcome.written += 1
        progress(_progress_line(index + 1, len(todo), job, row, time.monotonic() - started))
    if outcome.left:
        progress(f"zoo: {outcome.left} jobs left; run the same command again to continue")
    else:
        progress(f"zoo: suite complete ({outcome.written} new rows in {output})")
    return outcome


def native_cache() -> str:
    """Where the jobs find framejit's prebuilt native libraries."""
    return os.environ.get("JIT_NATIVE_CACHE_DIR") or os.environ.get("JIT_CACHE_DIR") or \
        os.path.join(os.path.expanduser("~"), ".cache", "framejit")


def prepare_native(progress: Callable[[str], None] = print) -> None:
    """Build (or find) the guard matcher and the allocation helper once, before the jobs."""
    environment = dict(os.environ, JIT_NATIVE_CACHE_DIR=native_cache())
    path = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = str(REPOSITORY) + (os.pathsep + path if path else "")
    script = ("import guards.native, inductor.runtime.native as n; guards.native.load(); "
              "print(n.empty_strided())")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPOSITORY, env=environment,
                            capture_output=True, text=True, timeout=900)
    if result.returncode != 0 or "built-in" not in result.stdout:
        progress(f"zoo: framejit's native libraries did not build (jobs build or skip them "
                 f"themselves): {(result.stderr or result.stdout)[-500:]}")


def run_one(job: Job, timeout: float) -> dict:
    """Run `job` in a fresh process with fresh caches; a timeout or crash becomes a row."""
    scratch = Path(tempfile.mkdtemp(prefix="zoo-job-"))
    started = time.monotonic()
    command = [sys.executable, "-m", "benchmarks.zoo.worker", json.dumps(dataclasses.asdict(job))]
    process = subprocess.Popen(command, cwd=REPOSITORY, env=_environment(job, scratch),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        stdout, stderr = process.communicate()
        row = _failure_row(job, "timeout", f"no result within {timeout:.0f} s", stderr)
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): take the worker down too
        _kill_group(process)
        raise
    else:
        row = _parse_row(stdout) or _failure_row(
            job, "crash", f"worker exited with code {process.returncode} and no row", stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    row["wall_seconds"] = round(time.monotonic() - started, 2)
    return row


def _environment(job: Job, scratch: Path) -> dict:
    environment = dict(os.environ)
    path = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = str(REPOSITORY) + (os.pathsep + path if path else "")
    environment["PYTHONUNBUFFERED"] = "1"
    environment["TMPDIR"] = str(scratch)
    for name, folder in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton"),
                         ("JIT_CACHE_DIR", "framejit"), ("XDG_CACHE_HOME", "cache")):
        environment[name] = str(scratch / folder)
    environment["JIT_NATIVE_CACHE_DIR"] = native_cache()
    if job.threads:
        environment["OMP_NUM_THREADS"] = environment["MKL_NUM_THREADS"] = str(job.threads)
    return environment


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the worker and any compile workers it started
    except ProcessLookupError:
        pass


def _parse_row(stdout: str) -> Optional[dict]:
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER):])
            except json.JSONDecodeError:
                return None
    return None


def _failure_row(job: Job, status: str, error: str, stderr: str) -> dict:
    row = dataclasses.asdict(job)
    row.update(status=status, error=error, stderr_tail=(stderr or "")[-_TAIL:],
               date=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    return row


def _label(job: Job) -> str:
    precision = job.dtype if job.amp is None else f"amp-{job.amp}"
    return f"{job.model} {job.mode} {job.compiler} ({job.device}, {precision}, batch {job.batch})"


def _progress_line(done: int, total: int, job: Job, row: dict, elapsed: float) -> str:
    width = 20
    filled = round(width * done / total) if total else width
    bar = "#" * filled + "." * (width - filled)
    eta = elapsed / done * (total - done) if done else 0.0
    detail = row["status"]
    if row.get("speedup") is not None and job.compiler != "eager":
        detail += f" {row['speedup']:.2f}x"
    if row.get("compile_seconds") is not None:
        detail += f", compile {row['compile_seconds']:.1f} s"
    if row.get("inductor_fallbacks"):
        detail += f", {row['inductor_fallbacks']} graph(s) run by eager kernels"
    if row.get("error"):
        detail += f" ({row['error'][:80]})"
    return (f"[{bar}] {done}/{total} {_label(job)}: {detail} "
            f"[{row.get('wall_seconds', 0):.0f} s; elapsed {_clock(elapsed)}, eta {_clock(eta)}]")


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"
