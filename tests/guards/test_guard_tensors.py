"""Tensor match: each property holds / fails with its exact reason; "any" entries; torch facts
the generated check relies on."""
import pytest
import torch

from guard_checking import holds, reason
from guards import LocalSource, TensorMatchGuard, TensorProperties

X = LocalSource("x")


def guard_for(tensor):
    return TensorMatchGuard.of(X, tensor)


def test_holds_for_an_equal_fresh_tensor():
    assert holds(guard_for(torch.randn(4, 3)), {"x": torch.zeros(4, 3)})


@pytest.mark.parametrize("captured, other, message", [
    (torch.ones(4, 3), torch.ones(8, 3), "L['x'].size()[0]: expected 4, got 8"),
    (torch.ones(4, 3), torch.ones(4, 5), "L['x'].size()[1]: expected 3, got 5"),
    (torch.ones(4, 3), torch.ones(4, 3, 1), "L['x'].dim(): expected 2, got 3"),
    (torch.ones(4, 3), torch.ones(4, 3, dtype=torch.float64),
     "L['x'].dtype: expected torch.float32, got torch.float64"),
    (torch.ones(4, 3), torch.ones(4, 3, device="meta"), "L['x'].device: expected cpu, got meta"),
    (torch.ones(4, 3), torch.ones(4, 3, requires_grad=True),
     "L['x'].requires_grad: expected False, got True"),
    (torch.ones(3, 4), torch.ones(4, 3).t(), "L['x'].stride()[0]: expected 4, got 1"),
    (torch.ones(4, 3), torch.ones(4, 6)[:, ::2], "L['x'].stride()[0]: expected 3, got 6"),
    (torch.ones(4, 3), torch.ones(1, 3).expand(4, 3), "L['x'].stride()[0]: expected 3, got 0"),
    (torch.ones(4, 3), torch.ones(4, 3).to_sparse(),
     "L['x'].layout: expected torch.strided, got torch.sparse_coo"),
    (torch.ones(4, 3), torch._neg_view(torch.ones(4, 3)),
     "L['x'].is_neg(): expected False, got True"),
    (torch.ones(2, dtype=torch.cfloat), torch.ones(2, dtype=torch.cfloat).conj(),
     "L['x'].is_conj(): expected False, got True"),
    (torch.ones(4, 3), torch.nn.Parameter(torch.ones(4, 3)),
     "type(L['x']): expected Tensor, got Parameter"),
    (torch.ones(4, 3), 3, "type(L['x']): expected Tensor, got int"),
])
def test_property_difference_reason(captured, other, message):
    guard = guard_for(captured)
    assert holds(guard, {"x": captured})
    assert reason(guard, {"x": other}) == message


def test_inference_flag():
    with torch.inference_mode():
        inference = torch.ones(2)
    assert reason(guard_for(torch.ones(2)), {"x": inference}) == (
        "L['x'].is_inference(): expected False, got True")
    assert holds(guard_for(inference), {"x": inference})
    assert reason(guard_for(inference), {"x": torch.ones(2)}) == (
        "L['x'].is_inference(): expected True, got False")


def test_first_differing_property_is_named_in_check_order():
    guard = guard_for(torch.ones(4, 3))
    other = torch.ones(8, 3, dtype=torch.float64, requires_grad=True)
    assert reason(guard, {"x": other}) == "L['x'].dtype: expected torch.float32, got torch.float64"


def test_subclass_and_parameter_types():
    parameter = torch.nn.Parameter(torch.ones(2))
    assert holds(guard_for(parameter), {"x": torch.nn.Parameter(torch.zeros(2))})
    assert reason(guard_for(parameter), {"x": torch.ones(2, requires_grad=True)}) == (
        "type(L['x']): expected Parameter, got Tensor")


def test_any_size_and_stride_entries():
    guard = guard_for(torch.ones(4, 3)).relaxed(size_dims=[0], stride_dims=[0])
    assert guard.properties.sizes == (None, 3)
    assert guard.describe() == "L['x']: Tensor(torch.float32, cpu, size=[*, 3], stride=[*, 1])"
    assert holds(guard, {"x": torch.ones(9, 3)})
    assert holds(guard, {"x": torch.ones(9, 6)[:, :3]})
    assert reason(guard, {"x": torch.ones(9, 4)}) == "L['x'].size()[1]: expected 3, got 4"
    assert reason(guard, {"x": torch.ones(9, 3, 1)}) == "L['x'].dim(): expected 2, got 3"
    assert reason(guard, {"x": torch.ones(3, 4).t()}) == "L['x'].stride()[1]: expected 1, got 4"


def test_any_sizes_only_keeps_strides_exact():
    guard = guard_for(torch.ones(4, 3)).relaxed(size_dims=[0])
    assert holds(guard, {"x": torch.ones(7, 3)})
    assert reason(guard, {"x": torch.ones(7, 6)[:, :3]}) == (
        "L['x'].stride()[0]: expected 3, got 6")


def test_description_lists_unusual_properties():
    tensor = torch.ones(2, dtype=torch.cfloat, requires_grad=True)
    assert guard_for(tensor).describe() == (
        "L['x']: Tensor(torch.complex64, cpu, size=[2], stride=[1], requires_grad=True)")
    assert guard_for(torch._neg_view(torch.ones(2))).describe() == (
        "L['x']: Tensor(torch.float32, cpu, size=[2], stride=[1], is_neg()=True)")
    sparse = guard_for(torch.ones(2, 2).to_sparse())
    assert sparse.describe() == (
        "L['x']: Tensor(torch.float32, cpu, size=[2, 2], layout=torch.sparse_coo)")
    assert sparse.properties.strides is None


def test_equal_properties_make_equal_guards():
    assert guard_for(torch.ones(4, 3)) == guard_for(torch.zeros(4, 3))
    assert guard_for(torch.ones(4, 3)) != guard_for(torch.ones(3, 4))
    assert TensorProperties.of(torch.ones(4, 3)).dim == 2


def test_device_other_than_cpu_is_compared_by_equality():
    guard = guard_for(torch.ones(2, device="meta"))
    assert holds(guard, {"x": torch.zeros(2, device="meta")})
    assert reason(guard, {"x": torch.ones(2)}) == "L['x'].device: expected meta, got cpu"


# Facts about torch that the generated check relies on.

def test_fact_conjugate_bit_exists_only_on_complex_tensors():
    real = torch.ones(3)
    assert real.conj() is real and not real.conj().is_conj()
    assert torch.ones(3, dtype=torch.cdouble).conj().is_conj()


def test_fact_negative_bit_can_be_set_on_real_tensors():
    assert torch._neg_view(torch.ones(3)).is_neg()
    assert torch.ones(3, dtype=torch.cfloat).conj().imag.is_neg()


def test_fact_shape_equals_tuple_including_dim():
    shape = torch.ones(4, 3).shape
    assert shape == (4, 3) and shape != (4, 3, 1) and shape != (4,)
