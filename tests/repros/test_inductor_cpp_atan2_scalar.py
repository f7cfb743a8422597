"""Graph fuzzer seed 11238: `argsort(atan2(a, a), stable=True)` of a strided `a`. Eager's
loop over strided elements is scalar (`std::atan2`: pi/4 for every x > 0); the C++ kernel
used glibc's vector `atan2f` (libmvec) in its loop body, which gives pi/4 less an ulp for some
elements, so the stable sort ordered the ties otherwise. atan2 is glibc's scalar one now."""
import torch

import dynamo


def _ties(a):
    v = torch.atan2(a, a)
    return v, torch.argsort(v, dim=-2, stable=True)


def test_atan2_of_equal_arguments_is_one_value_everywhere(code_generator):
    generator = torch.Generator().manual_seed(0)
    a = (torch.rand(5, 4, 14, generator=generator) + 0.01)[:, :, ::2]
    expected = _ties(a)
    actual = dynamo.jit(_ties, backend=code_generator)(a)
    assert torch.equal(actual[1], expected[1])
    if code_generator != "eager":
        assert actual[0].unique().numel() == expected[0].unique().numel() == 1
