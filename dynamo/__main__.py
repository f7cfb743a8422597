"""`python -m dynamo nop-rewrite (-m MODULE | SCRIPT.py) [ARGS...]`.

Runs a module or script with every intercepted function frame (main thread) sent through
decode -> insert NOPs -> assemble -> cache: a self-test that the hook and the assembler are
transparent. The exit status is the program's.
"""
from __future__ import annotations

import runpy
import sys

USAGE = "usage: python -m dynamo nop-rewrite (-m MODULE | SCRIPT.py) [ARGS...]"


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


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "nop-rewrite":
        sys.exit(USAGE)
    _run(argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
