"""`python -m tests.fuzz`: the differential program fuzzer's command line.

Stage: the entry point. Input: command-line options. Output: a summary on stdout (programs run,
passed, failures by kind with their first seeds), results appended to `--log`, minimized
repros under `--repro-dir`; exit status 1 if any program failed.

    python -m tests.fuzz --count 500 --backend eager --jobs 2
    python -m tests.fuzz --count 20000 --backend inductor --jobs 2 --seed 0 \\
        --log /work/scratch/fuzz/inductor.jsonl --resume      # chunked, resumable
    python -m tests.fuzz --show 17                            # print seed 17's program
    python -m tests.fuzz --seeds 17,40 --minimize --repro-dir /tmp/repros
    python -m tests.fuzz --count 300 --backend inductor --dynamic true   # sizes change per call
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import signal
import sys
import time

from tests.fuzz import grammar
from tests.fuzz.campaign import (Options, Summary, append_log, minimize_outcome, read_log,
                                 run_seeds)
from tests.fuzz.generator import generate
from tests.fuzz.tree import PREAMBLE


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100, help="programs to run")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", default="", help="comma-separated seeds (instead of "
                        "--seed/--count)")
    parser.add_argument("--backend", default="eager", help="eager, inductor, torch.compile "
                        "(its inductor) or torch.compile:eager")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--only", action="append", default=[], metavar="CATEGORY",
                        help="keep only these construct categories (repeatable)")
    parser.add_argument("--exclude", action="append", default=[], metavar="CATEGORY",
                        help="switch a construct category off (repeatable)")
    parser.add_argument("--weight", action="append", default=[], metavar="CATEGORY=W",
                        help="multiply a category's weights")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per program (default 60 eager, 300 inductor)")
    parser.add_argument("--no-backward", action="store_true",
                        help="do not compare gradients of backward() through the results")
    parser.add_argument("--strict-frames", action="store_true",
                        help="compare tracebacks exactly, also for errors raised while a "
                        "compiled graph runs (a documented difference)")
    parser.add_argument("--dynamic", default="off", choices=["off", "auto", "true", "false"],
                        help="off: today's calls and jit's default; auto/true/false: every "
                        "call changes the batch size (1, primes, up to 64) and the function is "
                        "jitted with dynamic=None/True/False")
    parser.add_argument("--log", default="", help="append one JSON line per program here")
    parser.add_argument("--resume", action="store_true",
                        help="skip seeds the log already holds for the same options")
    parser.add_argument("--minimize", action="store_true",
                        help="shrink the first failing seed of each kind to a repro")
    parser.add_argument("--minimize-trials", type=int, default=300)
    parser.add_argument("--repro-dir", default="", help="write minimized repros here")
    parser.add_argument("--show", type=int, default=None, help="print a seed's program")
    parser.add_argument("--categories", action="store_true", help="list the categories")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def options_from(args) -> Options:
    timeout = args.timeout or (60.0 if args.backend in ("eager", "torch.compile:eager")
                               else 300.0)
    return Options(args.backend, tuple(args.only), tuple(args.exclude), tuple(args.weight),
                   timeout, not args.no_backward, args.jobs, args.strict_frames, args.dynamic)


WARM_UP = PREAMBLE + """
def fn(x):
    return x.sin() + 1

CALLS = 1

def inputs(call):
    return (_t(1, 3),)
"""


def worker(options: Options) -> None:
    """Answer requests from the parent: {"seed": s} or {"seed": s, "source": text}."""
    from tests.fuzz.execution import run_source
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout = open(os.devnull, "w")  # stray prints (finalizers) stay out of the protocol
    settings = options.settings()
    with contextlib.redirect_stdout(io.StringIO()):  # one-time builds outside the timeout
        run_source(WARM_UP, options.backend, -1, 0, options.backward, options.strict_frames,
                   options.dynamic)
    done = 0
    for line in sys.stdin:
        request = json.loads(line)
        seed = request["seed"]
        source = request.get("source") or generate(seed, settings).source()
        with contextlib.redirect_stdout(io.StringIO()):
            outcome = run_source(source, options.backend, seed, options.timeout,
                                 options.backward, options.strict_frames, options.dynamic)
        done += 1  # where in this process it ran: crashes may depend on earlier programs
        outcome.stats["process"] = [os.getpid(), done]
        protocol.write(json.dumps(outcome.to_json()) + "\n")


def _exit_on_term(signum, frame):
    raise SystemExit(128 + signum)  # unwinds through run_seeds, which stops the workers


def main(argv=None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_term)
    args = parse(argv)
    options = options_from(args)
    if args.worker:
        worker(options)
        return 0
    if args.categories:
        for name, text in grammar.CATEGORIES.items():
            print(f"{name:14} {text}")
        return 0
    if args.show is not None:
        print(generate(args.show, options.settings()).source())
        return 0
    seeds = [int(s) for s in args.seeds.split(",") if s] or \
        list(range(args.seed, args.seed + args.count))
    summary = Summary(options.backend if options.dynamic == "off"
                      else f"{options.backend} --dynamic {options.dynamic}")
    if args.resume:
        done = read_log(args.log, options)
        for seed in seeds:
            if seed in done:
                summary.add(done[seed])
        seeds = [seed for seed in seeds if seed not in done]
    started = time.monotonic()
    progress = Progress(len(seeds))

    def record(outcome):
        summary.add(outcome)
        append_log(args.log, options, outcome)
        progress.tick(outcome)

    run_seeds(seeds, options, record)
    summary.seconds = time.monotonic() - started
    print(summary.text())
    if args.minimize:
        minimize_all(summary, options, args)
    return 1 if summary.failures() else 0


class Progress:
    """A line every 5% on stderr, and each failure as it happens."""

    def __init__(self, total: int):
        self.total, self.count, self.step = total, 0, max(1, total // 20)

    def tick(self, outcome) -> None:
        self.count += 1
        if outcome.status != "pass":
            print(f"seed {outcome.seed}: {outcome.status} {outcome.kind} "
                  f"{outcome.detail.splitlines()[0][:160] if outcome.detail else ''}",
                  file=sys.stderr, flush=True)
        if self.count % self.step == 0:
            print(f"... {self.count}/{self.total}", file=sys.stderr, flush=True)


def minimize_all(summary: Summary, options: Options, args) -> None:
    from tests.fuzz import repro
    from tests.fuzz.execution import Outcome
    for kind, seeds in summary.by_kind().items():
        first = next(o for o in summary.failures() if o["seed"] == min(seeds))
        outcome = Outcome(**{k: v for k, v in first.items()
                             if k in {f.name for f in dataclasses.fields(Outcome)}})
        print(f"\nminimizing seed {outcome.seed} ({kind}) ...", flush=True)
        program, last, trials = minimize_outcome(outcome, options, args.minimize_trials,
                                                 log=lambda text: None)
        script = repro.render(program, options.backend, last, dynamic=options.dynamic)
        print(f"{program.statement_count()} statements after {trials} trials:\n{script}")
        if args.repro_dir:
            os.makedirs(args.repro_dir, exist_ok=True)
            mode = "" if options.dynamic == "off" else f"dynamic-{options.dynamic}-"
            path = os.path.join(args.repro_dir,
                                f"{options.backend}-{mode}{kind}-{outcome.seed}.py")
            with open(path, "w") as out:
                out.write(script)
            print(f"written to {path}")


if __name__ == "__main__":
    sys.exit(main())
