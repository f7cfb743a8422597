"""P22 (program fuzzer, inductor seeds 97, 5647, 6934): a lone view of an intermediate that
the program does not return came back as a tensor of its own (storage offset 0, no `_base`,
a 3-element storage); eager's is a view into the whole intermediate, as torch.compile's is."""
import torch

import dynamo


def _layout(tensor):
    return (tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset(),
            tensor._base is not None, tensor.untyped_storage().nbytes(), tensor.requires_grad)


def _select_into_dict(w, d):
    t1 = w - 0.25
    d["b"] = t1.select(0, -2)
    return t1.sum(0)[1:]


def _slice_of_product(x, y):
    return (x @ y)[1:, :2]


def test_view_into_a_dict_keeps_the_intermediate(code_generator):
    jitted = dynamo.jit(_select_into_dict, backend=code_generator)
    for requires_grad in (False, True, False):
        w = torch.randn(3, 3, requires_grad=requires_grad)
        d_eager, d_jit = {}, {}
        expected, actual = _select_into_dict(w, d_eager), jitted(w, d_jit)
        assert _layout(actual) == _layout(expected)
        assert _layout(d_jit["b"]) == _layout(d_eager["b"])
        torch.testing.assert_close(d_jit["b"], d_eager["b"])
        if requires_grad:
            (d_jit["b"].sum() + actual.sum()).backward()
            grad, w.grad = w.grad, None
            (d_eager["b"].sum() + expected.sum()).backward()
            torch.testing.assert_close(grad, w.grad)


def test_returned_slice_of_a_product(code_generator):
    jitted = dynamo.jit(_slice_of_product, backend=code_generator)
    for shape in ((4, 3), (4, 3)):
        x, y = torch.randn(*shape), torch.randn(shape[1], 5)
        expected, actual = _slice_of_product(x, y), jitted(x, y)
        assert _layout(actual) == _layout(expected)
        torch.testing.assert_close(actual, expected)


def test_lone_view_eager_lays_out_otherwise_keeps_eager_strides():
    """Graph fuzzer seeds 2043, 10628, 12077, 12600, 15224, 18873 (a campaign at 2d4b380): a
    lone view whose eager base is not the decomposed graph's intermediate (another layout)
    took the decomposed layout once it had a hidden base, strides (12, 12, 1, 3) where
    eager's are (12, 12, 4, 1); such a view is computed alone with eager's strides."""
    from tests.fuzz.graphs.check import check_program
    from tests.fuzz.graphs.generator import generate
    for seed in (2043, 12600):
        result = check_program(generate(seed), seed, "cpp")
        assert not result.failures, (seed, result.failures)
