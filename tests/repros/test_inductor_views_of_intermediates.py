"""Outputs that view intermediates or each other (Soundness II, class 3). Aliasing outputs were
matched by storage against earlier outputs only, so `c[:1]` returned before `c` was rebuilt
from a one-element buffer (`setStorage ... out of bounds`), as were the halves of `chunk`; a
0-d reshape was written `.view()` (TypeError); and a sum over one element was fused into the
loop of a sum over two and counted twice. Both backends, through `dynamo.jit`."""
import torch

from tests.capture.differential import check


def test_view_returned_before_its_base(backend):
    def f(x):
        c = x + 1
        return c[:1], c
    check(f, torch.randn(4), backend=backend)


def test_chunks_of_an_intermediate(backend):
    def f(a):
        return (a + 1).chunk(2, 1)
    check(f, torch.randn(4, 4), backend=backend)


def test_zero_dim_output_next_to_an_item_assignment(backend):
    def f(s, x0):
        v = s.abs()
        c = x0.clone()
        c[-1] = 3
        return v, c
    check(f, torch.tensor(-2.0), torch.randn(1, 1), backend=backend)


def test_one_element_sum_next_to_an_expand_before_a_break(backend):
    def f(x):
        v2 = x.sum()
        q = v2[None].sum(-1)
        v3 = v2.expand(2)
        q = q + v3.sum()
        print("break")
        return q * 1, v3 + 0
    check(f, torch.randn(3), graphs=2, breaks=1, backend=backend)
