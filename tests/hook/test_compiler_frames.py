"""Compilers run with capture off: the hook never hands their frames, or their callees', to a
callback (issue 24, item 1; docs/architecture.md, "Compilers run with capture off").

The mechanism (torch-free): a process-wide disable filter names code objects once; their
frames, fresh or resumed, and everything they call run with capture off. The policy
(`dynamo.skips.is_compiler`) on a real case: the backward that inductor compiles lazily when
the autograd engine first runs it, from `loss.backward()` inside a jitted training step, with
the jit's callback installed on the thread. No frame of framejit's compilers, sympy, tqdm or
torch's compile machinery reaches the callback, and none is captured. A control run in a
subprocess, without the filter, shows the same step handing such frames to the callback.
"""
import os
import subprocess
import sys
import textwrap
import traceback

import pytest

from dynamo import _C, hook
from tests.hook.conftest import Recorder

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def plain(x):
    return x + 1


@pytest.fixture
def disable_filter():
    """set(filter) installs a disable filter for the rest of the test; the previous one
    (dynamo.skips' where it is loaded) comes back after."""
    previous = _C.set_disable_filter(None)
    yield _C.set_disable_filter
    _C.set_disable_filter(previous)


def test_code_the_filter_names_runs_with_capture_off_with_its_callees(install, disable_filter):
    def compiler(x):
        return plain(x) + plain(x)

    asked = []

    def is_compiler(code):
        asked.append(code.co_name)
        return code is compiler.__code__

    disable_filter(is_compiler)
    recorder = Recorder()
    before = hook.counters()["disabled_runs"]
    install(recorder)
    assert compiler(1) == 4
    assert compiler(2) == 6
    assert plain(3) == 4
    install(None)
    assert recorder.names == ["plain"]  # the call outside the compiler only
    assert hook.counters()["disabled_runs"] - before == 2
    assert asked.count("compiler") == 1, "a code object is classified once"


def test_a_resumed_generator_of_disabled_code_stays_capture_off(install, disable_filter):
    def compiler_steps():
        yield plain(1)
        yield plain(2)

    disable_filter(lambda code: code is compiler_steps.__code__)
    steps = compiler_steps()
    recorder = Recorder()
    install(recorder)
    assert next(steps) == 2
    assert next(steps) == 3
    install(None)
    assert recorder.names == []


def test_a_filter_that_raises_is_reported_and_the_frame_is_captured(install, disable_filter,
                                                                   monkeypatch):
    def user(x):   # a code object no filter has classified yet
        return x * 2

    def broken(code):
        raise ValueError("filter bug")

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    disable_filter(broken)
    recorder = Recorder()
    install(recorder)
    assert user(1) == 2
    install(None)
    # frames of this file only: reporting the error fires an audit event, and an audit hook
    # some library installed (filelock's fork-safety audit) is a frame the filter raises on too
    assert [view.f_code.co_name for view in recorder.views
            if view.f_code.co_filename == __file__] == ["user"]
    assert reported and isinstance(reported[0].exc_value, ValueError)


def test_marks_of_a_filter_do_not_outlive_it(install, disable_filter, monkeypatch):
    """A code object answered for by one filter is asked again once another is set: a
    test's filter (or one that raised) must not leave the real filter's verdict unasked
    (on the H200, filelock's audit hook answered "no" by a raising filter was captured by
    a jitted step later in the same process)."""
    def compiler(x):
        return plain(x)

    monkeypatch.setattr(sys, "unraisablehook", [].append)   # a C callable: no frame

    def broken(code):
        raise ValueError("filter bug")
    disable_filter(broken)
    recorder = Recorder()
    install(recorder)
    compiler(1)                                  # the raising filter: captured
    disable_filter(lambda code: code is compiler.__code__)
    compiler(1)                                  # the new filter marks it: capture off
    disable_filter(None)
    install(None)
    install(recorder)
    compiler(1)                                  # no filter: the old mark is gone
    install(None)
    ours = [view.f_code.co_name for view in recorder.views
            if view.f_code.co_filename == __file__]
    assert ours == ["compiler", "plain", "compiler", "plain"]


def test_a_throw_into_a_generator_reaches_it_with_its_exception(install, disable_filter):
    """A throw carries its exception in the thread state: the hook runs no filter then."""
    def steps():
        try:
            yield 1
        except KeyError as error:
            yield ("caught", error.args)

    started = steps()
    assert next(started) == 1   # started with no callback: its code is not classified yet
    asked = []
    disable_filter(lambda code: asked.append(code.co_name) and False)
    install(Recorder())
    assert started.throw(KeyError("k")) == ("caught", ("k",))
    install(None)
    assert "steps" not in asked


def test_unmarking_a_code_object_asks_the_filter_again(install, disable_filter):
    def compiler(x):
        return plain(x)

    answers = iter([True, False])
    disable_filter(lambda code: next(answers) if code is compiler.__code__ else False)
    recorder = Recorder()
    install(recorder)
    compiler(1)
    install(None)
    hook.mark_skip(compiler.__code__, False)
    install(recorder)
    compiler(1)
    install(None)
    assert recorder.names == ["compiler", "plain"]


# ---- the policy, on the lazy backward compile inside a jitted training step -------------

def _is_compiler_file(filename: str) -> bool:
    """Files no callback may ever see while a compiler runs: framejit's own packages (its
    generated code included), sympy, tqdm, torch's compile machinery, dataclasses' generated
    `__init__`s and `_weakrefset`."""
    own = tuple(os.path.join(ROOT, name) + os.sep for name in ("dynamo", "guards", "inductor"))
    torch_machinery = ("/torch/_dynamo/", "/torch/_inductor/", "/torch/_functorch/",
                       "/torch/fx/experimental/", "/torch/_subclasses/", "/torch/_decomp/",
                       "/torch/_refs/", "/torch/_prims", "/torch/utils/_sympy/")
    return (filename.startswith(own) or filename.startswith(("<framejit", "<string>"))
            or any(part in filename for part in ("/sympy/", "/tqdm/", "_weakrefset.py",
                                                 "/dataclasses.py") + torch_machinery))


@pytest.mark.parametrize("ahead_of_time", [False, True], ids=["lazy", "ahead_of_time"])
def test_the_lazy_backward_compile_in_a_jitted_step_hands_no_frame_to_capture(monkeypatch,
                                                                              ahead_of_time):
    """The backward compile, lazy (inside `loss.backward()`) or ahead of time (with the
    forward, inside the jitted call: `inductor.config.backward_ahead_of_time`)."""
    torch = pytest.importorskip("torch")
    import copy

    import dynamo
    import inductor
    from dynamo import driver
    from inductor.autograd import runtime

    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    monkeypatch.setattr(inductor.config, "backward_ahead_of_time", ahead_of_time)
    seen = []   # (filename, name, files on the Python stack) of frames handed to the jit

    original_call = driver.FrameDriver.__call__

    def spy(self, view):
        # The stack from this test's frame up: pytest's and xdist's frames below it (execnet
        # runs its worker from "<string>") are not the jit's business.
        stack = [frame.filename for frame in traceback.extract_stack()[:-1]]
        stack = stack[stack.index(__file__):] if __file__ in stack else stack
        seen.append((view.f_code.co_filename, view.f_code.co_name, stack))
        return original_call(self, view)
    monkeypatch.setattr(driver.FrameDriver, "__call__", spy)

    compiles = []   # (callback installed, capture-off depth, frames seen before, after)
    original_compile = runtime.TrainingVariant.backward_callable

    def recording(self, backward, example, *how):
        if backward.run is not None:
            return original_compile(self, backward, example, *how)
        # capture off: by the filter's depth, or (ahead of time, when the forward compiles
        # inside the driver's own compile of the frame) by the driver's compile
        in_driver = any(frame.name == "_compile" and frame.filename.endswith(
            os.path.join("dynamo", "driver.py")) for frame in traceback.extract_stack())
        entry = [hook.get_callback(), _C.adjust_thread_disabled(0) or in_driver, len(seen)]
        result = original_compile(self, backward, example, *how)
        compiles.append(entry + [len(seen), how[0] if how else "at_first_call"])
        return result
    monkeypatch.setattr(runtime.TrainingVariant, "backward_callable", recording)

    def step(model, optimizer, x):
        optimizer.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        optimizer.step()
        return loss

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    reference = copy.deepcopy(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    reference_optimizer = torch.optim.Adam(reference.parameters(), lr=0.01)
    x = torch.randn(5, 4)
    jitted = dynamo.jit(step, backend="inductor")
    for _ in range(2):
        torch.testing.assert_close(jitted(model, optimizer, x),
                                   step(reference, reference_optimizer, x))
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine, theirs)

    assert compiles, "no backward was compiled"
    callback, depth, before, after, how = compiles[0]
    assert how == ("ahead_of_time" if ahead_of_time else "at_first_call"), how
    assert callback is jitted._framejit_driver, "the backward compiled outside the jitted call"
    assert depth, "the backward compiled with capture on"
    assert after == before, "frames reached the callback while the backward compiled"
    offenders = sorted({(filename, name) for filename, name, stack in seen
                        if _is_compiler_file(filename) and not filename.startswith("<framejit")
                        and "/dynamo/" not in filename})
    assert not offenders, offenders
    under_a_compiler = sorted({(filename, name) for filename, name, stack in seen
                               if any(_is_compiler_file(outer) and "/dynamo/" not in outer
                                      and not outer.startswith("<framejit")
                                      for outer in stack)})
    assert not under_a_compiler, under_a_compiler
    captured = {record.code.co_name for record in jitted._framejit_driver.records}
    assert captured == {"step"}, captured


CONTROL = textwrap.dedent("""
    import traceback
    import torch
    import dynamo
    from dynamo import driver, hook, skips

    hook.set_disable_filter(None)      # the mechanism under test, off
    seen = []

    def spy(self, view):               # counts; answers SKIP (compiles nothing of it)
        seen.append(view.f_code.co_filename)
        if view.f_code.co_name == "step":
            return original(self, view)
        return hook.SKIP
    original = driver.FrameDriver.__call__
    driver.FrameDriver.__call__ = spy

    def step(model, x):
        loss = model(x).pow(2).sum()
        loss.backward()
        return loss

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    dynamo.jit(step, backend="inductor")(model, torch.randn(5, 4))
    print(sum("/sympy/" in name or "/inductor/" in name for name in seen))
""")


def test_control_without_the_filter_compiler_frames_reach_the_callback():
    """The measurement above can fail: the same kind of step, with the filter removed, hands
    sympy's and inductor's frames to the callback."""
    pytest.importorskip("torch")
    environment = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", CONTROL], capture_output=True, text=True,
                          cwd=ROOT, env=environment, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert int(done.stdout.split()[-1]) > 0, done.stdout
