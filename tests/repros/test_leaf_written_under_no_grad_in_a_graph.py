"""A graph that writes, under `torch.no_grad()`, into an input that is a leaf requiring grad
(`g = x.detach().clone().requires_grad_()` breaks the graph; then `with torch.no_grad():
g.copy_(...)`) failed to compile under inductor: functionalization copied the write back into
the input outside the graph's `no_grad` region ("a leaf Variable that requires grad is being
used in an in-place operation"; program fuzzer P16, seed 7784)."""
import torch

from tests.capture.differential import check


def test_leaf_requiring_grad_written_under_no_grad(backend):
    def f(x):
        g = x[1, ...].detach().clone().requires_grad_()
        with torch.no_grad():
            g.copy_(g * 2)
            g.add_(x[0])
        return g
    check(f, torch.randn(3, 2), graphs=None, breaks=None, backend=backend)
