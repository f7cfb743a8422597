"""Command line of the zoo: `python -m benchmarks.zoo {list,run,report}`.

Input: a suite name and options. Output: rows appended to a JSON-lines file (`run`), the
model list (`list`), or `docs/benchmarks.md` with PNG plots (`report`).

    python -m benchmarks.zoo run --suite cpu --threads 1       # resumable; JSON lines
    python -m benchmarks.zoo report                            # docs/benchmarks.md + plots
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from benchmarks.zoo import catalog, compilers
from benchmarks.zoo.runner import REPOSITORY, pending, run_jobs
from benchmarks.zoo.worker import Job

RESULTS = REPOSITORY / "benchmarks" / "results"

# Per suite: what a plain `run --suite NAME` measures; every flag overrides its entry. The GPU
# suite leaves out eager (timed inside every job anyway) and torch.compile-eager to fit the
# device time.
SUITE_DEFAULTS = {
    "cpu": dict(device="cpu", dtype="float32", amp=None, batch=1, trials=7, trial_seconds=0.3,
                timeout=900, compilers=list(compilers.COMPILERS),
                output=RESULTS / "cpu.jsonl"),
    "gpu": dict(device="cuda", dtype="bfloat16", amp="bfloat16", batch=16, trials=10,
                trial_seconds=0.1, timeout=420,
                compilers=["framejit", "framejit-eager", "torch.compile"],
                output=RESULTS / "gpu.jsonl"),
}
SUITE_DEFAULTS["gpu-zoo"] = SUITE_DEFAULTS["gpu"]   # the complete GPU zoo: the same jobs' kind


def build_jobs(options: argparse.Namespace) -> list[Job]:
    """The jobs of `options.suite`, filtered by `--models`/`--modes`, one per compiler."""
    pairs = catalog.suite(options.suite)
    if options.models:
        wanted = options.models.split(",")
        for name in wanted:
            catalog.spec(name)  # unknown names fail here, listing the known ones
        pairs = [(model, mode) for model, mode in pairs if model in wanted]
    if options.modes:
        pairs = [(model, mode) for model, mode in pairs if mode in options.modes.split(",")]
    jobs = []
    for model, mode in pairs:
        training = mode == "training"
        # AMP training, and models that cannot be cast (catalog `casts`): float32 weights
        # under autocast to the suite's half dtype
        autocast = options.amp if training else None
        if not catalog.spec(model).casts and options.dtype != "float32":
            autocast = options.amp or options.dtype
        for compiler in options.compilers:
            jobs.append(Job(
                model=model, mode=mode, compiler=compiler, device=options.device,
                dtype="float32" if autocast else options.dtype,
                amp=autocast, batch=options.batch,
                compile_mode=options.compile_mode, trials=options.trials,
                warmup=options.warmup, trial_seconds=options.trial_seconds,
                threads=options.threads, suite=options.suite, note=options.note))
    return jobs


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.zoo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="print the zoo's models and suites")
    run = commands.add_parser("run", help="run a suite (resumable), appending JSON lines")
    run.add_argument("--suite", default="cpu", choices=catalog.SUITES)
    run.add_argument("--models", help="comma-separated subset of the suite's models")
    run.add_argument("--modes", help="inference, training or both (comma-separated)")
    run.add_argument("--compilers", type=lambda text: text.split(","),
                     help=f"comma-separated, from {','.join(compilers.COMPILERS)}")
    run.add_argument("--device", help="cpu or cuda")
    run.add_argument("--dtype", help="inference dtype: float32, bfloat16, float16")
    run.add_argument("--amp", help="training autocast dtype (e.g. bfloat16); 'none' for off")
    run.add_argument("--batch", type=int)
    run.add_argument("--compile-mode", help="passed to both compilers (e.g. reduce-overhead)")
    run.add_argument("--trials", type=int, help="interleaved timing trials per compiler")
    run.add_argument("--warmup", type=int, default=2)
    run.add_argument("--trial-seconds", type=float,
                     help="approximate length of one timing trial")
    run.add_argument("--threads", type=int, help="torch/OpenMP threads per job")
    run.add_argument("--timeout", type=float, help="seconds per job")
    run.add_argument("--budget", type=float, help="stop starting jobs after this many seconds")
    run.add_argument("--retry", default="", help="statuses to run again (e.g. timeout,crash)")
    run.add_argument("--again", action="store_true",
                     help="run the selected jobs even if they have rows (the newest row wins in "
                          "the report), e.g. framejit's after the product changed")
    run.add_argument("--note", default="", help="free text shown in the report")
    run.add_argument("--output", type=Path)
    run.add_argument("--dry-run", action="store_true", help="list the jobs left, run nothing")
    report = commands.add_parser("report", help="render docs/benchmarks.md and PNG plots")
    report.add_argument("results", nargs="*", type=Path,
                        help="JSON-lines files (default: benchmarks/results/*.jsonl)")
    report.add_argument("--output", type=Path, default=REPOSITORY / "docs" / "benchmarks.md")
    return parser


def _apply_defaults(options: argparse.Namespace) -> None:
    defaults = SUITE_DEFAULTS.get(options.suite, SUITE_DEFAULTS["cpu"])
    for name, value in defaults.items():
        if getattr(options, name, None) is None:
            setattr(options, name, value)
    if not options.suite.startswith(("cpu", "gpu")) and options.output == defaults["output"]:
        options.output = RESULTS / f"{options.suite}.jsonl"
    if isinstance(options.amp, str) and options.amp.lower() == "none":
        options.amp = None


def main(argv: list[str]) -> int:
    options = _parser().parse_args(argv)
    if options.command == "list":
        for name in catalog.names():
            entry = catalog.spec(name)
            print(f"{name:22} {entry.family:13} {entry.description}")
        for name in catalog.SUITES:
            print(f"suite {name}: {len(catalog.suite(name))} (model, mode) pairs")
        others = [name for name in catalog.names(None) if name not in catalog.names()]
        print(f"\nstage benchmarks' entries (in no suite; benchmarks/zoo/variants.py): "
              f"{len(others)}")
        for name in others:
            entry = catalog.spec(name)
            print(f"{name:30} {entry.family:13} {entry.description}")
        return 0
    if options.command == "report":
        from benchmarks.zoo import report
        files = options.results or sorted(RESULTS.glob("*.jsonl"))
        report.write(files, options.output)
        print(f"wrote {options.output}")
        return 0
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    _apply_defaults(options)
    unknown = [name for name in options.compilers if name not in compilers.COMPILERS]
    if unknown:
        raise SystemExit(f"unknown compilers {unknown}; known: {', '.join(compilers.COMPILERS)}")
    jobs = build_jobs(options)
    retry = [status for status in options.retry.split(",") if status]
    if options.again:
        retry = None  # every status
    if options.dry_run:
        todo, skipped = pending(jobs, options.output, retry)
        for job in todo:
            print(f"{job.model} {job.mode} {job.compiler} ({job.device}, {job.dtype}"
                  f"{', amp ' + job.amp if job.amp else ''}, batch {job.batch})")
        print(f"{len(todo)} jobs left, {skipped} already in {options.output}")
        return 0
    outcome = run_jobs(jobs, options.output, options.timeout, options.budget, retry=retry,
                       progress=lambda line: print(line, flush=True))
    return 0 if outcome.left == 0 else 3


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
