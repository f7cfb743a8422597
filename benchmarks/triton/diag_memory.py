"""Peak GPU memory of one compiled zoo model call (bf16 inference, batch 16) with parts of
the compiler switched off, each variant in a fresh process, to find what holds memory.

A diagnostic, not a benchmark:
    python -m benchmarks.triton.diag_memory --models bert-base
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

import torch

VARIANTS = ("all", "no-cse", "no-fake-layouts", "no-convolution-lowering")


def _switch_off(variant: str) -> None:
    import inductor
    if variant == "no-cse":
        from inductor.lower import common_subexpressions
        common_subexpressions.eliminate_common_subexpressions = lambda gm: 0
    elif variant == "no-fake-layouts":
        from inductor.lower import extern
        extern._example_for_inputs = lambda kernel, arguments, inputs, example: example
    elif variant == "no-convolution-lowering":
        inductor.config.convolutions_without_library = False


def _peak_mb(call, warmup: int) -> float:
    """Memory a call allocates at its peak beyond what is allocated before it, in MiB."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    call()
    return round((torch.cuda.max_memory_allocated() - base) / 2**20, 1)


def measure(name: str, variant: str) -> dict:
    import dynamo
    from benchmarks.zoo.catalog import build_workload
    _switch_off(variant)
    workload = build_workload(name, "cuda", torch.bfloat16, batch=16)
    model, args, kwargs = workload.model, workload.args, workload.kwargs
    compiled = dynamo.jit(model)
    with torch.no_grad():
        eager = _peak_mb(lambda: model(*args, **kwargs), warmup=1)
        ours = _peak_mb(lambda: compiled(*args, **kwargs), warmup=3)
    return {"model": name, "variant": variant, "eager_mb": eager, "framejit_mb": ours}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="bert-base")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "VARIANT"))
    options = parser.parse_args(argv)
    if options.one:
        print(json.dumps(measure(*options.one)), flush=True)
        return
    for name in options.models.split(","):
        for variant in options.variants.split(","):
            subprocess.run([sys.executable, "-m", "benchmarks.triton.diag_memory", "--one",
                            name, variant], check=False)


if __name__ == "__main__":
    main()
