"""Program fuzzer, inductor seed 33251 (P37): `t6 = (0 + x).detach()` returned by a graph that
also returns `0 + x`, in a graph given an input that requires grad (a parameter read before a
break) but computing nothing that needs a gradient: the forward-only variant of the training
compile (`InferenceVariant`) returned `t6` as the generated code made it, a view of the other
output (`alias` once functionalized), where eager's `detach()` is no view. Function outputs
are now returned as aliases that are no views there too, as `CompiledNodes` does."""
import torch

import dynamo
from tests.repros.conftest import values

_WEIGHT = torch.nn.Parameter(values((2,), 47))


def _detach_of_intermediate(x):
    t5 = 0 + x
    t6 = t5.detach()
    u = _WEIGHT.ndim
    return t6, t5, u


def _detach_of_view(x):
    t5 = x * 2
    return t5[1:].detach(), t5.t().detach(), t5, _WEIGHT.ndim


def _summary(result):
    return [(value._base is not None, value.requires_grad, tuple(value.stride()),
             value.storage_offset(), value.tolist()) if isinstance(value, torch.Tensor)
            else value for value in result]


def _check(fn, code_generator):
    jitted = dynamo.jit(fn, backend=code_generator)
    for seed in range(2):
        x = values((2, 2), seed)
        expected, actual = fn(x), jitted(x)
        assert _summary(actual) == _summary(expected)
        # memory shared as in eager: the detached alias is the other output's memory
        assert (actual[0].untyped_storage().data_ptr() == actual[-2].untyped_storage().data_ptr()) \
            == (expected[0].untyped_storage().data_ptr()
                == expected[-2].untyped_storage().data_ptr())


def test_detach_of_an_intermediate_is_no_view(code_generator):
    _check(_detach_of_intermediate, code_generator)


def test_detach_of_a_view_of_an_intermediate_is_no_view(code_generator):
    _check(_detach_of_view, code_generator)


def _lone_detached_slice(x):
    return (x * 2)[1:].detach(), x.sum()


def test_lone_detached_slice_shares_the_intermediate(code_generator):
    """The rest of P37 (inference compiles): `(x * 2)[1:].detach()` alone shares the whole
    product's memory at offset 2 in eager (no view); computed alone it owned 2 elements at 0.
    It is rebuilt over the product, a hidden base, and detached (`aliasing._detached_over`)."""
    jitted = dynamo.jit(_lone_detached_slice, backend=code_generator)
    for seed in range(2):
        x = values((2, 2), seed)
        expected, actual = _lone_detached_slice(x), jitted(x)
        assert _summary(actual) == _summary(expected)
        assert actual[0].untyped_storage().nbytes() == expected[0].untyped_storage().nbytes()
