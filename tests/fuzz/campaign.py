"""Running many seeds: worker processes, the results log, minimization of failures, summary.

Stage: orchestration. Input: seeds and `Options`. Output: a `Summary` (printed), one JSON line
per program appended to the log file, and minimized repro scripts.

Every program runs in a worker process (`python -m tests.fuzz --worker`): a segfault or a hang
kills only the worker, and the seed it was running is recorded as a "crash" or "timeout"
failure. Workers are restarted every `RESTART_EVERY` programs so that compiled code and caches
do not accumulate. A worker also runs the minimizer's candidate programs, one per request.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from typing import Callable, Iterable, Optional

from tests.fuzz import grammar
from tests.fuzz.execution import Outcome
from tests.fuzz.generator import GENERATOR_VERSION, generate

RESTART_EVERY = 150
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class Options:
    backend: str = "eager"
    only: tuple = ()
    exclude: tuple = ()
    weights: tuple = ()
    timeout: float = 120.0
    backward: bool = True
    jobs: int = 1
    strict_frames: bool = False  # frames compared exactly, also for errors out of graphs
    dynamic: str = "off"  # execution.DYNAMIC: "off" runs today's calls; the others sweep sizes

    def settings(self) -> grammar.Settings:
        return grammar.Settings.from_options(self.only, self.exclude, self.weights,
                                             size_sweep=self.dynamic != "off")

    def worker_args(self) -> list:
        args = ["--backend", self.backend, "--timeout", str(self.timeout)]
        for flag, values in (("--only", self.only), ("--exclude", self.exclude),
                             ("--weight", self.weights)):
            for value in values:
                args += [flag, value]
        return args + ([] if self.backward else ["--no-backward"]) + \
            (["--strict-frames"] if self.strict_frames else []) + \
            (["--dynamic", self.dynamic] if self.dynamic != "off" else [])

    def key(self) -> str:
        """Identifies runs whose seeds give the same programs and checks (for --resume)."""
        key = {"backend": self.backend, "version": GENERATOR_VERSION, "only": sorted(self.only),
               "exclude": sorted(self.exclude), "weights": sorted(self.weights),
               "backward": self.backward}
        if self.strict_frames:
            key["strict_frames"] = True
        if self.dynamic != "off":
            key["dynamic"] = self.dynamic
        return json.dumps(key, sort_keys=True)


# -- one worker process -------------------------------------------------------------------------
class Worker:
    """A `python -m tests.fuzz --worker` child: one JSON request per line in, one outcome out."""

    def __init__(self, options: Options):
        self.options = options
        self.process: Optional[subprocess.Popen] = None
        self.done = 0
        self.current: Optional[dict] = None
        self.started = 0.0
        self.stderr = tempfile.TemporaryFile(mode="w+")

    def start(self) -> None:
        command = [sys.executable, "-m", "tests.fuzz", "--worker"] + self.options.worker_args()
        self.stderr.seek(0)
        self.stderr.truncate()
        env = dict(os.environ)  # tests.fuzz importable from any directory; the working
        # directory stays first on the path, so a checkout run from imports its own dynamo
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), _ROOT]))
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, text=True, bufsize=1, env=env)
        self.done = 0

    def send(self, request: dict) -> None:
        if self.process is None or self.process.poll() is not None or \
                self.done >= RESTART_EVERY:
            self.stop()
            self.start()
        self.current, self.started = request, time.monotonic()
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def receive(self) -> Outcome:
        """The outcome of the current request (a crash outcome if the worker died)."""
        line = self.process.stdout.readline()
        request, self.current = self.current, None
        self.done += 1
        if line:
            return Outcome(**json.loads(line))
        code = self.process.wait()
        self.process_id = self.process.pid
        self.process = None
        return Outcome(request["seed"], "fail", "crash", detail=f"the worker died (exit code "
                       f"{code}) at its program {self.done}; stderr ends with:\n"
                       f"{self._stderr_tail()}", stats={"process": [self.process_id, self.done]})

    def overdue(self) -> bool:
        return self.current is not None and \
            time.monotonic() - self.started > self.options.timeout + 60

    def kill(self) -> Outcome:
        request, self.current = self.current, None
        self.process.kill()
        self.process.wait()
        self.process = None
        return Outcome(request["seed"], "fail", "timeout",
                       detail=f"the worker did not answer in {self.options.timeout + 60:.0f} s")

    def stop(self) -> None:
        if self.process is not None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
            self.process = None

    def _stderr_tail(self) -> str:
        self.stderr.flush()
        self.stderr.seek(0)
        return "".join(self.stderr.read().splitlines(keepends=True)[-15:])

    def run(self, request: dict) -> Outcome:
        """Send one request and wait for its outcome (used by the minimizer)."""
        self.send(request)
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        while not selector.select(timeout=5):
            if self.overdue():
                selector.close()
                return self.kill()
        selector.close()
        return self.receive()


def run_seeds(seeds: Iterable[int], options: Options,
              on_outcome: Callable[[Outcome], None]) -> None:
    """Run `seeds` on `options.jobs` workers, calling `on_outcome` as each program ends."""
    pending = collections.deque(seeds)
    workers = [Worker(options) for _ in range(max(1, options.jobs))]
    selector = selectors.DefaultSelector()
    try:
        busy = 0
        for worker in workers:
            if pending:
                worker.send({"seed": pending.popleft()})
                selector.register(worker.process.stdout, selectors.EVENT_READ, worker)
                busy += 1
        while busy:
            for key, _ in selector.select(timeout=5):
                worker = key.data
                selector.unregister(key.fileobj)
                on_outcome(worker.receive())
                busy -= 1
                if pending:
                    worker.send({"seed": pending.popleft()})
                    selector.register(worker.process.stdout, selectors.EVENT_READ, worker)
                    busy += 1
            for worker in workers:
                if worker.overdue():
                    selector.unregister(worker.process.stdout)
                    on_outcome(worker.kill())
                    busy -= 1
                    if pending:
                        worker.send({"seed": pending.popleft()})
                        selector.register(worker.process.stdout, selectors.EVENT_READ, worker)
                        busy += 1
    finally:
        selector.close()
        for worker in workers:
            worker.stop()


# -- the log --------------------------------------------------------------------------------------
def read_log(path: str, options: Options) -> dict:
    """seed -> outcome dict of earlier runs with the same options."""
    found = {}
    if not path or not os.path.exists(path):
        return found
    key = options.key()
    with open(path) as log:
        for line in log:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("options") == key:
                found[entry["seed"]] = entry
    return found


def append_log(path: str, options: Options, outcome: Outcome) -> None:
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    entry = outcome.to_json()
    entry["options"] = options.key()
    entry["python"] = sys.version.split()[0]
    entry["time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    with open(path, "a") as log:
        log.write(json.dumps(entry) + "\n")


# -- the summary ----------------------------------------------------------------------------------
@dataclasses.dataclass
class Summary:
    backend: str
    outcomes: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def add(self, outcome) -> None:
        self.outcomes.append(outcome if isinstance(outcome, dict) else outcome.to_json())

    def failures(self) -> list:
        return [o for o in self.outcomes if o["status"] == "fail"]

    def invalid(self) -> list:
        return [o for o in self.outcomes if o["status"] == "invalid"]

    def by_kind(self) -> dict:
        kinds = collections.defaultdict(list)
        for outcome in self.failures():
            kinds[outcome["kind"]].append(outcome["seed"])
        return dict(sorted(kinds.items()))

    def text(self) -> str:
        total = len(self.outcomes)
        passed = sum(1 for o in self.outcomes if o["status"] == "pass")
        lines = [f"backend {self.backend}: {total} programs, {passed} passed, "
                 f"{len(self.failures())} failed, {len(self.invalid())} invalid "
                 f"({self.seconds:.0f} s wall, {_rate(total, self.seconds)})"]
        for kind, seeds in self.by_kind().items():
            lines.append(f"  {kind:15} {len(seeds):5}   first seeds {sorted(seeds)[:8]}")
        if self.invalid():
            lines.append(f"  invalid programs (a fuzzer bug): seeds "
                         f"{sorted(o['seed'] for o in self.invalid())[:8]}")
        stats = [o.get("stats", {}) for o in self.outcomes]
        with_breaks = sum(1 for s in stats if s.get("breaks"))
        lines.append(f"  graph breaks in {with_breaks}/{total} programs, "
                     f"{sum(s.get('breaks', 0) for s in stats)} in all; frames run eagerly "
                     f"after a compile failure: {sum(s.get('fallbacks', 0) for s in stats)}; "
                     f"programs where eager raised: "
                     f"{sum(1 for s in stats if s.get('eager_raised'))}; errors out of a "
                     f"compiled graph reported at the compiled function (by design): "
                     f"{sum(1 for s in stats if s.get('graph_frames'))}; stale views "
                     f"written in place (by design, P17): "
                     f"{sum(1 for s in stats if s.get('stale_view'))}")
        calls, graphs = (sum(s.get(key, 0) for s in stats) for key in ("calls", "graphs"))
        raised = sum(s.get("eager_raised", 0) for s in stats)
        lines.append(f"  calls {calls}, eager raised in {raised}; graphs compiled {graphs} "
                     f"({_per(graphs, total)} a program)")
        inductor = collections.Counter()
        for s in stats:
            inductor.update(s.get("inductor_fallbacks", {}))
        if inductor:
            lines.append("  inductor fallbacks by kind (graphs): " +
                         ", ".join(f"{kind} {count}" for kind, count in sorted(inductor.items())))
        reasons = collections.Counter()
        for s in stats:
            reasons.update(s.get("fallback_reasons", {}))
        for reason, count in reasons.most_common(5):
            lines.append(f"    fallback x{count}: {reason}")
        return "\n".join(lines)


def _per(count: int, total: int) -> str:
    return f"{count / total:.1f}" if total else "-"


def _rate(count: int, seconds: float) -> str:
    return f"{count * 3600 / seconds:.0f} programs/hour" if seconds else "-"


def minimize_outcome(outcome: Outcome, options: Options, max_trials: int = 300,
                     max_seconds: float = 600.0, log=print):
    """(minimized program, its last outcome) for a failing seed, trials run in a worker."""
    from tests.fuzz.minimize import Minimizer
    program = generate(outcome.seed, options.settings())
    worker = Worker(dataclasses.replace(options, jobs=1))
    try:
        def trial(candidate):
            return worker.run({"seed": candidate.seed, "source": candidate.source()})
        minimizer = Minimizer(program, outcome, trial, max_trials, max_seconds, log)
        smallest = minimizer.run()
        return smallest, minimizer.last, minimizer.trials
    finally:
        worker.stop()
