"""framejit's differential program fuzzer.

Random, valid Python + torch programs (`generator`, built from the grammar in `constructs`)
run eagerly and through `dynamo.jit` (or torch.compile as a comparator) call by call, and
every observable difference is a failure (`execution`, `compare`); a failing seed shrinks to a
short standalone repro (`minimize`, `repro`). `python -m tests.fuzz --help` runs it;
docs/testing.md ("Fuzzers") describes it.

`tests/fuzz/graphs/` is a separate fuzzer (FX graphs straight into inductor).
"""
