"""The model zoo benchmark: real torchvision and transformers models, random weights, no downloads.

Stages, in data-flow order:

- `catalog` (with `vision` and `text`): a model name, device, dtype and batch size ->
  a `Workload` (model, example args/kwargs, how to compute a training loss);
- `worker`: one job (model, mode, compiler, ...) in its own process -> one result row
  (accuracy against an fp64 eager reference, cold compile time, warm time per iteration from
  interleaved eager/compiled trials, graphs/breaks/recompiles, peak memory);
- `runner`: a suite of jobs -> JSON lines, one subprocess per job with a timeout, resumable,
  with a plain-text progress bar;
- `report` (with `plots`): JSON lines -> `docs/benchmarks.md` with tables and PNG plots.

Run the CPU suite: `python -m benchmarks.zoo run --suite cpu`, then
`python -m benchmarks.zoo report`. See `benchmarks/README.md` and `docs/benchmarks.md`.
"""
