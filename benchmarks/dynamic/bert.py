"""Stage "bert": BERT over sequence lengths 8..512, issue 23 part (3).

Input: the zoo entry (`bert`, the small BertForMaskedLM, on the CPU; `bert-base` on a GPU),
the lengths (16 by default, called in increasing order), the variants, the device and the
trials. Output: a JSON-ready dict: per variant its compiles and recompile reasons, compile
time, per-call time per length and whether every call matched eager
(`sizes.measure_sizes`), plus per-call ratios over eager. Skipped with a notice when
transformers is not installed.
"""
from __future__ import annotations

import time
from typing import Callable

from benchmarks.dynamic import subjects
from benchmarks.dynamic.sizes import measure_sizes
from benchmarks.dynamic.sweep import ratios

LENGTHS = (8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 448, 480, 512)
QUICK_LENGTHS = (8, 24, 64)
BERT_VARIANTS = ("eager", "framejit-auto", "torch.compile-auto")


def run_bert(entry: str, lengths: list, variant_names: list, device: str, trials: int,
             progress: Callable[[str], None] = print) -> dict:
    """BERT entry `entry` at every length in `lengths`, in order."""
    missing = subjects.missing_dependency(entry)
    if missing:
        progress(f"bert: skipped: {missing} is not installed")
        return {"subject": entry, "skipped": f"{missing} is not installed"}
    started = time.perf_counter()
    subject = subjects.bert_subject(entry, device)
    progress(f"bert: {subject.description}, lengths {list(lengths)}")
    variants = measure_sizes(subject, list(variant_names), list(lengths), device, trials,
                             progress)
    return {"subject": entry, "description": subject.description, "sizes": list(lengths),
            "variants": variants, "ratios": ratios(variants),
            "seconds": round(time.perf_counter() - started, 1)}
