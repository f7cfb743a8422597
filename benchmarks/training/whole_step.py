"""Benchmark: a whole training step (zero_grad, forward, loss, backward, optimizer.step) under
`dynamo.jit` (inductor) vs eager vs torch.compile (the anchor), the same step function.

Input: models (a ResNet-ish CNN of 4 blocks on 32x32, GPT-2 small from a transformers config
with random weights, an MLP), each with an optimizer (SGD with momentum, Adam, AdamW), a
device. Output: `<out-dir>/whole-step-<device>.{json,md}`: per model, median step ms
(interleaved trials) in wall time and in the calling thread's CPU time (`time.thread_time`:
time spent waiting for a core on a shared machine is not counted; with 1 thread on CPU, the
column to compare between runs), compile seconds (the first step's time minus the median),
frames compiled, graphs, graph breaks and inductor fallbacks of the jitted step, losses
against eager after N steps, and whether the parameters after one step equal eager's bit for
bit.

    python -m benchmarks.training.whole_step --quick --out-dir benchmarks/results
    python -m benchmarks.training.whole_step --device cuda --out-dir D
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import time
from typing import Callable

import torch

import dynamo
import inductor

MODES = ("eager", "jit", "torch.compile")
# `--combo-off-too`: also the jitted step compiled with inductor.config.combo_kernels off
UNCOMBINED = "jit-uncombined"


def _block(channels_in: int, channels: int, stride: int) -> torch.nn.Module:
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(channels)
            self.conv2 = torch.nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
            self.bn2 = torch.nn.BatchNorm2d(channels)
            self.skip = (torch.nn.Identity() if stride == 1 and channels_in == channels else
                         torch.nn.Conv2d(channels_in, channels, 1, stride, bias=False))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))
    return Block()


def small_cnn(width: int) -> torch.nn.Module:
    """ResNet-ish: a stem and 4 residual blocks on 32x32 inputs, 10 classes."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, width, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(width),
        torch.nn.ReLU(), _block(width, width, 1), _block(width, 2 * width, 2),
        _block(2 * width, 2 * width, 1), _block(2 * width, 4 * width, 2),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4 * width, 10))


class GPT2Loss(torch.nn.Module):
    """GPT-2 (random weights) returning logits; the loss is the step's cross entropy."""

    def __init__(self, layers: int, width: int, heads: int):
        super().__init__()
        import transformers
        config = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=heads,
                                         vocab_size=50257, n_positions=1024,
                                         attn_pdrop=0.0, embd_pdrop=0.0, resid_pdrop=0.0)
        self.model = transformers.GPT2LMHeadModel(config)

    def forward(self, tokens):
        return self.model(tokens, use_cache=False).logits


def cases(device: str, quick: bool) -> list:
    """(name, model factory, input factory, target factory, optimizer name)."""
    cpu = device == "cpu"
    batch = 8 if cpu else 32
    width = 16 if quick else 32
    gpt = (2, 256, 4, 2, 64) if quick else (12, 768, 12, 4, 128)   # layers width heads b seq
    return [
        ("mlp", lambda: torch.nn.Sequential(
            torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512),
            torch.nn.GELU(), torch.nn.Linear(512, 10)),
         lambda: torch.randn(64, 256), lambda: torch.randint(0, 10, (64,)), "sgd"),
        ("cnn", lambda: small_cnn(width), lambda: torch.randn(batch, 3, 32, 32),
         lambda: torch.randint(0, 10, (batch,)), "adam"),
        ("gpt2" + ("-quick" if quick else "-small"), lambda: GPT2Loss(*gpt[:3]),
         lambda: torch.randint(0, 50257, (gpt[3], gpt[4])),
         lambda: torch.randint(0, 50257, (gpt[3], gpt[4])), "adamw"),
    ]


def make_optimizer(name: str, parameters) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=0.01, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(parameters, lr=1e-3)
    return torch.optim.AdamW(parameters, lr=1e-3, weight_decay=0.01)


def train_step(model, optimizer, inputs, targets):
    optimizer.zero_grad()
    output = model(inputs)
    loss = torch.nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]),
                                            targets.reshape(-1))
    loss.backward()
    optimizer.step()
    return loss


def train_step_uncombined(model, optimizer, inputs, targets):
    """`train_step` under another code object (compiled code is cached per code object)."""
    return train_step(model, optimizer, inputs, targets)


def _use_mode(mode: str) -> None:
    """Compile what this mode compiles next (the optimizer's second graph compiles at the
    second step) with combined launches on or off."""
    inductor.config.combo_kernels = mode != UNCOMBINED


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _setups(factory: Callable, optimizer_name: str, device: str, modes=MODES) -> dict:
    """Per mode: (step callable, model, optimizer), the models identical copies."""
    torch.manual_seed(0)
    base = factory().to(device)
    setups = {}
    for mode in modes:
        model = copy.deepcopy(base)
        optimizer = make_optimizer(optimizer_name, model.parameters())
        if mode == "jit":
            step = dynamo.jit(train_step, backend="inductor")
        elif mode == UNCOMBINED:
            step = dynamo.jit(train_step_uncombined, backend="inductor")
        elif mode == "torch.compile":
            step = torch.compile(train_step)
        else:
            step = train_step
        setups[mode] = (step, model, optimizer)
    return setups


def _params_equal(setups: dict, mode: str) -> dict:
    pairs = list(zip(setups[mode][1].parameters(), setups["eager"][1].parameters()))
    return {"bit_exact": all(torch.equal(a, b) for a, b in pairs),
            "max_abs_diff": max(float((a - b).abs().max()) for a, b in pairs)}


def run_case(case: tuple, device: str, steps: int, trials: int, modes=MODES) -> dict:
    """Compile (first step), one-step parameter check, then `trials` interleaved timed steps;
    losses compared with eager's after the last."""
    name, factory, make_input, make_target, optimizer_name = case
    setups = _setups(factory, optimizer_name, device, modes)
    torch.manual_seed(1)
    batches = [(make_input().to(device), make_target().to(device)) for _ in range(steps)]
    result = {"model": name, "optimizer": optimizer_name, "device": device, "modes": {}}
    fallbacks_before = inductor.fallbacks()
    compiles_before = _backward_counts()
    losses = {mode: [] for mode in modes}
    first = {}
    for mode in modes:
        step, model, optimizer = setups[mode]
        _use_mode(mode)
        _synchronize(device)
        start = time.perf_counter()
        losses[mode].append(float(step(model, optimizer, *batches[0]).detach()))
        _synchronize(device)
        first[mode] = time.perf_counter() - start
    for mode in ("jit", "torch.compile"):
        result["modes"].setdefault(mode, {})["after_one_step"] = _params_equal(setups, mode)
    times = {mode: [] for mode in modes}
    cpu_times = {mode: [] for mode in modes}
    for trial in range(max(trials, steps - 1)):
        batch = batches[1 + trial % (steps - 1)] if steps > 1 else batches[0]
        for mode in modes:   # interleaved: each trial times every mode once
            step, model, optimizer = setups[mode]
            _use_mode(mode)
            _synchronize(device)
            start, cpu_start = time.perf_counter(), time.thread_time()
            loss = step(model, optimizer, *batch)
            _synchronize(device)
            cpu_times[mode].append(time.thread_time() - cpu_start)
            times[mode].append(time.perf_counter() - start)
            if trial < steps - 1:
                losses[mode].append(float(loss.detach()))
    _use_mode("jit")
    for mode in modes:
        median = statistics.median(times[mode])
        entry = result["modes"].setdefault(mode, {})
        entry.update(median_ms=1000 * median, compile_s=max(first[mode] - median, 0.0),
                     median_thread_cpu_ms=1000 * statistics.median(cpu_times[mode]),
                     losses=losses[mode],
                     loss_max_rel_diff=max(abs(a - b) / max(abs(b), 1e-12) for a, b
                                           in zip(losses[mode], losses["eager"])))
    result["modes"]["jit"].update(_jit_counts(setups["jit"][0]),
                                  fallbacks=_difference(inductor.fallbacks(), fallbacks_before),
                                  backward_compiles=_difference(_backward_counts(),
                                                                compiles_before))
    return result


def _backward_counts() -> dict:
    from inductor.autograd.runtime import backward_compiles
    return backward_compiles()


def _difference(after: dict, before: dict) -> dict:
    return {str(key): value - before.get(key, 0) for key, value in after.items()
            if value != before.get(key, 0)}


def _jit_counts(jitted) -> dict:
    """Frames compiled, graphs, graph breaks of the jitted step, and whether the optimizer's
    step was compiled: a graph holds its update (`optimizer.step()` runs under `no_grad`,
    which a captured step records as `_set_grad_enabled`, as test_compiled_optimizers
    checks), not only zero_grad and the forward."""
    records = jitted._framejit_driver.records
    names = sorted({record.code.co_name for record in records})
    graphs = [record.graph for record in records if record.graph is not None]
    return {"frames": len(records),
            "graphs": sum(record.graph is not None for record in records),
            "breaks": sum(len(record.breaks) for record in records),
            "frames_run_as_is": sum(bool(record.runs_as_is) for record in records),
            "captured": names,
            "optimizer_compiled": any("_set_grad_enabled" in graph.code for graph in graphs)}


def write(results: list, out_dir: str, device: str, arguments: dict) -> None:
    os.makedirs(out_dir, exist_ok=True)
    meta = {"torch": torch.__version__, "python": platform.python_version(),
            "threads": torch.get_num_threads(), "arguments": arguments,
            "device_name": torch.cuda.get_device_name() if device == "cuda" else
            platform.processor() or platform.machine()}
    with open(os.path.join(out_dir, f"whole-step-{device}.json"), "w") as handle:
        json.dump({"meta": meta, "results": results}, handle, indent=1)
    with open(os.path.join(out_dir, f"whole-step-{device}.md"), "w") as handle:
        handle.write(markdown(results, meta))


def markdown(results: list, meta: dict) -> str:
    lines = [f"Whole training step, {meta['device_name']}, torch {meta['torch']}, "
             f"{meta['threads']} thread(s), arguments {meta['arguments']}", "",
             "| model | opt | eager ms | jit ms | torch.compile ms | jit compile s | "
             "torch.compile compile s | jit frames/graphs/breaks | optimizer compiled | "
             "fallbacks | loss rel diff jit / tc | params after 1 step jit / tc | "
             "thread CPU ms eager / jit / tc |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        modes = result["modes"]
        jit, anchor = modes["jit"], modes["torch.compile"]

        def exact(entry):
            one = entry["after_one_step"]
            return "bit-exact" if one["bit_exact"] else f"{one['max_abs_diff']:.1e}"
        lines.append(
            f"| {result['model']} | {result['optimizer']} | {modes['eager']['median_ms']:.2f} "
            f"| {jit['median_ms']:.2f} | {anchor['median_ms']:.2f} | {jit['compile_s']:.1f} | "
            f"{anchor['compile_s']:.1f} | {jit['frames']}/{jit['graphs']}/{jit['breaks']} | "
            f"{jit['optimizer_compiled']} | {sum(jit['fallbacks'].values())} | "
            f"{jit['loss_max_rel_diff']:.1e} / {anchor['loss_max_rel_diff']:.1e} | "
            f"{exact(jit)} / {exact(anchor)} | " +
            " / ".join(f"{modes[mode].get('median_thread_cpu_ms', float('nan')):.2f}"
                       for mode in MODES) + " |")
    for result in results:
        off = result["modes"].get(UNCOMBINED)
        if off:
            lines.append(f"\n{result['model']}: jit with combo_kernels off "
                         f"{off['median_ms']:.2f} ms (thread CPU "
                         f"{off['median_thread_cpu_ms']:.2f} ms), loss rel diff "
                         f"{off['loss_max_rel_diff']:.1e}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--quick", action="store_true", help="smaller models (CPU runs)")
    parser.add_argument("--steps", type=int, default=4, help="steps whose losses are compared")
    parser.add_argument("--trials", type=int, default=10, help="timed steps per mode")
    parser.add_argument("--models", default="", help="comma-separated subset (mlp,cnn,gpt2)")
    parser.add_argument("--out-dir", default="benchmarks/results")
    parser.add_argument("--combo-off-too", action="store_true",
                        help="also time the jitted step compiled without combined launches")
    arguments = parser.parse_args()
    modes = MODES + ((UNCOMBINED,) if arguments.combo_off_too else ())
    if arguments.device == "cpu":
        torch.set_num_threads(1)
    results = []
    for case in cases(arguments.device, arguments.quick):
        if arguments.models and not any(case[0].startswith(name) for name in
                                        arguments.models.split(",")):
            continue
        print(f"{case[0]} ({case[4]}) ...", flush=True)
        results.append(run_case(case, arguments.device, arguments.steps, arguments.trials,
                                modes))
        print(json.dumps(results[-1]["modes"]["jit"], default=str)[:400], flush=True)
    write(results, arguments.out_dir, arguments.device, vars(arguments))
    print(markdown(results, {"device_name": arguments.device, "torch": torch.__version__,
                             "threads": torch.get_num_threads(), "arguments": vars(arguments)}))


if __name__ == "__main__":
    main()
