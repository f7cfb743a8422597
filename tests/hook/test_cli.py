"""`python -m dynamo nop-rewrite`: the module and script forms, arguments and exit status."""
import os
import subprocess
import sys
import textwrap

import pytest

from dynamo import hook

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))

SCRIPT = textwrap.dedent("""
    import sys

    def scale(values, factor=2, *rest, offset=0, **named):
        cells = [lambda v=v: v * factor + offset for v in values]
        return [cell() for cell in cells], rest, named

    def fails():
        raise ValueError("from the script")

    print(sys.argv[1:], scale([1, 2], 3, 4, offset=1, tag="t"))
    try:
        fails()
    except ValueError as error:
        print("caught", error, error.__traceback__.tb_next.tb_lineno)
    sys.exit(int(sys.argv[1]))
""")


def run(*arguments, **env):
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True,
                          env=environment, timeout=120)


def test_script_form_matches_plain_run_and_keeps_exit_status(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(SCRIPT)
    plain = run(str(script), "3", "extra")
    rewritten = run("-m", "dynamo", "nop-rewrite", str(script), "3", "extra", JIT_LOGS="hook")
    assert (rewritten.returncode, rewritten.stdout) == (plain.returncode, plain.stdout)
    assert plain.returncode == 3 and "['3', 'extra']" in plain.stdout
    assert "nop-rewrite scale" in rewritten.stderr and "nop-rewrite fails" in rewritten.stderr


def test_module_form_passes_arguments(tmp_path):
    (tmp_path / "program_module.py").write_text(SCRIPT)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    plain = subprocess.run([sys.executable, "-m", "program_module", "0", "x"], env=env,
                           capture_output=True, text=True, timeout=120)
    rewritten = run("-m", "dynamo", "nop-rewrite", "-m", "program_module", "0", "x",
                    JIT_LOGS="hook", PYTHONPATH=env["PYTHONPATH"])
    assert rewritten.returncode == plain.returncode == 0, rewritten.stderr
    assert rewritten.stdout == plain.stdout
    assert "nop-rewrite scale" in rewritten.stderr


@pytest.mark.parametrize("arguments", [[], ["run"], ["nop-rewrite"], ["nop-rewrite", "-m"]])
def test_usage_errors(arguments):
    result = run("-m", "dynamo", *arguments)
    assert result.returncode != 0 and "usage: python -m dynamo nop-rewrite" in result.stderr
