"""`python -m tests.fuzz.graphs`: the random FX-graph fuzzer for inductor, from the command line.

    python -m tests.fuzz.graphs --count 500 --seed 0 --cpu-backend cpp --jobs 2 --minimize

Checks seeds S .. S+N-1 (`--seed S --count 1` reproduces one; `--seeds 17,40` those), prints
a summary per failure signature, with `--minimize` writes one minimized repro script per
signature (into `--repro-dir`), and exits non-zero when any graph failed. `--resume` skips
the seeds `--log` already holds for this backend and device and counts their logged results
in the summary (a stopped campaign goes on where it stopped).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

from tests.fuzz.graphs.driver import default_cache_dir, minimize_failure, run_campaign
from tests.fuzz.graphs.generator import generate


def parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.graphs",
                                     description="random FX graphs: inductor vs eager")
    parser.add_argument("--count", type=int, default=100, help="graphs to check")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", default="", help="comma-separated seeds (instead of "
                        "--seed/--count)")
    parser.add_argument("--cpu-backend", choices=("cpp", "triton"), default="cpp",
                        help="code generator for CPU tensors (triton: Triton's interpreter)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--minimize", action="store_true",
                        help="shrink the first failing graph of each signature")
    parser.add_argument("--repro-dir", default=None,
                        help="where minimized repro scripts go (default: print them)")
    parser.add_argument("--log", default=None, help="append one JSON line per graph here")
    parser.add_argument("--resume", action="store_true",
                        help="skip the seeds --log already holds; count them in the summary")
    parser.add_argument("--cache-dir", default=None, help="kernel cache (default: "
                        "$JIT_CACHE_DIR or /tmp/jitcache-graph-fuzzer)")
    parser.add_argument("--budget", type=int, default=300,
                        help="checks the minimizer may spend per failure")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    options = parse(argv)
    warnings.simplefilter("ignore")  # eager's own warnings while minimizing
    cache_dir = options.cache_dir or default_cache_dir()
    seeds = [int(seed) for seed in options.seeds.split(",")] if options.seeds else \
        range(options.seed, options.seed + options.count)
    label = f"{options.device}, {options.cpu_backend if options.device == 'cpu' else 'triton'}" \
        + (f", {len(seeds)} listed seeds ({min(seeds)}..{max(seeds)})" if options.seeds else
           f", seeds {options.seed}..{options.seed + options.count - 1}")
    logged = _logged(options.log, options.cpu_backend, options.device) if options.resume \
        else {}
    campaign, failing = run_campaign([seed for seed in seeds if seed not in logged],
                                     options.cpu_backend, options.device, options.jobs,
                                     cache_dir, options.log)
    for seed in (seed for seed in seeds if seed in logged):
        campaign.add(logged[seed])
        if logged[seed]["failures"]:
            failing[seed] = (generate(seed, options.device),
                             [tuple(failure) for failure in logged[seed]["failures"]])
    print(campaign.summary(label + (f", {len(logged)} of them from the log" if logged else "")))
    if options.minimize and failing:
        _minimize_all(campaign, failing, options, cache_dir)
    return 1 if campaign.failing_graphs else 0


def _logged(path, backend: str, device: str) -> dict:
    """The results `path` already holds for this backend and device, by seed."""
    if not path:
        raise SystemExit("--resume needs --log")
    found: dict = {}
    if os.path.exists(path):
        with open(path) as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:      # a line cut short when a run was stopped
                    continue
                if entry.get("backend") == backend and entry.get("device") == device:
                    found[entry["seed"]] = entry
    return found


def _minimize_all(campaign, failing: dict, options, cache_dir: str) -> None:
    for signature in campaign.signatures:
        seed = campaign.seeds[signature][0]
        program, failures = failing[seed]
        if program is None:
            print(f"{signature}: seed {seed} has no program to minimize")
            continue
        small = minimize_failure(program, seed, signature, options.cpu_backend,
                                 options.device, cache_dir, options.budget)
        example = next(f"{kind} [{call}]: {detail}" for kind, detail, call, found in failures
                       if found == signature)
        note = (f"graph fuzzer repro: {signature}\nseed {seed}, --cpu-backend "
                f"{options.cpu_backend}, --device {options.device}\n{example}")
        script = small.script(seed, note, options.cpu_backend)
        if options.repro_dir:
            os.makedirs(options.repro_dir, exist_ok=True)
            name = "".join(ch if ch.isalnum() else "_" for ch in signature)[:60]
            path = os.path.join(options.repro_dir, f"{name}_{seed}.py")
            with open(path, "w") as handle:
                handle.write(script)
            print(f"{signature}: seed {seed} -> {len(small.stmts)} statements, {path}")
        else:
            print(f"\n# ---- {signature} (seed {seed}, {len(small.stmts)} statements)\n"
                  f"{script}")


if __name__ == "__main__":
    sys.exit(main())
