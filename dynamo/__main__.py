"""`python -m dynamo nop-rewrite (-m MODULE | SCRIPT.py) [ARGS...]`, `python -m dynamo build`
and `python -m dynamo minify SCRIPT.py [options]`.

`nop-rewrite` runs a module or script with every intercepted function frame (main thread) sent
through decode -> insert NOPs -> assemble -> cache: a self-test that the hook and the assembler
are transparent. The exit status is the program's.

`build` builds framejit's native helpers that need the installed torch (the guard matcher and
inductor's allocation helpers; `guards/native/build.py`) now, two compiler processes at once,
instead of at the first jitted call; it prints where each library lives (exit status 1 when
one cannot be built, with the reason).

`minify` runs a script that uses `dynamo.jit`, finds the graph a backend fails on or computes
differently from eager, shrinks it and writes a standalone repro (`dynamo/minify/`;
`python -m dynamo minify --help` lists the options).
"""
from __future__ import annotations

import runpy
import sys

USAGE = ("usage: python -m dynamo nop-rewrite (-m MODULE | SCRIPT.py) [ARGS...]\n"
         "       python -m dynamo build\n"
         "       python -m dynamo minify SCRIPT.py [--backend NAME] [--out repro.py] "
         "[--check mismatch|error|any] [-- ARGS...]")


def _run(target: list[str]) -> None:
    from dynamo import hook
    from dynamo.rewrite import NopRewriteDriver

    if not hook.SUPPORTED:
        sys.exit(f"framejit: {hook.unsupported_reason()}")
    driver = NopRewriteDriver()
    if target[0] == "-m":
        if len(target) < 2:
            sys.exit(USAGE)
        sys.argv = target[1:]
        runner = lambda: runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = target
        runner = lambda: runpy.run_path(target[0], run_name="__main__")
    previous = hook.set_callback(driver)
    try:
        runner()
    finally:
        hook.set_callback(previous)


def _build() -> None:
    import guards.native  # noqa: F401  (each registers its helper)
    import inductor.runtime.native  # noqa: F401
    from guards.native import build

    sys.exit(build.main())


def _minify(argv: list[str]) -> None:
    from dynamo.minify.command import main as minify  # imports torch: only when asked for

    sys.exit(minify(argv))


def main(argv: list[str]) -> None:
    if argv == ["build"]:
        _build()
    if argv[:1] == ["minify"]:
        _minify(argv[1:])
    if len(argv) < 2 or argv[0] != "nop-rewrite":
        sys.exit(USAGE)
    _run(argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
