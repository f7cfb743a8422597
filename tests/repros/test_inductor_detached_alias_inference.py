"""Program fuzzer, inductor seed 10463 (campaign at 2d4b380): `with torch.no_grad(): W1 =
y.detach()` of an input requiring grad ran on the inference path, whose wrapper rebuilt the
alias with `as_strided`: a view requiring grad where eager's `detach()` is no view and needs
no grad. Aliases eager makes with `detach()` are rebuilt detached."""
import torch

import dynamo

_KEPT = {}


def _detach_in_no_grad(y):
    with torch.no_grad():
        _KEPT["w"] = y.detach()
        _KEPT["v"] = y[1:].detach()
    return None


def test_detached_alias_made_under_no_grad(code_generator):
    jitted = dynamo.jit(_detach_in_no_grad, backend=code_generator)
    for _ in range(2):
        y = torch.ones(3, 3, requires_grad=True)
        _detach_in_no_grad(y)
        expected = {key: (value.requires_grad, value._base is not None, value.storage_offset())
                    for key, value in _KEPT.items()}
        jitted(y)
        actual = {key: (value.requires_grad, value._base is not None, value.storage_offset())
                  for key, value in _KEPT.items()}
        assert actual == expected
        assert _KEPT["w"].untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
