"""Time per generated kernel of one model (diagnostic benchmark).

Input: a model name of `benchmarks.inductor.models` (built by the zoo's catalog) and a batch
size. Output: a table of framejit's generated C++ kernels, slowest first (milliseconds per
model call, calls per model call, the kernel plan's description), and the same for
torch.compile's generated kernels (through its kernel profiling records), so one region can be
compared between the two compilers. `--show N` prints the C++ of the N slowest framejit kernels.
`--clock thread` times both compilers' kernels by the calling thread's CPU time (torch.compile's
through wrappers around its output module's `cpp_fused_*` functions, not its profiling records).

framejit is compiled with one kernel per segment (each kernel its own entry point), and
every entry point is timed around its call; the sum over kernels is the time of our code
outside library calls. Wall time on a shared machine: compare rows of one run only.

Run: `PYTHONPATH=. python -m benchmarks.inductor.kernel_times convnext_tiny --batch 8`;
`--zoo llama --batch 1 --threads 1` times the zoo's small-config entry of that name.
"""
from __future__ import annotations

import argparse
import time

from benchmarks.timing import seconds_per_call, timed


def _one_kernel_per_segment(source_module):
    """Patch `segments` so that each kernel is a segment of its own."""
    from inductor.schedule.plans import KernelPlan

    def segments(plan, dtype_of, threads, threshold, vectorize):
        result = []
        for position, step in enumerate(plan.steps):
            if isinstance(step, KernelPlan):
                result.append(source_module._segment([step], position, dtype_of, threads,
                                                     threshold, vectorize))
        return result
    source_module.segments = segments


def _timed_entries(wrapper_module, records: dict, clock=time.perf_counter):
    """Patch the wrapper generator so that every segment entry point is timed by `clock`."""
    original = wrapper_module.generate

    def generate(plan, segments, entries):
        timed = []
        for segment, entry in zip(segments, entries):
            step = plan.steps[segment.first_step]
            key = segment.body
            records.setdefault(key, {"describe": step.describe(), "seconds": 0.0,
                                     "calls": 0, "body": segment.body})

            # Timestamps inside the compiled wrapper, around each kernel entry point: a
            # measurement from inside the graph, which benchmarks/timing.py's loops (around
            # whole calls) cannot take.
            def run(*pointers, entry=entry, key=key):
                started = clock()
                status = entry(*pointers)
                record = records[key]
                record["seconds"] += clock() - started
                record["calls"] += 1
                return status
            timed.append(run)
        return original(plan, segments, timed)
    wrapper_module.generate = generate


def framejit_kernels(model, inputs: tuple, calls: int, clock=time.perf_counter) -> tuple:
    """(per-kernel records, milliseconds per model call) for framejit's C++ kernels;
    `inputs` = (args, kwargs); `clock` times each kernel (`time.thread_time`: the CPU time
    of the calling thread, which runs the kernels at one thread, unaffected by other
    processes on a loaded machine)."""
    import torch

    import inductor
    from inductor.codegen import wrapper
    from inductor.codegen.cpp import source
    records: dict = {}
    _one_kernel_per_segment(source)
    _timed_entries(wrapper, records, clock)
    compiled = torch.compile(model, backend=inductor.compile_fx)
    for _ in range(3):
        compiled(*inputs[0], **inputs[1])
    for record in records.values():
        record["seconds"], record["calls"] = 0.0, 0
    total = seconds_per_call(lambda: compiled(*inputs[0], **inputs[1]), calls) * 1e3
    return records, total


def _timed_torch_compile_kernels(records: dict, clock) -> None:
    """Wrap every generated C++ kernel (`cpp_fused_*`) of torch.compile's loaded output
    modules so that `clock` times each call (its `call` looks them up as module globals)."""
    from torch._inductor.codecache import PyCodeCache
    for module in PyCodeCache.modules:
        for name, kernel in list(vars(module).items()):
            if not name.startswith("cpp_fused") or not callable(kernel):
                continue
            records.setdefault(name, [0.0, 0])

            def run(*args, kernel=kernel, record=records[name]):
                started = clock()
                result = kernel(*args)
                record[0] += clock() - started
                record[1] += 1
                return result
            setattr(module, name, run)


def torch_compile_kernels(model, inputs: tuple, calls: int, clock=None) -> tuple:
    """({kernel name: (milliseconds per call, calls per call)}, ms per call) for torch.compile:
    its kernel profiling records (wall time), or with `clock` (`time.thread_time`) each
    generated kernel timed by that clock, as `framejit_kernels` times ours."""
    import torch
    import torch._inductor.config as torch_inductor_config
    torch_inductor_config.cpp.enable_kernel_profile = clock is None
    compiled = torch.compile(model)
    for _ in range(3):
        compiled(*inputs[0], **inputs[1])
    if clock is not None:
        records: dict = {}
        _timed_torch_compile_kernels(records, clock)
        total = seconds_per_call(lambda: compiled(*inputs[0], **inputs[1]), calls) * 1e3
        return {name: (seconds / calls * 1e3, count / calls)
                for name, (seconds, count) in records.items()}, total

    def profiled_calls():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            for _ in range(calls):
                compiled(*inputs[0], **inputs[1])
        return profile
    profile, seconds = timed(profiled_calls)
    total = seconds / calls * 1e3
    rows = {}
    for event in profile.key_averages():
        rows[event.key] = (event.self_cpu_time_total / 1e3 / calls, event.count / calls)
    return rows, total


def main() -> None:
    from benchmarks.inductor.models import build
    from benchmarks.timing import fresh_caches, load_average
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--show", type=int, default=0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--skip-torch-compile", action="store_true")
    parser.add_argument("--zoo", action="store_true",
                        help="build the zoo's entry of that name (small configs) instead of "
                             "benchmarks.inductor.models' default-size one")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: as set)")
    parser.add_argument("--clock", choices=["wall", "thread"], default="wall",
                        help="each compiler's kernels: wall time (torch.compile: its kernel "
                             "profiling records), or the thread's CPU time around each kernel "
                             "(steadier on a loaded machine; with --threads 1 only)")
    arguments = parser.parse_args()
    fresh_caches()
    import torch
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    if arguments.zoo:
        from benchmarks.zoo import catalog
        workload = catalog.build_workload(arguments.model, batch=arguments.batch)
        model, *inputs = workload.model, workload.args, workload.kwargs
    else:
        model, *inputs = build(arguments.model, arguments.batch)   # inputs: [args, kwargs]
    model.eval()
    with torch.no_grad():
        clock = time.thread_time if arguments.clock == "thread" else time.perf_counter
        records, total = framejit_kernels(model, inputs, arguments.calls, clock)
        ordered = sorted(records.values(), key=lambda record: -record["seconds"])
        kernel_ms = sum(record["seconds"] for record in ordered) / arguments.calls * 1e3
        print(f"framejit: {total:.1f} ms per call, generated kernels {kernel_ms:.1f} ms "
              f"(load {load_average()})")
        for number, record in enumerate(ordered[:arguments.top]):
            per_call = record["seconds"] / arguments.calls * 1e3
            count = record["calls"] / arguments.calls
            head = record["describe"].splitlines()[0]
            print(f"  #{number:<3} {per_call:7.2f} ms  x{count:<4g} {head}")
        for number, record in enumerate(ordered[:arguments.show]):
            print(f"\n--- #{number}\n{record['describe']}\n{record['body']}")
        if arguments.skip_torch_compile:
            return
        thread_clock = clock if arguments.clock == "thread" else None
        rows, total = torch_compile_kernels(model, inputs, arguments.calls, thread_clock)
        generated = {key: value for key, value in rows.items()
                     if key.startswith(("graph_", "cpp_fused", "cpp_"))}
        if thread_clock is not None:
            print(f"\ntorch.compile: {total:.1f} ms per call, generated kernels "
                  f"{sum(v[0] for v in generated.values()):.1f} ms (thread CPU time, load "
                  f"{load_average()})")
            for key, (per_call, count) in sorted(generated.items(),
                                                 key=lambda item: -item[1][0])[:arguments.top]:
                print(f"  {per_call:7.2f} ms  x{count:<4g} {key}")
            return
        wrapper = sum(value[0] for key, value in rows.items()
                      if key.startswith("## Call CompiledFxGraph"))
        # Per-kernel records are taken inside OpenMP regions: the kernel rows can add up to
        # more than the wrapper's self time (its generated kernels plus its Python).
        print(f"\ntorch.compile: {total:.1f} ms per call (profiled), wrapper self time "
              f"{wrapper:.1f} ms, kernel records {sum(v[0] for v in generated.values()):.1f} ms")
        for key, (per_call, count) in sorted(generated.items(), key=lambda item: -item[1][0]
                                             )[:arguments.top]:
            print(f"  {per_call:7.2f} ms  x{count:<4g} {key}")


if __name__ == "__main__":
    main()
