"""Command line of the dynamic-shapes benchmarks: `python -m benchmarks.dynamic`.

Input: the device, `--quick` and narrowing options. Output: under `--out-dir`
(`benchmarks/results/` by default) `dynamic-<device>[-quick].json` (everything measured, the
environment, the criteria of issue 23), `.md` (the same as tables) and `.png` (per-call time
against size; skipped with a notice without matplotlib); a progress line per size on stdout.

    PYTHONPATH=. .venv/bin/python -m benchmarks.dynamic --quick            # CPU, ~15 min here
    PYTHONPATH=. .venv/bin/python -m benchmarks.dynamic                    # CPU, full: hours
    PYTHONPATH=. python -m benchmarks.dynamic --device cuda                # the H100
    ... --parts sweep --subjects function,mlp --sizes 2,5 --variants eager,framejit-auto

Full run: the sweep's four subjects at 20 batch sizes (2..256) under six variants, decoding
256 new tokens with the minimal GPT-2 and the zoo's GPT-2 and Llama, BERT at 16 lengths
(8..512). `--quick`: the function and the MLP at batch sizes 2, 5, 16; the minimal GPT-2 for
24 tokens; BERT at lengths 8, 24, 64; fewer timing trials. Caches start empty (`benchmarks.
timing.fresh_caches`), so compile times are cold. On the CPU one thread by default (as the
zoo: this VM is shared; `--threads 0` keeps torch's choice).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from benchmarks.timing import fresh_caches

REPOSITORY = Path(__file__).resolve().parents[2]
PARTS = ("sweep", "decode", "bert")


def _list(text: str, kind=str) -> list:
    return [kind(item) for item in text.split(",") if item]


def parse(arguments: list) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dynamic",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--quick", action="store_true", help="CI-smoke sized run")
    parser.add_argument("--parts", type=_list, default=list(PARTS))
    parser.add_argument("--subjects", type=_list, help="sweep subjects")
    parser.add_argument("--sizes", type=lambda text: _list(text, int), help="batch sizes")
    parser.add_argument("--variants", type=_list, help="sweep variants")
    parser.add_argument("--decoders", type=_list)
    parser.add_argument("--tokens", type=int, help="new tokens per generation")
    parser.add_argument("--decode-variants", type=_list)
    parser.add_argument("--bert-entry", help="zoo entry (default: bert, bert-base on cuda)")
    parser.add_argument("--lengths", type=lambda text: _list(text, int))
    parser.add_argument("--bert-variants", type=_list)
    parser.add_argument("--trials", type=int, help="interleaved timing trials per size")
    parser.add_argument("--repeats", type=int, help="warm generations per decode variant")
    parser.add_argument("--threads", type=int, help="torch threads (CPU default 1; 0: keep)")
    parser.add_argument("--out-dir", type=Path, default=REPOSITORY / "benchmarks" / "results")
    parser.add_argument("--name", help="file stem (default dynamic-<device>[-quick])")
    options = parser.parse_args(arguments)
    unknown = sorted(set(options.parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts {unknown}; known: {', '.join(PARTS)}")
    return options


def _product_tree() -> str:
    """Whether the product's packages differ from the commit measured (several engineers
    share one checkout: a run measures the working tree)."""
    import subprocess
    try:
        changed = subprocess.run(["git", "status", "--porcelain", "--", "dynamo", "guards",
                                  "inductor"], cwd=REPOSITORY, capture_output=True,
                                 text=True, timeout=30).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    changed = [line for line in changed if line.strip()]
    return f"{len(changed)} uncommitted file(s) in dynamo/ guards/ inductor/" if changed \
        else "clean"


def _frameworks(options: argparse.Namespace) -> set:
    """The compilers the requested parts use (defaults included)."""
    from benchmarks.dynamic import bert, decode, sweep
    chosen = {"sweep": options.variants or sweep.SWEEP_VARIANTS,
              "decode": options.decode_variants or decode.DECODE_VARIANTS,
              "bert": options.bert_variants or bert.BERT_VARIANTS}
    return {name.rpartition("-")[0] or name for part in options.parts
            for name in chosen[part]}


def run(options: argparse.Namespace, arguments: list) -> dict:
    """Every requested part; the JSON-ready result."""
    # Imported here, after `fresh_caches()` pointed both compilers at empty caches.
    import torch
    from benchmarks.dynamic import bert, decode, subjects, sweep, variants
    from benchmarks.zoo import machine
    threads = options.threads if options.threads is not None else (
        1 if options.device == "cpu" else 0)
    if threads:
        torch.set_num_threads(threads)
    quick = options.quick
    trials = options.trials or (5 if quick else 7)
    result = {"device": options.device, "quick": quick, "arguments": arguments,
              "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "env": machine.describe(options.device), "product_tree": _product_tree()}
    started = time.perf_counter()
    result["warm_up_seconds"] = variants.warm_up(_frameworks(options), options.device)
    if "sweep" in options.parts:
        names = options.subjects or (["function", "mlp"] if quick
                                     else list(subjects.SWEEP_SUBJECTS))
        sizes = options.sizes or list(sweep.QUICK_BATCH_SIZES if quick else sweep.BATCH_SIZES)
        result["sweep"] = sweep.run_sweep(names, sizes, options.variants
                                          or list(sweep.SWEEP_VARIANTS), options.device, trials)
    if "decode" in options.parts:
        names = options.decoders or (["minimal-gpt2"] if quick else list(decode.DECODERS))
        tokens = options.tokens or (decode.QUICK_NEW_TOKENS if quick else decode.NEW_TOKENS)
        result["decode"] = decode.run_decode(
            names, options.decode_variants or list(decode.DECODE_VARIANTS), tokens,
            options.device, options.repeats or 3)
    if "bert" in options.parts:
        entry = options.bert_entry or ("bert-base" if options.device == "cuda" else "bert")
        lengths = options.lengths or list(bert.QUICK_LENGTHS if quick else bert.LENGTHS)
        result["bert"] = bert.run_bert(entry, lengths, options.bert_variants
                                       or list(bert.BERT_VARIANTS), options.device, trials)
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def write(result: dict, options: argparse.Namespace) -> Path:
    """The JSON, markdown and PNG files; returns the JSON's path."""
    from benchmarks.dynamic import report
    stem = options.name or f"dynamic-{options.device}{'-quick' if options.quick else ''}"
    options.out_dir.mkdir(parents=True, exist_ok=True)
    result["criteria"] = report.criteria(result)
    path = options.out_dir / f"{stem}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    (options.out_dir / f"{stem}.md").write_text(report.markdown(result))
    report.plot(result, options.out_dir / f"{stem}.png")
    return path


def main(arguments: list) -> int:
    options = parse(arguments)
    from benchmarks.zoo import runner  # imports torch, not yet a compiler's cache settings
    # framejit's native helpers are built once per torch version, like an installed
    # extension (the zoo's runner does the same): kept out of the fresh caches.
    os.environ.setdefault("JIT_NATIVE_CACHE_DIR", runner.native_cache())
    fresh_caches()
    runner.prepare_native()
    result = run(options, arguments)
    path = write(result, options)
    print(f"wrote {path} and its .md" + (" and .png" if path.with_suffix(".png").exists()
                                         else ""))
    for name, found in result["criteria"].items():
        print(f"  {name}: {found['met']} ({found['detail']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
