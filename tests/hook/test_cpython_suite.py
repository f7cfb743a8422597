"""CPython's own regression tests pass under `python -m dynamo nop-rewrite` exactly as without.

The modules and their counts on 3.11 and 3.12 are listed in docs/testing.md.
"""
import os
import re
import signal
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


def foreign_test_package() -> bool:
    """Whether `test` comes from another CPython than this interpreter's own standard library
    (the GPU machine's Python ships a partial package; a copy of another 3.12 release's
    Lib/test is put on PYTHONPATH there, and a few of its tests expect that release's
    standard library)."""
    import sysconfig
    import test
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    return not os.path.realpath(test.__file__).startswith(stdlib + os.sep)


def failed_modules(output: str) -> list[str]:
    """The modules regrtest lists under "N tests failed:" (or "1 test failed:")."""
    listed = re.search(r"\d+ tests? failed:\n((?:    .*\n)+)", output)
    return sorted(listed.group(1).split()) if listed else []


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_regrtest(prefix: list[str], tmp_path) -> tuple[int, str, list[str], str]:
    """Run the modules under `python PREFIX test ...`; returns the exit status, the totals
    line, the failed modules and the output."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), JIT_LOGS="hook")
    missing = [name for name in REQUIRED if name not in shipped(REQUIRED)]
    if missing:
        pytest.skip(f"this Python ships no {missing} (a partial test package)")
    # A background job (`command &` in a script) ignores SIGINT, and a child inherits that:
    # test_generators' test_raise_and_yield_from, which raises SIGINT, then failed with or
    # without the hook. The suite runs with SIGINT's default action, as from a terminal.
    process = subprocess.run([sys.executable, *prefix, "test", *REQUIRED, *shipped(EXTRA)],
                             cwd=tmp_path, preexec_fn=_default_sigint,
                             capture_output=True, text=True, env=env, timeout=900)
    output = process.stdout + process.stderr
    # "Total tests: run=N skipped=M" from 3.11.5 on; older releases only say "All N tests OK"
    counts = re.search(r"Total tests: (.*)", output) or re.search(r"All (\d+) tests OK", output)
    assert counts, output[-4000:]
    return process.returncode, counts.group(1).strip(), failed_modules(output), output


def test_regression_tests_pass_identically_with_every_frame_rewritten(tmp_path):
    status, plain, failed, plain_output = run_regrtest(["-m"], tmp_path)
    if status != 0 or failed:
        # Only a test package from another CPython release may fail without the hook (3.12.1's
        # tests on 3.12.3 expect 3.12.1's messages and behaviours in six modules); the
        # rewritten run must then fail identically: same modules, same totals.
        assert foreign_test_package() and failed, plain_output[-4000:]
    else:
        assert re.search(r"result: SUCCESS", plain_output, re.IGNORECASE), plain_output[-2000:]
    rewritten_status, rewritten, rewritten_failed, output = run_regrtest(
        ["-m", "dynamo", "nop-rewrite", "-m"], tmp_path)
    assert (rewritten_status, rewritten, rewritten_failed) == (status, plain, failed), \
        output[-4000:]
    if plain.startswith("run=") and len(shipped(EXTRA)) == len(EXTRA):  # test cases, not modules
        assert int(re.match(r"run=([\d,]+)", plain).group(1).replace(",", "")) > 3000, plain
    assert output.count("] nop-rewrite ") > 5000  # the test functions really were rewritten
