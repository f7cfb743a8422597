"""The debug dump (issue 24, "a user's day"): `dynamo.config.debug_dir` / `JIT_DEBUG_DIR`.

A program with a graph break (a print) and a recompile (a new constant argument), under both
backends: every artefact exists and holds what it should, the run's index.html links every
file and marks the break on the user's line with its reason and hint, the recompile with its
reason and inductor's fallbacks; results are eager's. Off, nothing is written; an unwritable
folder gives one warning and eager's results.
"""
import inspect
import os
import pathlib
import re
import subprocess
import sys
import warnings

import pytest
import torch

import dynamo
from dynamo.breaks import KINDS
from dynamo.debug import dump

ROOT = pathlib.Path(__file__).resolve().parents[2]
BACKENDS = ("eager", "inductor")


def program(x, n):
    y = torch.relu(x) * n
    print("between the graphs")
    return y.sum(0) + n


def break_line() -> int:
    lines, first = inspect.getsourcelines(program)
    return first + next(index for index, line in enumerate(lines) if "print(" in line)


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    dynamo.reset()
    monkeypatch.setattr(dump, "_state", {**dump._state, "run": None, "frame": None,
                                         "warned": False, "failed": None})
    yield
    dynamo.reset()


def run_program(backend) -> list:
    """Two calls (the second recompiles: n changed), each checked against eager."""
    jitted = dynamo.jit(program, backend=backend, dynamic=False)  # n: a constant, guarded
    results = []
    for n in (2, 3):
        x = torch.randn(4, 5)
        expected = program(x.clone(), n)
        got = jitted(x, n)
        torch.testing.assert_close(got, expected)
        assert got.dtype == expected.dtype and got.stride() == expected.stride()
        results.append(got)
    return results


def the_run(root: pathlib.Path) -> pathlib.Path:
    runs = [path for path in root.iterdir() if path.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def frames(run: pathlib.Path) -> list:
    return sorted(path for path in run.iterdir() if path.is_dir())


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_artefact_of_a_program_with_a_break_and_a_recompile(backend, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setattr(dynamo.config, "debug_dir", str(tmp_path))
    run_program(backend)
    run = the_run(tmp_path)
    dumped = frames(run)
    names = [path.name for path in dumped]
    assert names[0] == "000_program" and "001_program_resumed" in names, names
    first = dumped[0]
    where = f"{__file__}:{break_line()}"

    def read(frame, name):
        return (frame / name).read_text()

    assert "LOAD_GLOBAL" in read(first, "original.dis.txt")
    assert "print" in read(first, "original.dis.txt")
    rewritten = read(first, "rewritten.dis.txt")  # the replacement's own listing
    assert rewritten != read(first, "original.dis.txt")
    assert re.search(r"LOAD_CONST .*program_glue", rewritten), rewritten  # 3.11 and 3.12
    rendered = read(first, "rewritten.py.txt")
    assert "def program(x, n):" in rendered and "program_glue" in rendered
    assert "print('between the graphs')" in rendered
    assert "relu" in read(first, "graph.py")
    table = read(first, "graph_table.txt")
    assert "placeholder" in table and "relu" in table and "output" in table
    guards = read(first, "guards.txt")
    assert "L['x']" in guards and "Tensor(torch.float32" in guards and "L['n'] == 2" in guards
    assert "def check(L, G)" in guards
    timings = read(first, "timings.txt")
    assert re.search(r"dynamo trace: [\d.]+ ms", timings)
    assert re.search(r"dynamo backend: [\d.]+ ms", timings)
    breaks = read(first, "breaks.txt")
    assert "GB001" in breaks and where in breaks and 'print("between the graphs")' in breaks
    assert KINDS["GB001"].hint in breaks
    recompiled = [frame for frame in dumped if (frame / "recompile.txt").exists()]
    # any of them: under `python -m dynamo nop-rewrite` the first compile also records that
    # the code was compiled through another wrapper (the NOP driver's)
    assert any("L['n']" in read(frame, "recompile.txt") and
               "expected 2, got 3" in read(frame, "recompile.txt") for frame in recompiled), \
        recompiled
    if backend == "inductor":
        assert "Pointwise over" in read(first, "loop_ir.txt")
        assert "mul(" in read(first, "loop_ir.txt") and "load(arg0" in read(first, "loop_ir.txt")
        kernels = read(first, "kernels.txt")
        assert "# kernel kernel0" in kernels and "ComputedBuffer" in kernels
        assert "kernel0" in read(first, "kernels.cpp")
        assert re.search(r"inductor lower: [\d.]+ ms", read(first, "timings.txt"))
        assert re.search(r"inductor build: [\d.]+ ms", read(first, "timings.txt"))
    else:
        assert not any((frame / "loop_ir.txt").exists() for frame in dumped)
        assert not any((frame / "kernels.cpp").exists() for frame in dumped)
    check_index(run, dumped)


def check_index(run: pathlib.Path, dumped: list) -> None:
    index = (run / "index.html").read_text()
    links = re.findall(r"href='([^']+)'", index)
    for frame in dumped:
        for file in frame.iterdir():
            assert f"{frame.name}/{file.name}" in links, file
    assert all((run / link).is_file() for link in links)
    line = break_line()
    marked = re.search(rf"<span class='break' id='break-{line}'>.*?</span>"
                       rf"<span class='why'>(.*?)</span>", index, re.S)
    assert marked, "the print's line is not marked"
    assert "print(&quot;between the graphs&quot;)" in marked.group(0)
    assert "GB001" in marked.group(1) and "hint:" in marked.group(1)
    assert "id='break-" not in index.replace(f"id='break-{line}'", "")  # only that line
    recompiles = re.search(r"<ul id='recompiles'>(.*?)</ul>", index, re.S).group(1)
    assert "L[&#x27;n&#x27;]" in recompiles and "expected 2, got 3" in recompiles
    assert "Inductor fallbacks" in index and re.search(r"inductor fallback\(s\)", index)


@pytest.mark.expect_fallback("configured", reason="inductor.config.fallback_only: the "
                             "fallbacks the index must count")
def test_fallbacks_are_counted_in_the_index(tmp_path, monkeypatch):
    import inductor
    from inductor.runtime import fallbacks
    monkeypatch.setattr(dynamo.config, "debug_dir", str(tmp_path))
    monkeypatch.setattr(inductor.config, "fallback_only", True)
    run_program("inductor")
    index = (the_run(tmp_path) / "index.html").read_text()
    counted = re.search(r"(\d+) inductor fallback\(s\)", index)
    assert counted and int(counted.group(1)) >= 1
    assert "fallback_only is set" in index
    assert fallbacks.total() >= int(counted.group(1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_off_writes_nothing(backend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(dynamo.config, "debug_dir", "")
    run_program(backend)
    assert list(tmp_path.iterdir()) == []
    assert dump._state["run"] is None and dump._state["frame"] is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unwritable_folder_warns_once_and_changes_nothing(backend, tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(dynamo.config, "debug_dir", str(blocker / "dump"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_program(backend)
        run_program(backend)
    about_dump = [warning for warning in caught if "debug dump" in str(warning.message)]
    assert len(about_dump) == 1, [str(warning.message) for warning in caught]
    assert issubclass(about_dump[0].category, RuntimeWarning)
    assert str(blocker / "dump") in str(about_dump[0].message)


def test_a_dump_error_while_warnings_are_errors_never_reaches_the_program(tmp_path,
                                                                          monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setattr(dynamo.config, "debug_dir", str(blocker / "dump"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_program("eager")


def test_the_environment_variable_turns_it_on(tmp_path):
    script = ("import torch, dynamo\n"
              "f = dynamo.jit(lambda x: x.cos() + 1)\n"
              "print(f(torch.ones(3)).tolist())\n")
    environment = {**os.environ, "JIT_DEBUG_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str((torch.ones(3).cos() + 1).tolist())
    run = the_run(tmp_path)
    assert (run / "index.html").is_file()
    assert "cos" in (frames(run)[0] / "graph.py").read_text()


def test_breaks_met_by_an_earlier_compile_are_shown(tmp_path, monkeypatch):
    """`explain` first (dump off): the jitted call then halts at the stops it planned without
    meeting the break again; the dump still names it and marks its line."""
    report = dynamo.explain(program)(torch.randn(4, 5), 2)
    assert report.graph_break_count == 1
    monkeypatch.setattr(dynamo.config, "debug_dir", str(tmp_path))
    run_program("eager")
    run = the_run(tmp_path)
    first = frames(run)[0]
    breaks = (first / "breaks.txt").read_text()
    assert breaks.startswith("# met by an earlier compile") and "GB001" in breaks
    assert f"id='break-{break_line()}'" in (run / "index.html").read_text()


def test_triton_kernels_are_dumped(tmp_path, monkeypatch):
    """The Triton path (run on CPU by Triton's interpreter): its source and loop IR."""
    pytest.importorskip("triton")
    import inductor
    monkeypatch.setattr(inductor.config, "cpu_backend", "triton")
    monkeypatch.setattr(dynamo.config, "debug_dir", str(tmp_path))
    jitted = dynamo.jit(lambda x: (x.sin() * 2).sum(-1), backend="inductor")
    x = torch.randn(8, 16)
    torch.testing.assert_close(jitted(x), (x.sin() * 2).sum(-1))
    first = frames(the_run(tmp_path))[0]
    assert "@triton.jit" in (first / "kernels_triton.py").read_text()
    assert not (first / "kernels.cpp").exists()
    assert "Reduction sum over" in (first / "kernels.txt").read_text()
    assert re.search(r"inductor build: [\d.]+ ms", (first / "timings.txt").read_text())


def test_training_graphs_forward_and_backward_are_dumped(tmp_path, monkeypatch):
    """A training step under inductor: the forward's and the backward's loop IR are dumped
    (in the frame's folder when compiled with it, else in a `_graph_compiled_later` one),
    and the gradients are eager's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    reference = __import__("copy").deepcopy(model)
    x, y = torch.randn(16, 4), torch.randn(16, 1)

    def step(net, x, y):
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        return loss

    monkeypatch.setattr(dynamo.config, "debug_dir", str(tmp_path))
    got = dynamo.jit(step, backend="inductor")(model, x, y)
    expected = step(reference, x, y)
    torch.testing.assert_close(got, expected)
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad)
    texts = [(frame / "loop_ir.txt").read_text() for frame in frames(the_run(tmp_path))
             if (frame / "loop_ir.txt").exists()]
    graphs = sum(max(1, text.count("# ---- graph ")) for text in texts)
    assert graphs >= 2, texts


def test_a_graph_compiled_outside_a_frame_compile_gets_its_own_folder(tmp_path, monkeypatch):
    """inductor compiling while no frame compiles (a backward at its first backward call, a
    size variant at a new size; here a direct compile_fx): `<n>_graph_compiled_later/`
    holds its loop IR, kernels and timings, linked from the index."""
    import inductor
    monkeypatch.setattr(dynamo.config, "debug_dir", str(tmp_path))
    run_program("inductor")
    graph = torch.fx.symbolic_trace(lambda a: (a * 3).cos())
    a = torch.randn(6)
    result = inductor.compile_fx(graph, [a])(a)
    torch.testing.assert_close(result, (a * 3).cos())
    run = the_run(tmp_path)
    later = [frame for frame in frames(run) if frame.name.endswith("_graph_compiled_later")]
    assert len(later) == 1, [frame.name for frame in frames(run)]
    assert "cos" in (later[0] / "loop_ir.txt").read_text()
    assert "kernel0" in (later[0] / "kernels.cpp").read_text()
    assert re.search(r"inductor lower: [\d.]+ ms", (later[0] / "timings.txt").read_text())
    assert f"href='{later[0].name}/loop_ir.txt'" in (run / "index.html").read_text()
