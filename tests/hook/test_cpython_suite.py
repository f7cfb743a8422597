"""CPython's own regression tests pass under `python -m dynamo nop-rewrite` exactly as without.

The modules and their counts on 3.11 and 3.12 are listed in docs/testing.md.
"""
import os
import re
import subprocess
import sys

import pytest

from dynamo import hook

REQUIRED = (
    "test_grammar test_scope test_generators test_exceptions test_contextlib test_with "
    "test_class test_keywordonlyarg test_unpack test_listcomps test_dict test_list "
    "test_funcattrs test_raise test_named_expressions test_patma"
).split()
"""The modules issue 2 names."""

EXTRA = (
    "test_super test_decorators test_dataclasses test_functools test_coroutines "
    "test_contextlib_async test_exception_group test_property test_itertools test_collections "
    "test_types test_positional_only_arg test_builtin test_iter test_syntax test_enum test_set"
).split()
"""More modules heavy on calls, closures, descriptors, coroutines and exceptions.

Left out on purpose: test_descr, whose test_slots counts `gc.get_objects()` around the first
calls of a new `__eq__`; the cache entry made on that first call adds objects (docs/testing.md).
"""

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))


def shipped(modules: list[str]) -> list[str]:
    """The test modules this interpreter ships (some distributions install only part of
    CPython's test package, e.g. the GPU machine's Python has no test.test_enum)."""
    import importlib.util
    return [name for name in modules if importlib.util.find_spec(f"test.{name}") is not None]


def run_regrtest(prefix: list[str], tmp_path) -> tuple[str, str]:
    """Run the modules under `python PREFIX test ...`; returns the totals line and the output."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), JIT_LOGS="hook")
    missing = [name for name in REQUIRED if name not in shipped(REQUIRED)]
    if missing:
        pytest.skip(f"this Python ships no {missing} (a partial test package)")
    process = subprocess.run([sys.executable, *prefix, "test", *REQUIRED, *shipped(EXTRA)],
                             cwd=tmp_path,
                             capture_output=True, text=True, env=env, timeout=900)
    output = process.stdout + process.stderr
    assert process.returncode == 0, output[-4000:]
    # "Total tests: run=N skipped=M" from 3.11.5 on; older releases only say "All N tests OK"
    counts = re.search(r"Total tests: (.*)", output) or re.search(r"All (\d+) tests OK", output)
    assert counts and re.search(r"result: SUCCESS", output, re.IGNORECASE), output[-2000:]
    return counts.group(1).strip(), output


def test_regression_tests_pass_identically_with_every_frame_rewritten(tmp_path):
    plain, _ = run_regrtest(["-m"], tmp_path)
    rewritten, output = run_regrtest(["-m", "dynamo", "nop-rewrite", "-m"], tmp_path)
    assert rewritten == plain, output[-2000:]
    if plain.startswith("run=") and len(shipped(EXTRA)) == len(EXTRA):  # test cases, not modules
        assert int(re.match(r"run=([\d,]+)", plain).group(1).replace(",", "")) > 3000, plain
    assert output.count("] nop-rewrite ") > 5000  # the test functions really were rewritten
