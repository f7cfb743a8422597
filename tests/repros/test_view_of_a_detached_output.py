"""An output that views another output which is a detached alias of an input
(`t = x.detach(); d["w"] = t[-2]; return t`, program fuzzer seed 92052, inductor): eager's
view has `t` as `_base`, a tensor of its own; the wrapper rebuilt it over the input `x`,
so `w._base is x` where eager's is not. Such views are now rebuilt over that output."""
import torch

import dynamo


def detach_and_view(x, d):
    t = x.detach()
    d["w"] = t[-2]
    return t, t[1:].t()


def test_views_of_a_detached_output_have_it_as_base(backend):
    _check(backend, ((4, False), (4, False), (5, False)))


def test_views_of_a_detached_output_requiring_grad_eager_backend():
    _check("eager", ((4, True), (4, True), (5, True)))


def test_views_of_a_detached_output_requiring_grad_inductor():
    """Through the training path (`x` requires grad) inductor rebuilt `t` over the input and
    its views over the input too: their `_base` was another tensor than `t`. They are now
    views of the rebuilt `t` (`signature._views_of_detached`: OutputKind.VIEW_OF_RESULT)."""
    _check("inductor", ((4, True), (4, True), (5, True)))


def _check(backend, calls):
    jitted = dynamo.jit(detach_and_view, backend=backend, dynamic=False)
    for rows, grad in calls:
        x = torch.randn(rows, 3, requires_grad=grad)
        expected_d, got_d = {}, {}
        expected = detach_and_view(x, expected_d)
        got = jitted(x, got_d)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(got_d, expected_d)
        for mine, theirs in ((got[1], expected[1]), (got_d["w"], expected_d["w"])):
            assert mine._base is got[0] and theirs._base is expected[0]
            assert mine._base is not x
            assert (mine.stride(), mine.storage_offset()) == \
                (theirs.stride(), theirs.storage_offset())
            assert not mine.requires_grad
        assert got[0]._base is None and got[0].data_ptr() == x.data_ptr()
        got[0][1, 0] = 7.0          # still sharing the input's memory, as eager's
        assert x[1, 0].item() == 7.0 == got[1][0, 0].item()
