"""1x1 convolutions in channels-last CPU graphs: framejit with the layout rule of
`inductor/lower/graph.py` (`convolution_prefers_channels_last`) as it is ("after") and with
1x1 kernels under the elements rule ("before", the rule patched), beside eager and
torch.compile, in one process: interleaved trials (rotating order) of 10 calls, thread CPU
ms, one torch thread, inference. Each compiled result is printed against eager's first.

A diagnostic, not a benchmark (numbers: docs/performance-notes.md, MobileNetV2):
    python -m benchmarks.experiments.diag_one_by_one_layout mobilenet_v2 11
"""
from __future__ import annotations

import statistics
import sys
import time

import torch

import dynamo
import inductor.lower.graph as graph
from benchmarks.zoo import catalog


def _tensor(value):
    return value["out"] if isinstance(value, dict) else value


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "mobilenet_v2"
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    torch.set_num_threads(1)
    workload = catalog.build_workload(name, batch=1, training=False)
    model, args, kwargs = workload.model, workload.args, workload.kwargs
    rule = graph.convolution_prefers_channels_last
    with torch.no_grad():
        expected = _tensor(model(*args, **kwargs))
        graph.convolution_prefers_channels_last = \
            lambda i, size, o, switches_graph=False: rule(i, size, o, True)
        before = dynamo.jit(model)
        results = {"framejit-before": before(*args, **kwargs)}
        graph.convolution_prefers_channels_last = rule
        twin = catalog.build_workload(name, batch=1, training=False).model
        twin.load_state_dict(model.state_dict())
        after = dynamo.jit(twin)
        results["framejit-after"] = after(*args, **kwargs)
        compiled = torch.compile(model, dynamic=False)
        results["torch.compile"] = compiled(*args, **kwargs)
        for label, value in results.items():
            error = (_tensor(value) - expected).abs().max().item()
            print(f"{label}: max difference from eager {error:.1e}")
        steps = {"eager": model, "torch.compile": compiled, "framejit-before": before,
                 "framejit-after": after}
        times = {label: [] for label in steps}
        labels = list(steps)
        for trial in range(trials):
            for label in labels[trial % 4:] + labels[:trial % 4]:
                steps[label](*args, **kwargs)
                start = time.thread_time()
                for _ in range(10):
                    steps[label](*args, **kwargs)
                times[label].append((time.thread_time() - start) / 10 * 1e3)
    base = statistics.median(times["eager"])
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:16s} median {median:7.2f} ms  best {min(values):7.2f}  "
              f"speedup {base / median:.3f}x")


if __name__ == "__main__":
    main()
