"""The random FX-graph fuzzer for inductor (`python -m tests.fuzz.graphs`, docs/testing.md).

Stages, in the order a seed flows through them: `generator.py` (with the op families of
`ops_compute.py` and `ops_memory.py`) makes a `Program` (`program.py`), `check.py` compiles
it with `inductor.compile_fx` and compares calls with eager (`compare.py`), `driver.py` runs
seeds in worker processes, `minimize.py` shrinks a failing program and `repro.py` prints it
as a standalone script.
"""
