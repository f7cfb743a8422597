"""Training-step speed and peak memory: framejit against eager and torch.compile.

    PYTHONPATH=. .venv/bin/python -m benchmarks.training.run                  # CPU, small models
    PYTHONPATH=. python -m benchmarks.training.run --device cuda --amp       # GPU, full models

One training step = zero_grad, forward, loss, backward, SGD step. Each compiler trains its own
copy of the same randomly initialised model on the same inputs. Per model and compiler: cold
time of the first step (capture + compile + run), warm time per step (median of interleaved
trials: every trial runs one step of each compiler in turn), speedup over eager, peak memory
of one step (`benchmarks.training.memory`) and the first step's loss against eager's.

Compilers:
- `eager`
- `framejit-aot`: `dynamo.jit` capture + joint trace + partition, graphs run op by op
  (`backend="aot_eager"`; no code generation: isolates this layer's overhead and memory)
- `framejit`: `dynamo.jit(backend="inductor")` (our code generator; skipped until it exists)
- `ours-on-torch-capture`: torch.compile's capture with our `inductor.autograd.aot_eager`
  (isolates the training layer from our capture)
- `torch-aot`: `torch.compile(backend="aot_eager")` (torch's AOTAutograd, no code generation)
- `torch.compile`: `torch.compile()` (AOTAutograd + Inductor)

Results: one JSON line per (model, compiler) appended to `--out`, and a table on stdout.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import json
import platform
import statistics
from typing import Callable

import torch

from benchmarks.timing import seconds_per_call, timed
from benchmarks.training.memory import peak_bytes
from benchmarks.zoo import catalog

CPU_MODELS = ["resnet18", "mobilenet_v3_large", "bert", "gpt2"]
GPU_MODELS = ["resnet50", "mobilenet_v3_large", "bert", "gpt2"]
COMPILERS = ["eager", "framejit-aot", "framejit", "ours-on-torch-capture", "torch-aot",
             "torch.compile"]


VISION = ("resnet18", "resnet50", "mobilenet_v3_large")


def build(name: str, device: str, batch: int | None = None, size: int | None = None):
    """(model, args, kwargs, loss(output, args, kwargs)) with random weights, no downloads: the
    zoo catalog's `training/` entries (`benchmarks/zoo/variants.py`), small configs on the CPU.
    `size`: image side, or sequence length for text models."""
    small = device == "cpu"
    if name in VISION:
        entry = f"training/{name}"
        batch, size = batch or (4 if small else 64), size or (128 if small else 224)
    elif name in ("bert", "gpt2"):
        entry = f"training/{name}-small" if small else f"training/{name}"
        batch, size = batch or (4 if small else 16), size or (128 if small else 512)
    else:
        raise SystemExit(f"unknown model {name!r}")
    workload = catalog.build_workload(entry, batch=batch, size=size)
    targets = catalog.cast_tensors(workload.targets, device, None)
    return (workload.model, workload.args, workload.kwargs,
            lambda output, args, kwargs: workload.loss(output, targets))


def compile_with(compiler: str, model: torch.nn.Module) -> Callable | None:
    """The callable to train with under `compiler` (None: not available here)."""
    if compiler == "eager":
        return model
    if compiler == "framejit-aot":
        import dynamo
        return dynamo.jit(model, backend="aot_eager")
    if compiler == "framejit":
        import inductor
        if not hasattr(inductor, "compile_fx"):
            return None
        import dynamo
        return dynamo.jit(model, backend="inductor")
    if compiler == "ours-on-torch-capture":
        from inductor.autograd import aot_eager
        return torch.compile(model, backend=aot_eager, dynamic=False)
    if compiler == "torch-aot":
        return torch.compile(model, backend="aot_eager", dynamic=False)
    if compiler == "torch.compile":
        return torch.compile(model, dynamic=False)
    raise SystemExit(f"unknown compiler {compiler!r}")


class Trainer:
    """One compiler's copy of the model, its optimizer and its step."""

    def __init__(self, compiler, model, args, kwargs, loss, device, amp):
        self.compiler = compiler
        self.model = copy.deepcopy(model).to(device).train()
        self.runner = compile_with(compiler, self.model)
        self.args = tuple(a.to(device) for a in args)
        self.kwargs = {key: value.to(device) for key, value in kwargs.items()}
        self.loss = loss
        self.device = device
        self.amp = amp
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-3)

    def autocast(self):
        if not self.amp:
            return contextlib.nullcontext()
        return torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16)

    def step(self) -> torch.Tensor:
        """Forward, loss, backward, optimizer step (gradients must be None beforehand)."""
        with self.autocast():
            output = self.runner(*self.args, **self.kwargs)
            loss = self.loss(output, self.args, self.kwargs)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def timed_step(self) -> float:
        """Seconds of one step (the gradients are cleared before, outside the timed span)."""
        self.optimizer.zero_grad(set_to_none=True)
        return seconds_per_call(self.step, 1, lambda: synchronize(self.device))


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bench_model(name: str, compilers: list[str], options) -> list[dict]:
    """Cold time, warm median, peak memory and first loss of each compiler on `name`."""
    torch.manual_seed(0)
    model, args, kwargs, loss = build(name, options.device, options.batch, options.size)
    trainers, rows = [], []
    for compiler in compilers:
        trainer = Trainer(compiler, model, args, kwargs, loss, options.device, options.amp)
        if trainer.runner is None:
            rows.append({"model": name, "compiler": compiler, "status": "unavailable"})
            continue
        torch.manual_seed(1)
        try:
            first_loss, cold = timed(lambda: trainer.step().float().item())
        except Exception as error:  # reported in the table, the run goes on
            rows.append({"model": name, "compiler": compiler, "status": "error",
                         "error": f"{type(error).__name__}: {str(error)[:300]}"})
            continue
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.step()                   # warm-up (lazily compiled backward, allocator)
        trainer.optimizer.zero_grad(set_to_none=True)
        peak = peak_bytes(trainer.step, options.device)
        trainers.append(trainer)
        rows.append({"model": name, "compiler": compiler, "status": "ok", "cold_s": cold,
                     "first_loss": first_loss, "peak_bytes": peak})
    times: dict[str, list[float]] = {trainer.compiler: [] for trainer in trainers}
    for _ in range(options.trials):
        for trainer in trainers:
            times[trainer.compiler].append(trainer.timed_step())
    eager = statistics.median(times["eager"]) if times.get("eager") else None
    eager_row = next((row for row in rows if row["compiler"] == "eager"), None)
    for row in rows:
        if row["status"] != "ok":
            continue
        if times[row["compiler"]]:
            row["median_s"] = statistics.median(times[row["compiler"]])
        if eager and "median_s" in row:
            row["speedup"] = eager / row["median_s"]
        if eager_row and eager_row["status"] == "ok":
            row["peak_vs_eager"] = row["peak_bytes"] / max(eager_row["peak_bytes"], 1)
            row["loss_diff"] = abs(row["first_loss"] - eager_row["first_loss"])
    return rows


def describe_machine(options) -> dict:
    info = {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
            "batch": options.batch, "size": options.size,
            "python": platform.python_version(), "device": options.device,
            "amp": options.amp, "threads": torch.get_num_threads(),
            "cpu": platform.processor() or platform.machine()}
    if options.device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name()
    return info


def print_table(rows: list[dict]) -> None:
    print(f"{'model':20} {'compiler':22} {'status':7} {'cold s':>8} {'step ms':>9} "
          f"{'speedup':>8} {'peak MB':>9} {'vs eager':>8} {'loss diff':>10}")
    for row in rows:
        if row["status"] != "ok":
            print(f"{row['model']:20} {row['compiler']:22} {row['status']:7} "
                  f"{row.get('error', '')[:80]}")
            continue
        print(f"{row['model']:20} {row['compiler']:22} ok      {row['cold_s']:8.1f} "
              f"{row.get('median_s', float('nan')) * 1e3:9.1f} "
              f"{row.get('speedup', float('nan')):7.2f}x "
              f"{row['peak_bytes'] / 2**20:9.1f} {row.get('peak_vs_eager', float('nan')):7.2f}x "
              f"{row.get('loss_diff', float('nan')):10.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--amp", action="store_true", help="bfloat16 autocast")
    parser.add_argument("--models", help="comma-separated (default: the device's set)")
    parser.add_argument("--compilers", default=",".join(COMPILERS))
    parser.add_argument("--trials", type=int, default=7, help="0: memory and cold time only")
    parser.add_argument("--batch", type=int, help="batch size (default: per model and device)")
    parser.add_argument("--size", type=int, help="image side or sequence length")
    parser.add_argument("--threads", type=int, default=None, help="torch threads on CPU")
    parser.add_argument("--out", default="benchmarks/training/results/cpu.jsonl")
    options = parser.parse_args()
    if options.threads:
        torch.set_num_threads(options.threads)
    models = (options.models.split(",") if options.models
              else CPU_MODELS if options.device == "cpu" else GPU_MODELS)
    compilers = options.compilers.split(",")
    machine = describe_machine(options)
    print(json.dumps(machine))
    all_rows = []
    for name in models:
        rows = bench_model(name, compilers, options)
        print_table(rows)
        all_rows.extend(rows)
        with open(options.out, "a") as results:
            for row in rows:
                results.write(json.dumps({**machine, **row}) + "\n")
    print("\nall models:")
    print_table(all_rows)


if __name__ == "__main__":
    main()
