"""`python -m dynamo minify`: planted backend bugs are found, shrunk and reproduced standalone.

Each test writes a script that uses `dynamo.jit` with a planted bug (a backend that computes
`sub` as `add` after a `mul`, one that cannot compile `cos`, inductor with a lowering that
raises) in one graph of several functions with graph breaks. The minifier runs in this
process; the repro it writes runs in a new one, and must show the failure (exit status 1)
with a graph of a bounded number of nodes; the same graph through eager (the bug removed)
must not.
"""
import os
import pathlib
import runpy
import subprocess
import sys
import textwrap

import pytest
import torch

import dynamo
from dynamo.minify import command

ROOT = pathlib.Path(__file__).resolve().parents[2]

PLANTED = '''
"""Planted backend bugs (module level, so a repro can import them)."""
import operator

import torch


def miscompiles_sub(gm, example_inputs):
    """Computes `sub` as `add` when a `mul` comes before it in the graph."""
    seen_mul = False
    for node in gm.graph.nodes:
        if node.target in (operator.mul, torch.mul):
            seen_mul = True
        elif node.target in (operator.sub, torch.sub) and seen_mul:
            node.target = operator.add
    gm.recompile()
    return gm.forward


def raises_on_cos(gm, example_inputs):
    """Cannot compile a graph that calls cos."""
    if any(node.target in (torch.cos, "cos") for node in gm.graph.nodes):
        raise NotImplementedError("planted: no cos")
    return gm.forward


def raises_when_run_after_relu(gm, example_inputs):
    """Compiles, but the compiled graph raises when it runs a relu followed by a sum."""
    names = [getattr(node.target, "__name__", node.target) for node in gm.graph.nodes]
    if "relu" in names and "sum" in names[names.index("relu"):]:
        def run(*args):
            raise FloatingPointError("planted: relu then sum")
        return run
    return gm.forward


def drops_writes(gm, example_inputs):
    """Runs in-place tensor methods out of place: the writes into inputs are lost."""
    for node in gm.graph.nodes:
        if node.op == "call_method" and node.target in ("add_", "mul_"):
            node.target = node.target[:-1]
    gm.recompile()
    return gm.forward


def wrong_when_inputs_alias(gm, example_inputs):
    """Adds one to every output when two tensor inputs share a storage."""
    def run(*args):
        tensors = [value for value in args if isinstance(value, torch.Tensor)]
        shared = len({value.untyped_storage().data_ptr() for value in tensors}) < len(tensors)
        outputs = gm(*args)
        return tuple(output + 1 for output in outputs) if shared else outputs
    return run


def correct(gm, example_inputs):
    return gm.forward


def inductor_failing_on_mul(gm, example_inputs):
    """inductor, its lowering made to raise on aten.mul.Tensor while it compiles: inductor
    records an `error` fallback and runs the graph through eager kernels."""
    import inductor
    from inductor.lower.graph import GraphLowering

    original = GraphLowering.call_function

    def broken(self, target, args, kwargs):
        if target is torch.ops.aten.mul.Tensor:
            raise RuntimeError("planted lowering bug: mul")
        return original(self, target, args, kwargs)
    GraphLowering.call_function = broken
    try:
        return inductor.compile_fx(gm, example_inputs)
    finally:
        GraphLowering.call_function = original
'''

SCRIPT = '''
import os
import sys

import torch

import dynamo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import planted_minify_backends as planted

BACKEND = getattr(planted, "{backend}")


@dynamo.jit(backend=BACKEND)
def first(x, y):
    return torch.relu(x) + y.sum()


@dynamo.jit(backend=BACKEND)
def second(x, w, b):
    h = torch.sin(x) @ w
    print("a graph break")
    g = torch.tanh(h) * 3.0
    e = torch.exp(g).mean(dim=-1, keepdim=True)
    return (g - b).abs() + e, h.shape[0]


@dynamo.jit(backend=BACKEND)
def third(x):
    y = torch.relu(x) + 1
    print("another graph break")
    return (torch.cos(y) * y.sum() - torch.sigmoid(y)).mean(dim=0)


if __name__ == "__main__":
    torch.manual_seed(0)
    x, w, b = torch.randn(8, 6), torch.randn(6, 5), torch.randn(5)
    print(first(x, x).shape, second(x, w, b)[1], third(x).shape)
    {tail}
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("minify")
    (path / "planted_minify_backends.py").write_text(PLANTED)
    return path


def write_script(folder, name, backend, tail=""):
    path = folder / f"{name}.py"
    path.write_text(SCRIPT.format(backend=backend, tail=tail))
    return path


def minify(script, *options):
    dynamo.reset()
    return command.main([str(script), *options])


def run_repro(path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          env=env, timeout=600)


def repro_graph(path) -> torch.fx.GraphModule:
    namespace = runpy.run_path(str(path), run_name="not_main")
    return torch.fx.symbolic_trace(namespace["Repro"]())


def compute_targets(gm):
    return [getattr(node.target, "__name__", str(node.target)) for node in gm.graph.nodes
            if node.op in ("call_function", "call_method")]


def check_with(path, backend_name, folder):
    """The repro's graph and inputs, through another of the planted backends."""
    namespace = runpy.run_path(str(path), run_name="not_main")
    sys.path.insert(0, str(folder))
    try:
        import planted_minify_backends
    finally:
        sys.path.remove(str(folder))
    gm = torch.fx.symbolic_trace(namespace["Repro"]())
    backend = getattr(planted_minify_backends, backend_name)
    return namespace["check_graph"](gm, namespace["make_inputs"](), backend)


def test_a_miscompiled_sub_shrinks_to_the_mul_and_sub(folder, capsys):
    script = write_script(folder, "sub_script", "miscompiles_sub")
    out = folder / "repro_sub.py"
    assert minify(script, "--out", str(out), "--no-verify") == 0
    printed = capsys.readouterr().out
    assert "second graph 1 fails" in printed, printed
    assert "also failing (not minimized): third graph 1" in printed, printed
    targets = compute_targets(repro_graph(out))
    assert sorted(targets) == ["mul", "sub"], targets
    assert check_with(out, "correct", folder) is None  # the bug, not the graph, fails
    result = run_repro(out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "reproduced (the failure minimized): mismatch" in result.stdout


def test_another_failing_graph_is_chosen_by_its_label(folder, capsys):
    script = write_script(folder, "sub_script_third", "miscompiles_sub")
    out = folder / "repro_sub_third.py"
    assert minify(script, "--graph", "third graph 1", "--out", str(out), "--no-verify") == 0
    printed = capsys.readouterr().out
    assert "third graph 1 fails" in printed and "also failing (not minimized): second graph 1" \
        in printed, printed
    assert sorted(compute_targets(repro_graph(out))) == ["mul", "sub"]
    assert check_with(out, "miscompiles_sub", folder).signature == "mismatch"
    assert minify(script, "--graph", "first graph 0", "--no-verify") == 2
    assert "no failing graph is labelled 'first graph 0'" in capsys.readouterr().out


def test_a_backend_raising_on_cos_shrinks_to_the_cos(folder, capsys):
    script = write_script(folder, "cos_script", "raises_on_cos")
    out = folder / "repro_cos.py"
    assert minify(script, "--out", str(out), "--check", "error", "--no-verify") == 0
    assert "third graph 1 fails" in capsys.readouterr().out
    gm = repro_graph(out)
    assert compute_targets(gm) == ["cos"]
    assert check_with(out, "correct", folder) is None
    result = run_repro(out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "reproduced (the failure minimized): error" in result.stdout
    assert "NotImplementedError: planted: no cos" in result.stdout


@pytest.mark.expect_fallback("error", reason="the planted lowering bug is the subject")
def test_an_inductor_error_fallback_is_a_failure(folder, capsys):
    script = write_script(folder, "inductor_script", "inductor_failing_on_mul")
    out = folder / "repro_inductor.py"
    assert minify(script, "--out", str(out), "--check", "error", "--no-verify") == 0
    printed = capsys.readouterr().out
    assert "inductor gave the graph up with a compiler error" in printed, printed
    targets = compute_targets(repro_graph(out))
    assert "mul" in targets and len(targets) <= 2, targets
    result = run_repro(out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "planted lowering bug: mul" in result.stdout


def test_a_graph_raising_when_it_runs_ends_the_script_and_is_shrunk(folder, capsys):
    script = write_script(folder, "run_error_script", "raises_when_run_after_relu")
    out = folder / "repro_run_error.py"
    assert minify(script, "--out", str(out), "--no-verify") == 0
    printed = capsys.readouterr().out
    assert "the jitted run ended with FloatingPointError" in printed, printed
    assert "first graph 0 fails" in printed, printed
    assert sorted(compute_targets(repro_graph(out))) == ["add", "relu", "sum"]  # both live
    failure = check_with(out, "raises_when_run_after_relu", folder)
    assert failure.signature == "error:FloatingPointError", failure
    assert check_with(out, "correct", folder) is None


MUTATING = '''
import os
import sys

import torch

import dynamo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import planted_minify_backends as planted


@dynamo.jit(backend=planted.drops_writes)
def update(state, x):
    y = torch.tanh(x) * 2
    state.add_(y)
    return y.sum() + 1


if __name__ == "__main__":
    state = torch.zeros(4, 3)
    for _ in range(2):
        update(state, torch.randn(4, 3))
'''


def test_a_lost_write_into_an_input_is_a_mismatch(folder, capsys):
    script = folder / "mutating_script.py"
    script.write_text(MUTATING)
    out = folder / "repro_mutating.py"
    assert minify(script, "--out", str(out), "--no-verify") == 0
    assert "update graph 0 fails: input (after the call) 1" in capsys.readouterr().out
    assert compute_targets(repro_graph(out)) == ["add_"]
    assert check_with(out, "drops_writes", folder).signature == "mismatch"
    assert check_with(out, "correct", folder) is None


COUNTING = '''
import torch

import dynamo

calls = 0


@dynamo.jit(backend="eager")
def counted(x):
    global calls
    calls += 1
    return x + calls


if __name__ == "__main__":
    counted(torch.ones(3))
'''


def test_a_call_differing_from_its_eager_rerun_with_no_failing_graph(folder, capsys):
    """The call-level check: no graph differs, the jitted call's result does (here because
    the eager rerun bumps the counter a second time: the caveat the message names)."""
    script = folder / "counting_script.py"
    script.write_text(COUNTING)
    assert minify(script, "--out", str(folder / "unused.py")) == 1
    printed = capsys.readouterr().out
    assert "1 graph(s) compiled, 0 failing" in printed, printed
    assert "counted: output 0: values differ" in printed, printed
    assert "the difference is in capture, not in a backend" in printed
    assert "changed a second time" in printed
    assert not (folder / "unused.py").exists()


ALIASING = '''
import os
import sys

import torch

import dynamo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import planted_minify_backends as planted


@dynamo.jit(backend=planted.wrong_when_inputs_alias)
def halves(a, b):
    return torch.tanh(a) * 2 + b.sum()


if __name__ == "__main__":
    base = torch.randn(10)
    halves(base[:5], base[5:])
    halves(torch.randn(5), torch.randn(5))
'''


def test_inputs_sharing_a_storage_share_it_in_the_repro(folder, capsys):
    script = folder / "aliasing_script.py"
    script.write_text(ALIASING)
    out = folder / "repro_aliasing.py"
    assert minify(script, "--out", str(out), "--no-verify") == 0
    assert "halves graph 0 fails" in capsys.readouterr().out
    namespace = runpy.run_path(str(out), run_name="not_main")
    first, second = namespace["make_inputs"]()
    assert first.untyped_storage().data_ptr() == second.untyped_storage().data_ptr()
    assert check_with(out, "wrong_when_inputs_alias", folder).signature == "mismatch"
    assert check_with(out, "correct", folder) is None


CAPTURE_ERROR = '''
import torch

import dynamo
import dynamo.driver

compile_frame = dynamo.driver.compile_frame


def planted_compile_frame(view, driver, reason):
    if view.f_code.co_name == "broken":
        raise RuntimeError("planted capture bug")
    return compile_frame(view, driver, reason)


dynamo.driver.compile_frame = planted_compile_frame


@dynamo.jit(backend="eager")
def broken(x):
    return x * 2


@dynamo.jit(backend="eager")
def fine(x):
    return x + 1


if __name__ == "__main__":
    suppress_errors = dynamo.config.suppress_errors
    dynamo.config.suppress_errors = True  # as for users (the test suite raises instead)
    try:
        print(broken(torch.ones(2)), fine(torch.ones(2)))
    finally:
        dynamo.driver.compile_frame = compile_frame
        dynamo.config.suppress_errors = suppress_errors
'''


def test_an_internal_capture_error_is_reported_at_frame_level(folder, capsys):
    script = folder / "capture_error_script.py"
    script.write_text(CAPTURE_ERROR)
    with pytest.warns(RuntimeWarning, match="internal error while compiling broken"):
        assert minify(script, "--out", str(folder / "unused.py")) == 1
    printed = capsys.readouterr().out
    assert "1 graph(s) compiled, 0 failing" in printed, printed
    assert "internal error while compiling broken" in printed
    assert "RuntimeError: planted capture bug" in printed
    assert "framejit's capture failed on a frame" in printed
    assert not (folder / "unused.py").exists()


def test_a_mismatch_is_not_an_error(folder, capsys):
    script = write_script(folder, "sub_script_errors_only", "miscompiles_sub")
    assert minify(script, "--out", str(folder / "unused.py"), "--check", "error") == 0
    assert "nothing to minify" in capsys.readouterr().out
    assert not (folder / "unused.py").exists()


def test_the_backend_option_replaces_each_jit_calls_backend(folder, capsys):
    script = write_script(folder, "sub_script_as_eager", "miscompiles_sub")
    assert minify(script, "--backend", "eager", "--out", str(folder / "unused.py")) == 0
    assert "nothing to minify" in capsys.readouterr().out


def test_a_script_that_fails_eagerly_too_has_nothing_to_minify(folder, capsys):
    script = write_script(folder, "own_error", "correct",
                          tail='raise ValueError("the program\'s own bug")')
    assert minify(script, "--out", str(folder / "unused.py"), "--no-verify") == 0
    printed = capsys.readouterr().out
    assert "raises ValueError without jit too: nothing to minify" in printed, printed


def test_the_command_line_says_nothing_to_minify(folder):
    script = write_script(folder, "fine_script", "correct")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "dynamo", "minify", str(script), "--out",
                             str(folder / "unused.py")], capture_output=True, text=True,
                            env=env, cwd=str(folder), timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nothing to minify" in result.stdout
    assert "3 graph(s)" not in result.stdout or "0 failing" in result.stdout
    assert not (folder / "unused.py").exists()


def test_script_arguments_follow_a_double_dash(folder, capsys):
    script = folder / "arguments.py"
    script.write_text(textwrap.dedent('''
        import sys
        assert sys.argv[1:] == ["--flag", "value"], sys.argv
    '''))
    assert minify(script, "--no-verify", "--", "--flag", "value") == 0
    assert "nothing to minify" in capsys.readouterr().out
