"""Transcendental-heavy C++ kernels: eager, libmvec (before) and MKL VML (now), one process.

Input: nothing (or `--trials N`, `--threads N`). Output: a markdown table of microseconds per
call and the ratio of the VML kernels (eager's bits, `inductor/vml.py`) to the libmvec ones.
"Before" compiles the same graphs with the user's ops left unmarked (`inductor.vml._marked`
patched to refuse), which is the code generator's path before VML: plain `expf` and friends.

Run: `PYTHONPATH=. python -m benchmarks.inductor.vml`.
"""
from __future__ import annotations

import argparse

from benchmarks.timing import fresh_caches, interleaved, load_average

CACHE_ROOT = fresh_caches()

import torch  # noqa: E402  (after the cache directories are set)

import inductor  # noqa: E402
import inductor.vml  # noqa: E402


def exp_only(x):
    return torch.exp(x)


def cos_fused(x):
    return torch.cos(x * 2 + 1)


def log_fused(x):
    return torch.log(x.abs() + 1)


def mixed(x):
    return torch.exp(torch.cos(x)) + torch.log(x.abs() + 1) * torch.tanh(x)


def sin_short(x):
    return torch.sin(x) * 2


CASES = [(function, dtype, size) for function in (exp_only, cos_fused, log_fused, mixed)
         for dtype in (torch.float32, torch.float64) for size in (1 << 20,)]
CASES += [(sin_short, torch.float32, 70), (exp_only, torch.float32, 4096)]


def compiled(function, x, marked: bool):
    real = inductor.vml._marked
    if not marked:
        inductor.vml._marked = lambda value, name: False
    try:
        return inductor.compile_fx(torch.fx.symbolic_trace(function), [x])
    finally:
        inductor.vml._marked = real


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=11)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    inductor.config.update(fallback_on_error=False, cpu_backend="cpp")
    print(f"threads {args.threads}, load {load_average()}, caches {CACHE_ROOT}")
    print("| kernel | dtype | elements | eager us | libmvec us | VML us | VML / libmvec |")
    print("|---|---|---|---|---|---|---|")
    for function, dtype, size in CASES:
        x = torch.randn(size, dtype=dtype, generator=torch.Generator().manual_seed(0)) * 3
        before, after = compiled(function, x, False), compiled(function, x, True)
        times = interleaved({"eager": lambda: function(x), "libmvec": lambda: before(x),
                             "vml": lambda: after(x)}, trials=args.trials)
        eager, libmvec, vml = (times[name][2] * 1e6 for name in ("eager", "libmvec", "vml"))
        print(f"| {function.__name__} | {str(dtype)[6:]} | {size} | {eager:.1f} | "
              f"{libmvec:.1f} | {vml:.1f} | {vml / libmvec:.2f} |")


if __name__ == "__main__":
    main()
