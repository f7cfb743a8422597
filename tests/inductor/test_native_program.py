"""inductor/runtime/native_program: a wrapper made only of allocations and kernel launches runs
as one native call (`run_program`), with the results, errors and tensor facts of the Python
wrapper it was read from; other wrappers keep the Python function."""
import copy

import pytest
import torch

import inductor
from guards.native import build
from inductor.runtime import native, native_program


@pytest.fixture(autouse=True)
def programs():
    functions = native.programs()
    assert functions is not None, \
        f"the native helper did not build: {build.unavailable_reason(native.HELPER)}"
    return functions


def _compiled(function, *inputs):
    return inductor.compile_fx(torch.fx.symbolic_trace(function), list(inputs))


def _is_program(compiled) -> bool:
    return getattr(getattr(compiled.run, "func", None), "__name__", None) == "run_program"


def _facts(value):
    return (value.shape, value.stride(), value.dtype, value.storage_offset(),
            value.untyped_storage().nbytes(), value._base is None,
            None if value.is_inference() else value._version, value.requires_grad,
            value.is_inference())


def _python_compiled(function, *inputs, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(native_program, "runner", lambda plan, result: None)
        return _compiled(function, *inputs)


PROGRAMS = {
    "neg": (lambda x: -x, "one"),
    "two_outputs": (lambda x: (x + 1, torch.sigmoid(x) * 2), "tuple"),
    "list_output": (lambda x: [x.flip(0), x.sum(0)], "list"),
    "cat": (lambda x: torch.cat([x, x * 2], 1), "one"),
    "int_output": (lambda x: (x > 0).to(torch.int64) + 3, "one"),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_launch_only_wrapper_runs_natively_as_the_python_one(name, monkeypatch):
    function, kind = PROGRAMS[name]
    x = torch.randn(16, 8)
    compiled = _compiled(function, x)
    assert _is_program(compiled), compiled.report.source
    assert "def call_with_argument_list(arguments):" in compiled.report.source
    python = _python_compiled(function, x, monkeypatch=monkeypatch)
    assert not _is_program(python)
    for mode in (torch.no_grad, torch.enable_grad, torch.inference_mode):
        with mode():
            ours, theirs, eager = compiled(x), python(x), function(x)
        assert type(ours) is type(theirs) is type(eager)
        flat = ours if isinstance(ours, (list, tuple)) else [ours]
        other = theirs if isinstance(theirs, (list, tuple)) else [theirs]
        reference = eager if isinstance(eager, (list, tuple)) else [eager]
        for mine, theirs_value, value in zip(flat, other, reference):
            assert _facts(mine) == _facts(theirs_value)
            assert (mine.dtype, mine.shape, mine.stride()) == \
                (value.dtype, value.shape, value.stride())
            torch.testing.assert_close(mine, value)
            assert mine.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert kind in ("one", "tuple", "list")


def test_a_kernel_error_raises_as_the_python_wrapper_does(monkeypatch):
    def function(index, weight):
        return torch.nn.functional.embedding(index, weight) * 2
    index, weight = torch.tensor([1, 2, 3]), torch.randn(10, 4)
    compiled = _compiled(function, index, weight)
    if not _is_program(compiled):
        pytest.skip("this graph's wrapper is not launch-only here")
    torch.testing.assert_close(compiled(index, weight), function(index, weight))
    python = _python_compiled(function, index, weight, monkeypatch=monkeypatch)
    for run in (compiled, python):
        with pytest.raises(IndexError, match="index out of range"):
            run(torch.tensor([1, 20]), weight)


def test_wrong_calls_raise_and_copies_run():
    compiled = _compiled(lambda x: -x, torch.randn(3))
    assert _is_program(compiled)
    for copied in (copy.deepcopy(compiled), copy.copy(compiled)):
        torch.testing.assert_close(copied(torch.ones(3)), -torch.ones(3))
    with pytest.raises(TypeError):
        compiled()
    with pytest.raises(TypeError):
        compiled(torch.randn(3), torch.randn(3))
    with pytest.raises(TypeError):
        compiled(3)


def test_other_wrappers_keep_python():
    weight = torch.randn(8, 8)
    x = torch.randn(4, 8)
    for function in (lambda x: torch.relu(x @ weight),      # a library call
                     lambda x: (x * 2).view(2, 16),         # an output rebuilt as a view
                     lambda x: torch.i0(x)):                # an eager fallback
        assert not _is_program(_compiled(function, x))


NAMESPACE = {"device_cpu": torch.device("cpu"), "entry10": 1234, "kernel_error": print}


def _plan(lines):
    namespace = dict(NAMESPACE, empty_strided=native.empty_strided())
    return native_program.plan_of("\n".join(lines) + "\n\n\ndef call(*arguments):\n", namespace)


def test_plan_of_reads_only_the_listed_lines():
    head = ["def call_with_argument_list(arguments):", "    arg0, = arguments",
            "    arguments.clear()",
            "    buf0 = empty_strided((4, 4), (4, 1), torch.float32, device_cpu)",
            "    buf1 = empty_strided((4,), (1,), torch.float32, device_cpu)",
            "    status = launch(entry10, arg0, buf0, buf1)", "    if status:",
            "        kernel_error(status)", "    del arg0"]
    plan = _plan(head + ["    return [buf1, buf0]"])
    assert plan == (1, (((4, 4), (4, 1), torch.float32, torch.device("cpu")),
                        ((4,), (1,), torch.float32, torch.device("cpu"))),
                    ((1234, (0, -1, -2)),), (1, 0), print)
    assert _plan(head + ["    del buf1", "    return [buf0]"]) is None    # freed early
    assert _plan(head + ["    return [buf0, buf0]"]) is None              # returned twice
    assert _plan(head + ["    return [arg0]"]) is None                    # an input
    assert _plan(head + ["    buf2 = buf0.view(16)", "    return [buf2]"]) is None
    assert _plan(head[:7] + ["    return [buf0]"]) is None                # status unchecked
    assert _plan(head[:5] + ["    status = launch(entry10, arg0, buf0, s0)",
                             "    if status:", "        kernel_error(status)",
                             "    return [buf0]"]) is None               # a size symbol


def test_off_with_native_allocation():
    saved = inductor.config.snapshot()
    try:
        inductor.config.update(native_allocation=False)
        compiled = _compiled(lambda x: -x, torch.randn(3))
        assert not _is_program(compiled)
        torch.testing.assert_close(compiled(torch.ones(3)), -torch.ones(3))
    finally:
        inductor.config.update(**saved)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_stack_runs_natively_its_output_allocated_as_eager_lays_it_out(dim, monkeypatch):
    """`torch.stack` decomposes to a view of a `cat`, which eager returns fresh: the program
    allocates the cat's buffer with the stack's geometry and returns it (`owning_plan`)."""
    def function(x):
        return torch.stack([x, x * 2], dim)
    x = torch.randn(6, 5)
    compiled = _compiled(function, x)
    assert _is_program(compiled)
    python = _python_compiled(function, x, monkeypatch=monkeypatch)
    ours, theirs, eager = compiled(x), python(x), function(x)
    assert _facts(ours) == _facts(theirs) == _facts(eager)
    torch.testing.assert_close(ours, eager)


def test_owning_plan_takes_only_fresh_aliases_over_whole_hidden_buffers():
    from inductor.aliasing import OutputAlias
    cpu = torch.device("cpu")
    plan = (1, (((8, 4), (4, 1), torch.float32, cpu),), ((1234, (0, -1)),), (None, 0), print)

    def alias(size, stride, offset=0, detached=True, base=1):
        return OutputAlias("output", base, size, stride, offset, False, detached)
    owned = native_program.owning_plan(plan, [alias((2, 4, 4), (16, 4, 1))])
    assert owned == (1, (((2, 4, 4), (16, 4, 1), torch.float32, cpu),), plan[2], (0,), print)
    assert native_program.owning_plan(plan, [alias((7, 4), (4, 1), offset=4)]) is None
    assert native_program.owning_plan(plan, [alias((2, 4), (4, 1))]) is None   # less storage
    assert native_program.owning_plan(plan, [alias((2, 4, 4), (16, 4, 1),
                                                   detached=False)]) is None   # a view
