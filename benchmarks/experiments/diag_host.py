"""Where the host time of a compiled zoo model's call goes on the GPU machine, framejit next to
torch.compile, in one process (bf16 inference, batch 16, the zoo's workloads).

Two views, for `dynamo.jit(model)` and `torch.compile(model)` (default modes):
- enqueue microseconds per call (host time until the call returns, each call started on an
  idle GPU), interleaved trials, medians, of:
  - the product (`jit` / `tc`);
  - the capture layer alone: a backend returning its first result again (`jit fixed` /
    `tc fixed`: frame hook, guards, argument gathering and output rebuild);
  - each system's compiled graph called directly with the arguments its layer passed
    (`jit graph` / `tc graph`);
  - our layer's parts, as `benchmarks/capture/call_overhead.py` splits them (with whether the
    check runs a native guard program, its Python lines and `id()` calls, and what the
    `framejit.guards` channel said about keeping checks in Python): the guard check and the
    glue (argument gathering, the fixed graph's call, output rebuild), and eager's
    `model.forward` next to `model(...)` (the module call's own cost);
- torch.profiler's CPU view of 10 product calls: per op (ATen ops and CUDA runtime calls),
  calls per model call and self CPU microseconds per model call, ours and theirs side by side.

A diagnostic, not a benchmark:
    python -m benchmarks.experiments.diag_host --models gpt2-base,bert-base [--trials 15]
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import time

import torch
import torch._inductor.compile_fx

from benchmarks.capture.call_overhead import fixed_backend, parts, recording_backend
from benchmarks.zoo.catalog import build_workload


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def enqueue_us(variants: dict, trials: int, calls: int = 5) -> dict:
    """{name: median host microseconds per call}, each call started on an idle GPU: the
    device is synchronized before every call but outside its timed span, which
    benchmarks/timing.py's loops (synchronized around the whole batch) do not do."""
    samples: dict = {name: [] for name in variants}
    names = list(variants)
    for trial in range(trials):
        for name in names[trial % len(names):] + names[:trial % len(names)]:
            total = 0.0
            for _ in range(calls):
                synchronize()
                started = time.perf_counter()
                variants[name]()
                total += time.perf_counter() - started
            synchronize()
            samples[name].append(total / calls)
    return {name: round(statistics.median(values) * 1e6, 1) for name, values in samples.items()}


def op_profile(function, calls: int = 10) -> dict:
    """{op name: (calls per model call, self CPU us per model call)} under torch.profiler."""
    for _ in range(3):
        function()
    synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(calls):
            function()
        synchronize()
    found = {}
    for event in profiler.key_averages():
        if event.self_cpu_time_total <= 0:
            continue
        found[event.key] = (event.count / calls, event.self_cpu_time_total / calls)
    return found


def print_profiles(ours: dict, theirs: dict, rows: int) -> None:
    keys = sorted(set(ours) | set(theirs),
                  key=lambda key: -max(ours.get(key, (0, 0))[1], theirs.get(key, (0, 0))[1]))
    total = (sum(value[1] for value in ours.values()), sum(value[1] for value in theirs.values()))
    print(f"{'op':60s} {'ours n':>7s} {'ours us':>8s} {'tc n':>7s} {'tc us':>8s}")
    print(f"{'(all, self CPU us per call)':60s} {'':7s} {total[0]:8.1f} {'':7s} {total[1]:8.1f}")
    for key in keys[:rows]:
        mine, other = ours.get(key, (0, 0.0)), theirs.get(key, (0, 0.0))
        print(f"{key[:60]:60s} {mine[0]:7.1f} {mine[1]:8.1f} {other[0]:7.1f} {other[1]:8.1f}")


class _Collected(logging.Handler):
    """Keeps the messages of the `framejit.guards` channel (why a check stays in Python)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not message.startswith("compiled") and ("Python" in message or "native" in message):
            self.messages.append(message[:300])


def check_summary(check) -> dict:
    """Whether a guard check runs a native program, and its Python part in lines and calls."""
    text = getattr(check, "source_text", "")
    code = [line.strip() for line in text.splitlines() if line.strip()
            and not line.strip().startswith("#")]
    return {"native_program": "native_program(" in text, "python_lines": len(code),
            "identity_calls": sum(line.count("id(") for line in code)}


def measure(name: str, trials: int, rows: int, device: str = "cuda",
            profile_guards: bool = False) -> dict:
    import dynamo
    import inductor

    collected = _Collected()
    channel = logging.getLogger("framejit.guards")
    channel.addHandler(collected)
    channel.setLevel(logging.DEBUG)

    workload = build_workload(name, device, torch.bfloat16, batch=16 if device == "cuda" else 1)
    model, args, kwargs = workload.model, workload.args, workload.kwargs
    ours_store: dict = {}
    theirs_store: dict = {}
    with torch.no_grad():
        dynamo.reset()
        torch._dynamo.reset()
        products = {"jit": dynamo.jit(model, backend=recording_backend(ours_store,
                                                                        inductor.compile_fx)),
                    "tc": torch.compile(model, backend=recording_backend(
                        theirs_store, torch._inductor.compile_fx.compile_fx)),
                    "jit fixed": dynamo.jit(model, backend=fixed_backend),
                    "tc fixed": torch.compile(model, backend=fixed_backend)}
        variants = {key: (lambda function=function: function(*args, **kwargs))
                    for key, function in products.items()}
        variants["eager"] = lambda: model(*args, **kwargs)
        for function in variants.values():
            for _ in range(3):
                function()
        for label, store in (("jit graph", ours_store), ("tc graph", theirs_store)):
            compiled, inputs = store["compiled"], list(store["inputs"])
            variants[label] = lambda compiled=compiled, inputs=inputs: compiled(*inputs)
        # our capture layer's parts: the guard check and the glue, run as the hook runs them
        found = parts(products["jit fixed"], variants["jit fixed"])
        variants["jit guard check"] = found["guard check"]
        if "glue" in found:
            variants["jit glue"] = found["glue"]
        variants["eager forward"] = lambda: model.forward(*args, **kwargs)
        from benchmarks.capture.call_overhead import installed_entry
        row = {"model": name, "guards": found["guards"],
               "check": check_summary(installed_entry(products["jit fixed"])[1]),
               "guard_log": collected.messages[:5],
               "enqueue_us": enqueue_us(variants, trials)}
        print(json.dumps(row), flush=True)
        if profile_guards:
            import cProfile
            import io
            import pstats
            profiler = cProfile.Profile()
            check = variants["jit guard check"]
            profiler.enable()
            for _ in range(200):
                check()
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(20)
            print(f"== {name}: the guard check under cProfile, 200 calls", flush=True)
            print(text.getvalue()[-5000:], flush=True)
        print(f"== {name}: torch.profiler CPU view, per model call", flush=True)
        print_profiles(op_profile(variants["jit"]), op_profile(variants["tc"]), rows)
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="gpt2-base,bert-base")
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test of the script")
    parser.add_argument("--profile-guards", action="store_true",
                        help="also list the guard check's Python functions under cProfile")
    options = parser.parse_args(argv)
    for name in options.models.split(","):
        measure(name, options.trials, options.rows, options.device, options.profile_guards)


if __name__ == "__main__":
    main()
