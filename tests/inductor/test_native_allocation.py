"""inductor/runtime/native: the wrappers' allocation entry point builds, returns what
torch.empty_strided returns (layout, dtype, device, errors), and generated wrappers use it;
with `native_allocation` off they call torch.empty_strided."""
import pytest
import torch

import inductor
from guards.native import build
from inductor.runtime import native


@pytest.fixture()
def allocate():
    function = native.empty_strided()
    assert type(function).__name__ == "builtin_function_or_method", \
        f"the native helper did not build: {build.unavailable_reason(native.HELPER)}"
    return function


CASES = [((2, 64, 16, 16), (16384, 256, 16, 1), torch.bfloat16),
         ((2, 64, 16, 16), (16384, 1, 1024, 64), torch.float32),   # channels-last
         ((), (), torch.int64), ((0, 3), (3, 1), torch.float16), ((5,), (2,), torch.bool),
         ([3, 4], [1, 3], torch.float64)]


@pytest.mark.parametrize("sizes, strides, dtype", CASES)
def test_same_tensor_as_torch_empty_strided(allocate, sizes, strides, dtype):
    devices = [torch.device("cpu")] + ([torch.device("cuda", 0)] if torch.cuda.is_available()
                                       else [])
    for device in devices:
        ours = allocate(sizes, strides, dtype, device)
        theirs = torch.empty_strided(sizes, strides, dtype=dtype, device=device)
        assert (ours.shape, ours.stride(), ours.dtype, ours.device, ours.requires_grad,
                ours.storage_offset(), ours.untyped_storage().nbytes()) == \
            (theirs.shape, theirs.stride(), theirs.dtype, theirs.device, theirs.requires_grad,
             theirs.storage_offset(), theirs.untyped_storage().nbytes())


def test_bad_arguments_raise_what_torch_raises(allocate):
    cpu = torch.device("cpu")
    with pytest.raises(RuntimeError, match="negative dimension"):
        allocate((-2,), (1,), torch.float32, cpu)
    with pytest.raises(ValueError, match="differ in length"):
        allocate((2,), (1, 2), torch.float32, cpu)
    with pytest.raises(TypeError):
        allocate((2,), (1,), "float32", cpu)
    with pytest.raises(TypeError):
        allocate((2,), (1,), torch.float32)


def test_wrappers_allocate_through_it_unless_switched_off(allocate):
    def function(x):
        return torch.relu(x) + 1
    x = torch.randn(8, 8)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [x])
    assert "empty_strided((8, 8), (8, 1), torch.float32, device_cpu)" in compiled.report.source
    torch.testing.assert_close(compiled(x), function(x))
    saved = inductor.config.snapshot()
    try:
        inductor.config.update(native_allocation=False)
        assert native.empty_strided() is native._python_empty_strided
    finally:
        inductor.config.update(**saved)
