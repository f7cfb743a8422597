"""Bisects JIT_FALLBACK_OPS for the smallest op set whose ATen fallback makes
diag_training pass (GPU diagnosis)."""
import os
import subprocess
import sys

ARGS = sys.argv[1:] or ["bert", "inductor", "64", "amp"]


def trial(fallback):
    environ = dict(os.environ, JIT_FALLBACK_OPS=",".join(fallback), DIAG_OPS="1",
                   JIT_AUTOTUNE="0")
    out = subprocess.run([sys.executable, "-m", "benchmarks.triton.diag_training", *ARGS],
                         env=environ, capture_output=True, text=True, timeout=150).stdout
    result = next((line for line in out.splitlines() if line.startswith("RESULT")), "")
    ops = next((line[4:].split(",") for line in out.splitlines() if line.startswith("OPS ")),
               [])
    passed = " bad 0/" in result
    print(f"fallback {len(fallback)} ops {fallback if len(fallback) < 6 else ''}: {result}",
          flush=True)
    if not passed:
        print("\n".join(line for line in out.splitlines() if line.startswith("    ")))
    return passed, ops


def main():
    passed, ops = trial([])
    candidates = sorted(op for op in ops if op)
    print("ops:", candidates, flush=True)
    while len(candidates) > 1:
        half = len(candidates) // 2
        first, second = candidates[:half], candidates[half:]
        if trial(first)[0]:
            candidates = first
        elif trial(second)[0]:
            candidates = second
        else:
            print("needs ops from both halves:", first, second)
            return
    print("CULPRIT", candidates, flush=True)


if __name__ == "__main__":
    main()
