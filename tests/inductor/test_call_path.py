"""The per-call path of a compiled graph (issue 25, small sizes): which frames a call runs
through and what the wrapper checks per call, with results as eager's.

- `CompiledGraph(...)(*args)` runs `run` with no Python frame of its own (`__call__` is a
  property handing back `run`), and an inference graph's run calls the wrapper's boxed form
  (`call_with_argument_list`) directly, not `call(*arguments)`;
- an eager fallback's result is checked by one native `layout_differs` call, not by Python's
  `stride()`, `storage_offset()` and `untyped_storage().nbytes()`;
- cumsum (a fallback) runs through `torch.cumsum` rather than the overload's `_op`."""
import traceback

import pytest
import torch

import inductor
from guards.native import build
from inductor.codegen.wrapper import raw_callable
from inductor.runtime import native
from inductor.runtime.compiled_graph import CompiledGraph, GraphReport


@pytest.fixture()
def layout_differs():
    function = native.layout_check()
    assert function is not None, \
        f"the native helper did not build: {build.unavailable_reason(native.HELPER)}"
    return function


def _frames(error) -> list:
    return [(frame.filename.rsplit("/", 1)[-1], frame.name)
            for frame in traceback.extract_tb(error.__traceback__)]


def test_compiled_graph_call_has_no_frame_of_its_own():
    def run(x):
        raise ValueError("from run")
    compiled = CompiledGraph(run, GraphReport())
    with pytest.raises(ValueError) as caught:
        compiled(1)
    assert ("compiled_graph.py", "__call__") not in _frames(caught.value)
    assert compiled.__call__ is run and callable(compiled)


def test_inference_run_calls_the_boxed_wrapper_directly():
    weight = torch.randn(10, 4)

    def function(index):
        return torch.nn.functional.embedding(index, weight) * 2
    index = torch.tensor([1, 2, 3])
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [index])
    torch.testing.assert_close(compiled(index)[0] if isinstance(compiled(index), (list, tuple))
                               else compiled(index), function(index))
    if "launch(" not in compiled.report.source:
        pytest.skip("no kernel reports errors here")
    with pytest.raises(IndexError) as caught:
        compiled(torch.tensor([1, 20]))
    names = [name for _, name in _frames(caught.value)]
    assert "call_with_argument_list" in names and "call" not in names, names


def test_fallback_results_are_checked_in_one_native_call(layout_differs):
    def function(x):
        return torch.i0(x) * 2, torch.i0(x + 1)     # i0: an eager fallback
    x = torch.randn(6, 5)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [x])
    source = compiled.report.source.split("\n\ndef call(")[0]
    assert "layout_differs(" in source
    assert ".stride()" not in source and "untyped_storage().nbytes()" not in source
    for mine, theirs in zip(compiled(x), function(x)):
        assert mine.stride() == theirs.stride()
        torch.testing.assert_close(mine, theirs)


def test_layout_differs(layout_differs):
    memory = torch.zeros(12)
    assert not layout_differs(memory.view(3, 4), (0, 1), (4, 1), 48)
    assert layout_differs(memory.view(3, 4), (0, 1), (4, 1), 44)      # storage size
    assert not layout_differs(memory.view(3, 4), (0, 1), (4, 1), -1)
    assert layout_differs(memory.view(4, 3).t(), (0, 1), (4, 1), -1)  # strides
    assert not layout_differs(memory.view(4, 3).t(), (0, 1), (1, 3), -1)
    assert layout_differs(memory[1:], (0,), (1,), 44)                # storage offset
    assert not layout_differs(memory[1:], (0,), (1,), -1)
    assert not layout_differs(memory.view(3, 1, 4), (0, 2), (4, 1), 48)  # dims picked
    assert layout_differs(memory.view(3, 4), (2,), (1,), -1)          # a dim it lacks
    assert not layout_differs(memory.view(3, 4), (), (), -1)
    with pytest.raises(ValueError):
        layout_differs(memory, (0,), (1, 2), -1)
    with pytest.raises(TypeError):
        layout_differs(memory, (0,), (1,))


def test_a_fallback_result_laid_out_otherwise_is_restrided():
    """`select_scatter` of an input view clones the input's whole storage (program fuzzer
    seed 20153): the check's storage part copies it into a storage of its own."""
    def function(x, y):
        return torch.select_scatter(x[1:], y, 0, 0)
    x, y = torch.randn(5, 4), torch.randn(4)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [x, y])
    mine = compiled(x, y)
    mine = mine[0] if isinstance(mine, (list, tuple)) else mine
    theirs = function(x, y)
    torch.testing.assert_close(mine, theirs)
    assert mine.stride() == theirs.stride()
    assert (mine.storage_offset(), mine.untyped_storage().nbytes()) == (0, 4 * 4 * 4)


def test_cumsum_runs_through_torch_binding():
    assert raw_callable(torch.ops.aten.cumsum.default) is torch.cumsum
    assert raw_callable(torch.ops.aten.cumsum.default, ("dtype",)) is torch.cumsum

    def function(x):
        return x.cumsum(0, dtype=torch.float64), torch.cumsum(x, -1)
    x = torch.randn(7, 3)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [x])
    for mine, theirs in zip(compiled(x), function(x)):
        assert mine.dtype == theirs.dtype and mine.stride() == theirs.stride()
        torch.testing.assert_close(mine, theirs)


def test_a_graph_with_view_outputs_runs_in_one_frame_around_the_wrapper():
    """Outputs to rebuild as views and nothing else around the call: one frame
    (`run_rebuilding`) calls the boxed wrapper, no `try` frame (`run`) or `call`."""
    def function(index, weight):
        return (torch.nn.functional.embedding(index, weight) * 2).view(-1)
    index, weight = torch.tensor([1, 2, 3]), torch.randn(10, 4)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [index, weight])
    mine, theirs = compiled(index, weight), function(index, weight)
    mine = mine[0] if isinstance(mine, (list, tuple)) else mine
    torch.testing.assert_close(mine, theirs)
    assert mine._is_view() == theirs._is_view() and (mine._base is None) == (theirs._base is None)
    if "launch(" not in compiled.report.source:
        pytest.skip("no kernel reports errors here")
    with pytest.raises(IndexError) as caught:
        compiled(torch.tensor([1, 20]), weight)
    names = [name for _, name in _frames(caught.value)]
    assert "run_rebuilding" in names and "run" not in names and "call" not in names, names
