"""Where the host time of a jitted whole training step goes, sampled (framejit's frame hook runs
every frame as is while a trace or profile function is set, so cProfile would measure eager).

    python -m benchmarks.experiments.diag_step_sampled --model cnn [--device cuda] [--steps 400]

Input: a case of `benchmarks.training.whole_step.cases` (full sizes on CUDA, quick on the CPU).
Output, on stdout: the step's wall and thread CPU ms (50 steps after 5 warm-up steps), then the
share of samples per innermost line and per function anywhere on the stack, from a thread
reading the main thread's frame every 0.1 ms (`sys._current_frames()`) while `--steps` steps
run. Time in C code holding the GIL is charged to the Python line that called it; on CUDA the
autograd engine runs the backward on its own thread (the main thread waits in
`_engine_run_backward`).
"""
from __future__ import annotations

import argparse
import collections
import sys
import threading
import time

import torch

import dynamo
from benchmarks.training.whole_step import cases, make_optimizer, train_step


def _where(code) -> str:
    name = code.co_filename.split("site-packages/")[-1]
    return f"{name}:{code.co_name}"


def sample(call, steps: int) -> tuple[collections.Counter, collections.Counter]:
    main, leaf, inclusive, done = threading.main_thread().ident, collections.Counter(), \
        collections.Counter(), threading.Event()

    def sampler():
        while not done.is_set():
            frame, seen = sys._current_frames().get(main), set()
            if frame is not None:
                leaf[f"{_where(frame.f_code)}:{frame.f_lineno}"] += 1
            while frame is not None:
                key = _where(frame.f_code)
                if key not in seen:
                    inclusive[key] += 1
                    seen.add(key)
                frame = frame.f_back
            time.sleep(0.0001)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    try:
        for _ in range(steps):
            call()
    finally:
        done.set()
        thread.join()
        sys.setswitchinterval(interval)
    return leaf, inclusive


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="cnn", help="mlp, cnn or gpt2")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rows", type=int, default=45)
    args = parser.parse_args()
    name, factory, inputs, targets, optimizer_name = next(
        case for case in cases(args.device, args.device == "cpu") if case[0].startswith(args.model))
    torch.manual_seed(0)
    model = factory().to(args.device)
    optimizer = make_optimizer(optimizer_name, model.parameters())
    x, y = inputs().to(args.device), targets().to(args.device)
    step = dynamo.jit(train_step, backend="inductor")
    synchronize = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    def call():
        step(model, optimizer, x, y)

    for _ in range(5):
        call()
    synchronize()
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(50):
        call()
    synchronize()
    print(f"{name} jit: wall {(time.perf_counter() - wall) / 50 * 1e3:.3f} ms, "
          f"thread CPU {(time.thread_time() - cpu) / 50 * 1e3:.3f} ms per step")
    leaf, inclusive = sample(call, args.steps)
    synchronize()
    total = sum(leaf.values()) or 1
    print(f"{total} samples\n-- innermost lines")
    for key, count in leaf.most_common(args.rows):
        print(f"{count / total * 100:5.1f}% {key}")
    print("-- functions on the stack")
    for key, count in inclusive.most_common(args.rows):
        print(f"{count / total * 100:5.1f}% {key}")


if __name__ == "__main__":
    main()
