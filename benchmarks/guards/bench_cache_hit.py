"""Cache-hit cost of a jitted call, against an eager call and torch.compile in the same run
(benchmark; input: nothing; output: a table of microseconds per call).

Cases: functions of 1, 5 and 20 tensor arguments (8x8 float32, `x0 + x1 + ... + 1`) and a
25-layer `nn.Sequential` of `Linear(8, 8)` (50 parameters). Columns:

- `eager`: the function or module called directly;
- `framejit` / `torch.compile`: the full jitted call with each system's plain backend that runs
  the captured graph op by op (`eager`), after warm-up, so every call is a cache hit;
- `framejit fixed` / `torch.compile fixed`: the same calls with a backend whose compiled graph
  returns a precomputed result, so nothing but the per-call machinery is left (frame hook,
  guard check, glue): the cache-hit cost itself.

`torch.compile` is the anchor we measure against (benchmarks may call it; the product never
does). Run: `PYTHONPATH=. python benchmarks/guards/bench_cache_hit.py [--number N]`.
"""
from __future__ import annotations

import argparse
import warnings

import torch

import dynamo
from benchmarks.timing import best_per_call_us

REPEATS = 7


def per_call_us(function, number: int) -> float:
    """Best-of-REPEATS microseconds per call of `function()`."""
    return best_per_call_us(function, number, REPEATS)


def tensor_case(count: int):
    names = [f"x{index}" for index in range(count)]
    namespace: dict = {}
    exec(f"def add_{count}({', '.join(names)}):\n    return {' + '.join(names)} + 1\n", namespace)
    return namespace[f"add_{count}"], [torch.randn(8, 8) for _ in names]


def module_case():
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(25)])
    return model, [torch.randn(8, 8)]


def fixed_result_backend(gm, example_inputs):
    """A backend whose graph returns the result of its first call: only per-call machinery
    remains when it runs."""
    saved = []

    def run(*args):
        if not saved:
            saved.append(gm(*args))
        return saved[0]
    return run


def jitted_pair(target, backend):
    """(framejit, torch.compile) versions of `target` with the same kind of backend."""
    ours = dynamo.jit(target, backend="eager" if backend is None else backend)
    theirs = torch.compile(target, backend="eager" if backend is None else backend)
    return ours, theirs


def measure(label: str, target, args, number: int) -> dict:
    row = {"case": label, "eager": per_call_us(lambda: target(*args), number)}
    for suffix, backend in (("", None), (" fixed", fixed_result_backend)):
        ours, theirs = jitted_pair(target, backend)
        for _ in range(3):
            expected = target(*args)
            torch.testing.assert_close(ours(*args), expected)
            torch.testing.assert_close(theirs(*args), expected)
        row["framejit" + suffix] = per_call_us(lambda: ours(*args), number)
        row["torch.compile" + suffix] = per_call_us(lambda: theirs(*args), number)
        dynamo.reset()
        torch._dynamo.reset()
    return row


COLUMNS = ["eager", "framejit", "torch.compile", "framejit fixed", "torch.compile fixed"]


def print_table(rows) -> None:
    print(f"{'case':22s}" + "".join(f"{column:>21s}" for column in COLUMNS))
    for row in rows:
        print(f"{row['case']:22s}" + "".join(f"{row[column]:>18.2f} us" for column in COLUMNS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per timing")
    options = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    rows = []
    for count in (1, 5, 20):
        rows.append(measure(f"{count} tensor args", *tensor_case(count), options.number))
    rows.append(measure("module, 50 params", *module_case(), max(options.number // 4, 200)))
    print_table(rows)


if __name__ == "__main__":
    main()
