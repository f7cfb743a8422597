"""Dynamic-shapes benchmarks (issue 23): how many compiles a program needs when its sizes
change, what those compiles cost, and what a dynamic (symbolic-size) entry costs per call.

    PYTHONPATH=. .venv/bin/python -m benchmarks.dynamic --quick          # CPU smoke, minutes
    PYTHONPATH=. python -m benchmarks.dynamic --device cuda              # the H100

Parts, in the order `__main__` runs them:
- `sweep`: a pointwise+reduction function and small models called with 20 batch sizes
  (2..256) under framejit `dynamic=False/None/True` and torch.compile `dynamic=None/True`;
- `decode`: greedy decoding with a growing KV cache (a minimal GPT-2 written here, and the
  zoo's transformers GPT-2 and Llama when transformers is installed), 256 new tokens;
- `bert`: the zoo's BERT with sequence lengths 8..512.

Modules, in data-flow order: `subjects` (what is called and with which inputs; models come
from the zoo's catalog, the few this benchmark adds are registered there under `dynamic/`),
`variants` (compiled callables and their compile counts), `sizes` (one subject over a list
of sizes: first calls, eager checks, interleaved timing), `sweep`, `decode`, `bert` (the
parts), `report` (JSON -> markdown table + plot), `__main__` (the command line).
"""
