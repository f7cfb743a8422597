"""Host cost of one call of a compiled function, and where framejit's share goes (benchmark).

Input: workload names (narrow BERT from the zoo's BERT builder, a small MLP, a function of 1
and one of 20 tensor arguments). Output: a markdown table per workload and JSON lines in
`benchmarks/capture/results/call-overhead.jsonl`.

Variants, timed in CPU microseconds per call (one thread, interleaved trials, medians; CPU
time holds up better than wall time on the shared 2-core VM):

| variant | what runs |
|---|---|
| eager | the function or module itself |
| jit eager | `dynamo.jit(target, backend="eager")`: our capture layer plus the FX graph |
| our graph | that FX graph called directly with the inputs the glue passes it |
| jit fixed | `dynamo.jit` with a backend returning a precomputed result: the capture layer alone |
| inductor graph | `inductor.compile_fx` of our graph, called directly (wrapper + kernels) |
| jit inductor | `dynamo.jit(target)`: the product |
| tc eager / tc graph / tc fixed | the same three for `torch.compile` (the anchor) |
| tc default | `torch.compile(target)` (torch's inductor) |

Breakdown of `jit fixed` (all measured, except the remainder):
- guard check: the installed check called on the frame view the hook built;
- glue: the glue function alone (input fetches, the fixed graph's call, output rebuild);
- module call: `model(...)` minus `model.forward(...)` in eager (`nn.Module.__call__`);
- hook and frames: the remainder (the C hook's cache walk and frame view, the replacement's
  frame and function object, the `ScopedCall`s that install the callback).

Run: `PYTHONPATH=. .venv/bin/python -m benchmarks.capture.call_overhead [--workloads
bert-narrow,mlp,args1,args20] [--trials 15] [--label note]`.
"""
from __future__ import annotations

import argparse
import json
import os
import warnings
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("bert-narrow", "mlp", "args1", "args20")


# ---- workloads ------------------------------------------------------------------------------
def build(name: str):
    """(target, args, kwargs, is_module) of a workload."""
    import torch
    torch.manual_seed(0)
    if name == "bert-narrow":
        from benchmarks.inductor.host_overhead import shortened
        from benchmarks.zoo import text
        size = {"hidden": 96, "layers": 12, "heads": 12, "ffn": 384, "vocab": 512}
        workload = text._bert_like("BertConfig", "BertForMaskedLM", size)(1, False)
        workload.model.eval()
        return (workload.model, shortened(workload.args, 8), shortened(workload.kwargs, 8),
                True)
    if name == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(),
                                    torch.nn.Linear(256, 64)).eval()
        return model, (torch.randn(8, 64),), {}, True
    count = int(name.removeprefix("args"))
    names = [f"x{index}" for index in range(count)]
    namespace: dict = {}
    exec(f"def add_{count}({', '.join(names)}):\n    return {' + '.join(names)} + 1\n",
         namespace)
    return namespace[f"add_{count}"], tuple(torch.randn(8, 8) for _ in names), {}, False


def fixed_backend(gm, example_inputs):
    """A backend whose graph returns its first result again: only per-call machinery runs."""
    saved: list = []

    def run(*args):
        if not saved:
            saved.append(gm(*args))
        return saved[0]
    return run


def recording_backend(store: dict, inner=None):
    """A backend keeping the FX graph and the inputs of its first call in `store`."""
    def backend(gm, example_inputs):
        store["graph"] = gm
        compiled = gm.forward if inner is None else inner(gm, example_inputs)

        def run(*args):
            store.setdefault("inputs", args)
            return compiled(*args)
        store["compiled"] = compiled
        return run
    return backend


# ---- timing ---------------------------------------------------------------------------------
def cpu_us_per_call(variants: dict, trials: int) -> dict:
    """{name: median CPU microseconds per call} over interleaved trials (the inductor host
    benchmark's timer, `benchmarks/inductor/host_overhead.py`)."""
    from benchmarks.inductor.host_overhead import cpu_per_call
    return {name: seconds * 1e6 for name, seconds in cpu_per_call(variants, trials).items()}


# ---- the parts of a jitted call -------------------------------------------------------------
def installed_entry(jitted):
    """(code object, the check of its cache entry, the compile record) of a jitted target.
    Entries live on the code object, shared by every wrapper of it: find ours by its check."""
    [record] = [record for record in jitted._framejit_driver.records
                if record.replacement is not None]
    return record.code, record.compiled, record


def _swap_check(entries: list, old, new) -> None:
    [index] = [index for index, entry in enumerate(entries) if entry[0] is old]
    entries[index] = (new, entries[index][1])


def frame_view_of(jitted, call: Callable) -> tuple:
    """The (L, G) the hook hands to the check on a call, caught by wrapping the check once."""
    from dynamo import hook
    code, check, _ = installed_entry(jitted)
    entries = hook.entries(code)
    seen = []

    def recorder(L, G):
        seen.append((L, G))
        return check(L, G)
    _swap_check(entries, check, recorder)
    try:
        call()
    finally:
        _swap_check(entries, recorder, check)
    return seen[0]


def glue_function(record):
    """The glue the replacement code calls (None for skeletons of frames with breaks)."""
    for constant in record.replacement.co_consts:
        if callable(constant) and getattr(constant, "__name__", "").endswith("glue"):
            return constant
    return None


def parts(jitted, call: Callable) -> dict:
    """Callables for the check and the glue of `jitted`'s entry, run as the hook runs them."""
    from dynamo import _C
    _, check, record = installed_entry(jitted)
    L, G = frame_view_of(jitted, call)
    driver = jitted._framejit_driver
    scoped_check = _C.ScopedCall(check, driver)  # the check runs with its jit's callback
    found = {"guard check": lambda: scoped_check(L, G)}
    glue = glue_function(record)
    names = glue.__code__.co_varnames[:glue.__code__.co_argcount] if glue else ()
    if glue is not None and all(name.startswith("L_") and name[2:] in L for name in names):
        arguments = [L[name[2:]] for name in names]
        if "kwargs" in L and isinstance(L["kwargs"], dict):  # the glue may clear and refill it
            saved = dict(L["kwargs"])
            arguments = [saved if value is L["kwargs"] else value for value in arguments]
        found["glue"] = lambda: glue(*arguments)
    found["guards"] = len(record.guards)
    return found


# ---- one workload ---------------------------------------------------------------------------
def measure(name: str, trials: int, with_torch: bool) -> dict:
    import torch

    import dynamo
    import inductor
    target, args, kwargs, is_module = build(name)
    call = lambda function: (lambda: function(*args, **kwargs))  # noqa: E731
    ours_store: dict = {}
    jit_eager = dynamo.jit(target, backend=recording_backend(ours_store))
    jit_fixed = dynamo.jit(target, backend=fixed_backend)
    jit_inductor = dynamo.jit(target)
    variants = {"eager": call(target), "jit eager": call(jit_eager),
                "jit fixed": call(jit_fixed), "jit inductor": call(jit_inductor)}
    if is_module:
        variants["eager forward"] = call(target.forward)
    with torch.no_grad():
        for function in list(variants.values()):
            function()
        graph_inputs = list(ours_store["inputs"])
        graph = ours_store["compiled"]
        variants["our graph"] = lambda: graph(*graph_inputs)
        compiled = inductor.compile_fx(ours_store["graph"], graph_inputs)
        variants["inductor graph"] = lambda: compiled(*graph_inputs)
        found = parts(jit_fixed, variants["jit fixed"])
        variants["guard check"] = found["guard check"]
        if "glue" in found:
            variants["glue"] = found["glue"]
        if with_torch:
            variants.update(torch_variants(target, call))
        timings = cpu_us_per_call(variants, trials)
    return {"workload": name, "guards": found["guards"], **breakdown(timings, is_module),
            "us": {key: round(value, 2) for key, value in timings.items()},
            "wrapper": wrapper_counts(compiled)}


def torch_variants(target, call) -> dict:
    """torch.compile's eager, fixed-result and default variants, plus its graph alone."""
    import torch
    store: dict = {}
    found = {"tc eager": call(torch.compile(target, backend=recording_backend(store))),
             "tc fixed": call(torch.compile(target, backend=fixed_backend)),
             "tc default": call(torch.compile(target))}
    for function in found.values():
        function()
    graph, inputs = store["compiled"], list(store["inputs"])
    found["tc graph"] = lambda: graph(*inputs)
    return found


def breakdown(us: dict, is_module: bool) -> dict:
    """Overheads over each system's own graph, and the parts of ours."""
    rows = {"ours over graph": us["jit eager"] - us["our graph"],
            "ours inductor over graph": us["jit inductor"] - us["inductor graph"]}
    if "tc eager" in us:
        rows["torch over graph"] = us["tc eager"] - us["tc graph"]
    module_call = us["eager"] - us["eager forward"] if is_module else 0.0
    known = us["guard check"] + us.get("glue", 0.0) + module_call
    rows.update({"module call": module_call, "hook and frames": us["jit fixed"] - known})
    return {key: round(value, 2) for key, value in rows.items()}


def wrapper_counts(compiled) -> dict:
    """What the generated wrapper does per call (kernel segments, data pointers read...)."""
    from benchmarks.inductor.host_overhead import wrapper_counts as counts
    source = getattr(getattr(compiled, "report", None), "source", "") or ""
    found = counts(source)
    found["data_ptr reads"] = source.split("\n\ndef call(")[0].count(".data_ptr()")
    return found


# ---- driver ---------------------------------------------------------------------------------
ORDER = ["eager", "jit eager", "our graph", "jit fixed", "guard check", "glue",
         "inductor graph", "jit inductor", "tc eager", "tc graph", "tc fixed", "tc default"]


def print_row(row: dict) -> None:
    us = row["us"]
    print(f"\n### {row['workload']} ({row['guards']} guards)\n")
    print("| variant | CPU us per call |\n|---|---:|")
    for name in ORDER:
        if name in us:
            print(f"| {name} | {us[name]:.1f} |")
    for name in ("ours over graph", "torch over graph", "ours inductor over graph",
                 "module call", "hook and frames"):
        if name in row:
            print(f"| *{name}* | {row[name]:.1f} |")
    print("\nwrapper per call: " + ", ".join(f"{key} {value}"
                                            for key, value in row["wrapper"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--no-torch", action="store_true", help="skip torch.compile variants")
    parser.add_argument("--label", default="")
    options = parser.parse_args()
    import torch
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    from benchmarks.inductor.host_overhead import _commit
    from benchmarks.timing import load_average
    rows = []
    for name in options.workloads.split(","):
        row = measure(name, options.trials, not options.no_torch)
        row.update(label=options.label, commit=_commit(), load=load_average())
        print_row(row)
        rows.append(row)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "call-overhead.jsonl")
    with open(path, "a") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    print(f"\nappended {len(rows)} row(s) to {path} (load {rows[-1]['load'] if rows else '?'})")


if __name__ == "__main__":
    main()
