"""Program fuzzer P49 (inductor seeds 63054 and 63055, only after seed 63045 ran in the same
process): "Cannot set version_counter for inference tensor" in decompose_symbolic's
functionalization, an internal error (with `suppress_errors`: a warning, the frame eagerly).

Root cause: a frame whose compile ended in a failure it could not resume from kept that
`Unsupported` in its `CompileRecord`, with its traceback. A traceback holds the frames it
passed, and a returned frame holds its caller's (`f_back`): every frame on the stack when
the hook was called stayed alive with its locals, as long as the `jit` wrapper. Seed 63045
printed a tensor (a view made under no_grad whose base was then written: its autograd
history cannot be read); torch's `_tensor_str._str` holds a `torch._C._DisableFuncTorch()`
guard in a local while it formats, and its `unpack_dual` built a namedtuple, whose
`__new__` (code of `<string>`, so not a library's) framejit compiled and failed on. The
guard outlived `_str`: functorch's dispatch keys stayed excluded from the thread's dispatch
state until the cyclic GC freed the dead program's wrapper. `torch.func.functionalize`
then ran without its layer, and the view's autograd metadata was set on the inference
tensor functionalization made. Eager frees a frame's locals when it returns.

Fixed where failures are kept (`dynamo.breaks.without_frames`): the trace's (capture.py)
and the glue plan's (rewrite/frame.py) failures, and a record's, keep no traceback and no
link to the exceptions they chained (those are left as they are: the program's own error
keeps its frames, the last test), which also breaks the cycle failure -> traceback -> frame ->
failure that kept the frames until the cyclic GC. Tested on the shape of the seeds, with the
cyclic GC left alone: the caller of a frame that fails to compile holds an object (freed on
return in eager) and the guard `_str` holds; then an inductor graph over symbolic sizes, with
a view and a write, called under inference mode, and `vmap`.
"""
import traceback
import weakref

import pytest
import torch

import dynamo

FUNCTORCH_FRONT = torch._C.DispatchKey.FuncTorchDynamicLayerFrontMode


def pair(t):
    return (t, None)


def unreadable_history():
    """A view made under no_grad of a tensor requiring grad, whose base was then written:
    reading its `grad_fn` raises (as seed 63045's printed `x[:2]`)."""
    base = torch.ones(4, 2, requires_grad=True).clone()
    with torch.no_grad():
        view = base[:2]
    base.mul_(2)
    with pytest.raises(RuntimeError, match="no_grad mode"):
        view.grad_fn
    return view


class Token:
    pass


def call_holding_locals(function, argument):
    """Call `function` from a frame holding an object and the guard `torch._tensor_str._str`
    holds; a weak reference to the object."""
    token = Token()
    guard = torch._C._DisableFuncTorch()  # noqa: F841 (released when this frame returns)
    function(argument)
    return weakref.ref(token)


def excluded() -> bool:
    return torch._C._dispatch_tls_local_exclude_set().has(FUNCTORCH_FRONT)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_the_callers_of_a_frame_that_failed_to_compile_free_their_locals(backend):
    argument = ((unreadable_history(),),)
    assert not excluded()
    eager = call_holding_locals(pair, argument)
    assert eager() is None and not excluded()
    jitted = dynamo.jit(pair, backend=backend)
    token = call_holding_locals(jitted, argument)
    failures = [record.failure for record in jitted._framejit_driver.records
                if record.failure is not None]
    assert failures, "the premise: the compile ends in a failure kept in a record"
    assert token() is None, "a local of the caller outlived its frame"
    assert not excluded(), "the caller's dispatch-key guard outlived its frame"
    assert all(failure.__traceback__ is None for failure in failures)


def viewed_and_written(x, y):
    flat = x.view(-1)
    y.add_(1)
    return torch.tensor(-1.5), flat[-1] * 2


def test_symbolic_inductor_functionalization_under_inference_mode_after_a_failed_compile():
    call_holding_locals(dynamo.jit(pair, backend="eager"), ((unreadable_history(),),))
    jitted = dynamo.jit(viewed_and_written, backend="inductor", dynamic=True)
    for rows in (3, 4, 5):
        x = torch.arange(rows * 2.0).reshape(rows, 2)
        expected_y, actual_y = torch.zeros(2), torch.zeros(2)
        with torch.inference_mode():
            expected = viewed_and_written(x, expected_y)
            actual = jitted(x, actual_y)
        for want, got in zip(expected, actual):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            assert got.is_inference() == want.is_inference()
        torch.testing.assert_close(actual_y, expected_y, rtol=0, atol=0)
    assert torch.func.vmap(torch.sum)(torch.ones(3, 2)).tolist() == [2.0, 2.0, 2.0]


class Ctx1:  # seed 63048's, minimized: the program's error leaves a `with` block whose
    def __init__(self, tag):  # `__exit__` breaks the graph
        self.tag = tag

    def __enter__(self):
        pass

    def __exit__(self, kind, value, tb):
        print("exit", self.tag, kind is not None)


def raises_in_a_with_block():
    with Ctx1(1):
        raise TypeError("no key")


def _program_frames(error) -> list:
    return [(frame.name, frame.lineno) for frame in traceback.extract_tb(error.__traceback__)
            if frame.filename == __file__]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_the_programs_own_error_keeps_its_traceback(backend):
    """Only framejit's own failure loses its traceback and chain: the program's exception it
    chained (the error a traced `raise` made, raised again eagerly) keeps its frames (seed
    63048 of the same campaign: the jitted error had none once the chain was cleared)."""
    jitted = dynamo.jit(raises_in_a_with_block, backend=backend)
    for _ in range(2):
        with pytest.raises(TypeError, match="no key") as eager, torch.inference_mode():
            raises_in_a_with_block()
        with pytest.raises(TypeError, match="no key") as actual, torch.inference_mode():
            jitted()
        assert _program_frames(actual.value)[-1:] == _program_frames(eager.value)[-1:] != []
