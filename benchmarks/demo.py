"""The README demo: compile a real model with `dynamo.jit`, print its speed and `explain()`.

    python -m benchmarks.demo [--model resnet18|bert] [--iterations N]
"""
from __future__ import annotations

import argparse
import time

import torch

import dynamo
import guards.native
import inductor.runtime.native
from benchmarks.timing import median_seconds


def build(name: str):
    if name == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(weights=None).eval()
        return model, (torch.randn(1, 3, 224, 224),), {}
    if name == "bert":
        from transformers import BertConfig, BertModel
        config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                            intermediate_size=1024)
        model = BertModel(config).eval()
        ids = torch.randint(0, config.vocab_size, (1, 128))
        return model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    raise SystemExit(f"unknown model {name!r}")


def median_ms(fn, iterations: int) -> float:
    return median_seconds(fn, iterations) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--backend", default="inductor")
    args = parser.parse_args()
    started = time.perf_counter()
    guards.native.load()              # both cached on disk after the first run on a machine
    inductor.runtime.native.empty_strided()
    print(f"framejit's native libraries (built once per torch version, then loaded): "
          f"{time.perf_counter() - started:.1f} s")
    torch.manual_seed(0)
    model, positional, keywords = build(args.model)
    jitted = dynamo.jit(model, backend=args.backend)
    with torch.no_grad():
        start = time.perf_counter()
        expected = model(*positional, **keywords)
        got = jitted(*positional, **keywords)
        first_call = time.perf_counter() - start
        eager = median_ms(lambda: model(*positional, **keywords), args.iterations)
        compiled = median_ms(lambda: jitted(*positional, **keywords), args.iterations)
    same = all(torch.allclose(a, b, rtol=1e-3, atol=1e-3) for a, b in
               zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(got)))
    print(f"model {args.model}: first call (compile) {first_call:.2f} s; "
          f"eager {eager:.2f} ms, framejit {compiled:.2f} ms, speedup {eager / compiled:.2f}x; "
          f"results match eager: {same}")
    explain = getattr(dynamo, "explain", None)
    if explain is not None:
        with torch.no_grad():
            # explain() compiles again, with the demo's backend, so its compile-time line
            # times that backend (with its default, eager, the backend stage is ~0 ms)
            print(explain(model, backend=args.backend)(*positional, **keywords))


if __name__ == "__main__":
    main()
