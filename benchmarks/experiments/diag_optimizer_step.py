"""What does a compiled optimizer step cost next to eager's, per model of the whole-step benchmark?

The whole-step benchmark on an H200 (benchmarks/results/whole-step-cuda.md) was host-bound for
GPT-2 with the optimizer compiled. This times `optimizer.step()` alone, gradients set once:
eager (torch.optim's foreach kernels on CUDA), `dynamo.jit` of a function calling it, and
torch.compile of the same function (the anchor), with the kernels each compiled graph launches
per step (framejit's `GraphReport.kernel_count`), wall and calling-thread CPU milliseconds
(median of interleaved trials).

    python -m benchmarks.experiments.diag_optimizer_step [--device cuda] [--models gpt2,cnn,mlp]
        [--modes eager,jit,torch.compile]   (jit-uncombined: jit with combo_kernels off)
    python -m benchmarks.experiments.diag_optimizer_step --tiny [--repeat 200]

`--tiny`: on the CPU, GPT-2's 12 layers (148 params, AdamW) with every size tiny (width 16,
vocabulary 64), so the kernels cost next to nothing and the calling thread's CPU time is the
host cost of a step (the Python around the kernels), which is what made the H200 run
host-bound.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

import dynamo
import inductor
from benchmarks.training.whole_step import cases, make_optimizer


def _step(optimizer):
    optimizer.step()


def _step_uncombined(optimizer):
    """`_step` under another code object (compiled code is cached per code object)."""
    optimizer.step()


UNCOMBINED = "jit-uncombined"   # compiled with inductor.config.combo_kernels off


def _use_mode(mode: str) -> None:
    inductor.config.combo_kernels = mode != UNCOMBINED


def tiny_gpt2() -> torch.nn.Module:
    """GPT-2's 12 layers and 148 params with every size tiny (`--tiny`)."""
    import transformers
    config = transformers.GPT2Config(n_layer=12, n_embd=16, n_head=2, vocab_size=64,
                                     n_positions=32)
    return transformers.GPT2LMHeadModel(config)


def _time(call, device: str, repeat: int = 20) -> tuple[float, float]:
    """(wall ms, thread CPU ms) per call, median over `repeat` calls."""
    walls, cpus = [], []
    for _ in range(repeat):
        if device == "cuda":
            torch.cuda.synchronize()
        wall, cpu = time.perf_counter(), time.thread_time()
        call()
        if device == "cuda":
            torch.cuda.synchronize()
        walls.append((time.perf_counter() - wall) * 1e3)
        cpus.append((time.thread_time() - cpu) * 1e3)
    return statistics.median(walls), statistics.median(cpus)


def run(name, factory, optimizer_name: str, device: str,
        modes=("eager", "jit", "torch.compile"), repeat: int = 20) -> None:
    torch.manual_seed(0)
    model = factory().to(device)
    kernels = []
    original = inductor.runtime.compiled_graph.CompiledGraph.__init__

    def keep(self, run_, report):
        original(self, run_, report)
        kernels.append(report.kernel_count)
    inductor.runtime.compiled_graph.CompiledGraph.__init__ = keep
    runs = {}
    for mode in modes:
        copy_ = copy.deepcopy(model)
        optimizer = make_optimizer(optimizer_name, copy_.parameters())
        for param in copy_.parameters():
            param.grad = torch.randn_like(param) * 1e-3
        step = {"eager": _step, "jit": dynamo.jit(_step, backend="inductor"),
                UNCOMBINED: dynamo.jit(_step_uncombined, backend="inductor"),
                "torch.compile": torch.compile(_step)}[mode]
        _use_mode(mode)
        for _ in range(3):   # state made, then compiled with state
            step(optimizer)
        runs[mode] = (step, optimizer)
    inductor.runtime.compiled_graph.CompiledGraph.__init__ = original
    _use_mode("jit")
    params = sum(1 for _ in model.parameters())
    print(f"{name} ({optimizer_name}, {params} params): framejit graphs' kernels {kernels}"
          f" ({kernels[-1] / params:.2f} per param in the last)" if kernels else
          f"{name} ({optimizer_name}, {params} params)")
    for trial in range(3):
        for mode, (step, optimizer) in runs.items():
            _use_mode(mode)
            wall, cpu = _time(lambda: step(optimizer), device, repeat)
            print(f"  trial {trial} {mode:14s} wall {wall:7.3f} ms  thread CPU {cpu:7.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", default="gpt2,cnn,mlp")
    parser.add_argument("--modes", default="eager,jit,torch.compile")
    parser.add_argument("--tiny", action="store_true",
                        help="GPT-2's 148 params with tiny sizes on the CPU: host cost only")
    parser.add_argument("--repeat", type=int, default=20, help="calls per trial")
    args = parser.parse_args()
    if args.tiny:
        run("gpt2-tiny", tiny_gpt2, "adamw", "cpu", args.modes.split(","), args.repeat)
        return
    for name, factory, _, _, optimizer_name in cases(args.device, quick=args.device == "cpu"):
        if any(name.startswith(wanted) for wanted in args.models.split(",")):
            run(name, factory, optimizer_name, args.device, args.modes.split(","), args.repeat)


if __name__ == "__main__":
    main()
