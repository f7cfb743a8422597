"""The graph fuzzer's driver: seeds run in worker processes, results gathered into a summary.

Input: seeds, the CPU code generator, the device, the number of worker processes. Output: a
`Campaign` (per failure signature: count and seeds; graphs run as is; ops run through eager
kernels; time) and, per failing seed on request, a minimized repro script. Each worker is a
separate process (spawned, so CUDA works in it) that generates and checks one program per
job; a worker that dies (a generated kernel crashing the process) or overruns the time limit
is recorded as a "crash" or "timeout" of that seed and replaced.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import multiprocessing
import multiprocessing.connection
import os
import time
from typing import Iterable, Optional

CASE_TIMEOUT = 600.0


@dataclasses.dataclass
class Job:
    seed: int
    backend: str
    device: str
    program: Optional[object] = None   # a Program to check instead of generating one


def _worker_main(connection, cache_dir: Optional[str]) -> None:
    import warnings
    warnings.simplefilter("ignore")
    import torch
    import inductor
    from tests.fuzz.graphs.check import check_program
    from tests.fuzz.graphs.generator import generate

    if cache_dir:
        inductor.config.cache_dir = cache_dir
    torch.set_num_threads(max(1, torch.get_num_threads()))
    while True:
        job = connection.recv()
        if job is None:
            return
        try:
            program = job.program if job.program is not None else generate(job.seed, job.device)
            result = check_program(program, job.seed, job.backend)
            answer = {"seed": job.seed, "program": program, "as_is": result.as_is,
                      "failures": [(failure.kind, failure.detail, failure.call,
                                    failure.signature()) for failure in result.failures],
                      "notes": [(note.kind, note.detail, note.call) for note in result.notes],
                      "fallback_ops": result.fallback_ops, "seconds": result.seconds,
                      "nodes": result.nodes}
        except Exception as error:  # noqa: BLE001 (a fuzzer bug: reported, worker goes on)
            answer = {"seed": job.seed, "program": None, "as_is": None, "nodes": 0,
                      "failures": [("fuzzer error", f"{type(error).__name__}: {error}",
                                    "", "fuzzer error")],
                      "fallback_ops": {}, "seconds": 0.0}
        # A device-side assert (eager's own index checks included) leaves the process's CUDA
        # context unusable: every later graph of this worker failed (1,949 of 2,000 on the
        # H100 after seed 19). The worker ends and the pool starts a fresh one.
        answer["poisoned"] = any(_POISON in str(failure[1]) for failure in answer["failures"])
        connection.send(answer)
        if answer["poisoned"]:
            return


_POISON = "device-side assert"


class Worker:
    """One worker process and the job it is running."""

    def __init__(self, cache_dir: Optional[str]):
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, cache_dir),
                                       daemon=True)
        self.process.start()
        child.close()
        self.job: Optional[Job] = None
        self.started = 0.0

    def submit(self, job: Job) -> None:
        self.job, self.started = job, time.monotonic()
        self.connection.send(job)

    def stop(self) -> None:
        try:
            self.connection.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()

    def kill(self) -> None:
        self.process.kill()
        self.process.join()


class Pool:
    """Workers running jobs; `run(jobs)` yields one result dict per job."""

    def __init__(self, jobs: int, cache_dir: Optional[str], timeout: float = CASE_TIMEOUT):
        self.cache_dir = cache_dir
        self.timeout = timeout
        self.workers = [Worker(cache_dir) for _ in range(max(1, jobs))]

    def run(self, jobs: Iterable[Job]):
        pending = iter(jobs)
        exhausted = False
        while True:
            for worker in self.workers:
                if worker.job is None and not exhausted:
                    job = next(pending, None)
                    if job is None:
                        exhausted = True
                    else:
                        worker.submit(job)
            busy = [worker for worker in self.workers if worker.job is not None]
            if not busy:
                return
            ready = multiprocessing.connection.wait(
                [worker.connection for worker in busy] + [worker.process.sentinel
                                                          for worker in busy], timeout=5.0)
            for worker in busy:
                yield from self._collect(worker, ready)

    def _collect(self, worker: Worker, ready):
        job = worker.job
        if worker.connection in ready:
            try:
                result = worker.connection.recv()
            except (EOFError, OSError):
                result = None
            if result is not None:
                worker.job = None
                if result.get("poisoned"):
                    worker.stop()
                    self.workers[self.workers.index(worker)] = Worker(self.cache_dir)
                yield result
                return
        dead = not worker.process.is_alive()
        late = time.monotonic() - worker.started > self.timeout
        if dead or late:
            if not dead:
                worker.kill()
            kind = "crash" if dead else "timeout"
            detail = f"worker exit code {worker.process.exitcode}" if dead else \
                f"over {self.timeout:.0f} s"
            self.workers[self.workers.index(worker)] = Worker(self.cache_dir)
            yield {"seed": job.seed, "program": job.program, "as_is": None, "nodes": 0,
                   "failures": [(kind, detail, "", kind)], "fallback_ops": {},
                   "seconds": 0.0}

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()


@dataclasses.dataclass
class Campaign:
    """Totals of a run."""

    graphs: int = 0
    failing_graphs: int = 0
    signatures: dict = dataclasses.field(default_factory=collections.Counter)
    seeds: dict = dataclasses.field(default_factory=lambda: collections.defaultdict(list))
    examples: dict = dataclasses.field(default_factory=dict)
    as_is: dict = dataclasses.field(default_factory=collections.Counter)
    notes: dict = dataclasses.field(default_factory=collections.Counter)
    fallback_ops: dict = dataclasses.field(default_factory=collections.Counter)
    nodes: int = 0
    seconds: float = 0.0

    def add(self, result: dict) -> None:
        self.graphs += 1
        self.nodes += result["nodes"]
        if result["as_is"]:
            self.as_is[result["as_is"]] += 1
        for kind in {note[0] for note in result.get("notes", [])}:
            self.notes[kind] += 1
        for name, count in result["fallback_ops"].items():
            self.fallback_ops[name] += count
        signatures = []
        for kind, detail, call, signature in result["failures"]:
            if signature not in signatures:
                signatures.append(signature)
                self.examples.setdefault(signature, f"{kind} [{call}]: {detail}"[:300])
        for signature in signatures:
            self.signatures[signature] += 1
            self.seeds[signature].append(result["seed"])
        self.failing_graphs += bool(signatures)

    def summary(self, label: str) -> str:
        lines = [f"graph fuzzer ({label}): {self.graphs} graphs ({self.nodes} ops), "
                 f"{self.failing_graphs} failing, {self.seconds:.0f} s"]
        for signature, count in self.signatures.most_common():
            seeds = ", ".join(str(seed) for seed in self.seeds[signature][:8])
            lines.append(f"  {count:6d}  {signature}  (seeds {seeds})")
            lines.append(f"          e.g. {self.examples[signature]}")
        unexpected = sum(count for signature, count in self.signatures.items()
                         if signature.startswith(("compile error", "unexpected fallback")))
        lines.append(f"  unexpected fallbacks (compile errors, which run as FX by default, and "
                     f"graphs run as is for undocumented reasons): {unexpected}")
        for kind, count in self.notes.most_common():
            lines.append(f"  {kind} (graphs, not failures): {count}")
        for reason, count in self.as_is.most_common():
            lines.append(f"  ran as is (documented reason) {count:5d}: {reason[:90]}")
        if self.fallback_ops:
            common = ", ".join(f"{name} {count}" for name, count in
                               self.fallback_ops.most_common(12))
            lines.append(f"  ops run through eager kernels: {common}")
        return "\n".join(line for line in lines if line)


def run_campaign(seeds: Iterable[int], backend: str, device: str, jobs: int,
                 cache_dir: Optional[str], log_path: Optional[str] = None,
                 progress: bool = True) -> tuple:
    """Check every seed; returns (Campaign, {seed: (program, [failure tuples])})."""
    campaign = Campaign()
    failing: dict = {}
    started = time.monotonic()
    pool = Pool(jobs, cache_dir)
    log = open(log_path, "a") if log_path else None
    try:
        for result in pool.run(Job(seed, backend, device) for seed in seeds):
            campaign.add(result)
            if result["failures"]:
                failing[result["seed"]] = (result["program"], result["failures"])
            if log is not None:
                log.write(json.dumps({key: value for key, value in result.items()
                                      if key != "program"} | {"backend": backend,
                                                              "device": device}) + "\n")
                log.flush()
            if progress and campaign.graphs % 100 == 0:
                print(f"  ... {campaign.graphs} graphs, {campaign.failing_graphs} failing, "
                      f"{time.monotonic() - started:.0f} s", flush=True)
    finally:
        pool.close()
        if log is not None:
            log.close()
    campaign.seconds = time.monotonic() - started
    return campaign, failing


def minimize_failure(program, seed: int, signature: str, backend: str, device: str,
                     cache_dir: Optional[str], budget: int = 300):
    """The minimized program of one failure, checked in a worker process."""
    from tests.fuzz.graphs.minimize import minimize

    pool = Pool(1, cache_dir)
    try:
        def check(candidate) -> set:
            results = list(pool.run([Job(seed, backend, device, candidate)]))
            return {failure[3] for failure in results[0]["failures"]}
        return minimize(program, seed, signature, check, budget)
    finally:
        pool.close()


def default_cache_dir() -> str:
    return os.environ.get("JIT_CACHE_DIR") or "/tmp/jitcache-graph-fuzzer"
