"""inductor/runtime/output_aliases: outputs eager returns as aliases are rebuilt as eager's
(`_base`, view-ness, version counters shared or not, values), and an output eager returns
fresh that the decomposition views (`torch.stack`: a view of a `cat`) is a tensor of its own
over the hidden buffer, made without `as_strided` and `detach` calls from Python."""
import pytest
import torch
from torch.overrides import TorchFunctionMode

import inductor
from guards.native import build
from inductor.runtime import native
from inductor.runtime.output_aliases import DETACHED_VIEW, OWN, SAME, VIEW, alias_kinds
from inductor.aliasing import OutputAlias


class Recorder(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def _compiled(function, *inputs):
    return inductor.compile_fx(torch.fx.symbolic_trace(function), list(inputs))


def _facts(value):
    return (value.shape, value.stride(), value.storage_offset(), value._base is None,
            value._is_view(), value._version, value.untyped_storage().nbytes(),
            value.requires_grad)


@pytest.fixture(autouse=True)
def native_built():
    own, _ = native.output_geometry()
    assert type(own).__name__ == "builtin_function_or_method", \
        f"the native helper did not build: {build.unavailable_reason(native.HELPER)}"


def test_stack_output_is_its_own_tensor_without_python_view_calls():
    def function(x):
        return torch.stack([x, x])
    x = torch.randn(8, 8)
    compiled = _compiled(function, x)
    with Recorder() as recorder:
        ours = compiled(x)[0] if isinstance(compiled(x), (list, tuple)) else compiled(x)
    assert "as_strided" not in recorder.names and "detach" not in recorder.names, \
        recorder.names
    eager = function(x)
    assert _facts(ours) == _facts(eager)
    torch.testing.assert_close(ours, eager)


PROGRAMS = {
    "stack": lambda x: torch.stack([x, x]),
    "view_of_product": lambda x: (x * 2).view(2, 4, 8),
    "view_of_input": lambda x: x.view(2, 4, 8),
    "detached_input_slice": lambda x: x.detach()[1:],
    "detached_product_slice": lambda x: (x * 2)[1:].detach(),
    "two_detached_over_one_product": lambda x: ((x * 2)[1:].detach(), (x * 2)[:1].detach()),
    "stack_and_its_row": lambda x: (lambda s: (s, s[1]))(torch.stack([x, x])),
    "product_and_its_view": lambda x: (lambda y: (y, y.t()))(x + 1),
    "same_object": lambda x: x,
}


# `detached_input_slice`: eager's `_base` is the hidden `x.detach()`, not `x`
# (`OutputAlias.detached_base`; tests/inductor/test_detached_view_bases.py sweeps view kinds)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_aliases_as_eager(name):
    function = PROGRAMS[name]
    x = torch.randn(8, 8)
    compiled = _compiled(function, x)
    eager, ours = function(x), compiled(x)
    eager = eager if isinstance(eager, tuple) else (eager,)
    ours = tuple(ours) if isinstance(ours, (tuple, list)) else (ours,)
    assert len(eager) == len(ours)
    for mine, theirs in zip(ours, eager):
        assert _facts(mine) == _facts(theirs)
        torch.testing.assert_close(mine, theirs)
        assert (mine._base is x) == (theirs._base is x)
        assert (mine is x) == (theirs is x)
    # version counters shared where eager's are: a write into one output moves the others'
    for index in range(len(ours)):
        before_eager = [value._version for value in eager]
        before_ours = [value._version for value in ours]
        with torch.no_grad():
            eager[index].add_(0)
            ours[index].add_(0)
        assert [value._version - first for value, first in zip(eager, before_eager)] == \
            [value._version - first for value, first in zip(ours, before_ours)]


def _alias(kind, index, detached=False, same=False):
    return OutputAlias(kind, index, (2,), (1,), 0, same, detached)


def test_alias_kinds():
    # one hidden base (position 3, past the 3 outputs the caller sees) of one detached alias
    assert alias_kinds([_alias("output", 3, detached=True), None, None], 3) == {0: OWN}
    # two aliases over one hidden base: eager's share its version counter, so views
    assert alias_kinds([_alias("output", 3, detached=True), _alias("output", 3), None], 3) == \
        {0: DETACHED_VIEW, 1: VIEW}
    # a detached alias of an input or of a returned output shares their counters
    assert alias_kinds([_alias("input", 0, detached=True), _alias("output", 0, detached=True),
                        _alias("input", 1, same=True)], 3) == \
        {0: DETACHED_VIEW, 1: DETACHED_VIEW, 2: SAME}


def test_native_own_tensor_and_view_of():
    own, view_of = native.output_geometry()
    memory = torch.arange(12.0)
    memory.add_(1)
    mine = own(memory, (2, 3), (3, 1), 6)
    assert mine._base is None and not mine._is_view() and mine._version == 0
    assert mine.untyped_storage().data_ptr() == memory.untyped_storage().data_ptr()
    torch.testing.assert_close(mine, memory[6:].view(2, 3))
    with pytest.raises(RuntimeError, match="outside"):
        own(memory, (4, 4), (4, 1), 0)
    base = memory[2:]
    view = view_of(base, (2, 2), (1, 2), 1)
    expected = torch.as_strided(base, (2, 2), (1, 2), base.storage_offset() + 1)
    assert view._base is memory and _facts(view) == _facts(expected)
    torch.testing.assert_close(view, expected)
    with torch.inference_mode():
        inner = own(torch.zeros(4), (4,), (1,), 0)
    assert inner.is_inference()
