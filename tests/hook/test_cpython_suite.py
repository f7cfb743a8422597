"""CPython's own regression tests pass under `python -m dynamo nop-rewrite` exactly as without."""
import os
import re
import subprocess
import sys

import pytest

from dynamo import hook

MODULES = (
    "test_grammar test_scope test_generators test_exceptions test_contextlib test_with "
    "test_class test_keywordonlyarg test_unpack test_listcomps test_dict test_list "
    "test_funcattrs test_raise test_named_expressions test_patma"
).split()

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))


def run_regrtest(prefix: list[str], tmp_path) -> tuple[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), JIT_LOGS="hook")
    process = subprocess.run([sys.executable, *prefix, "test", *MODULES], cwd=tmp_path,
                             capture_output=True, text=True, env=env, timeout=900)
    output = process.stdout + process.stderr
    assert process.returncode == 0, output[-4000:]
    counts = re.search(r"Total tests: (.*)", output) or re.search(r"All (\d+) tests OK", output)
    assert counts, output[-2000:]
    return counts.group(1).strip(), output


def test_regression_tests_pass_identically_with_every_frame_rewritten(tmp_path):
    plain, _ = run_regrtest(["-m"], tmp_path)
    rewritten, output = run_regrtest(["-m", "dynamo", "nop-rewrite", "-m"], tmp_path)
    assert rewritten == plain, output[-2000:]
    assert output.count("] nop-rewrite ") > 2000  # the test functions really were rewritten
