"""Program-fuzzer finding P4: a tensor created inside the graph with `requires_grad=True`
(`torch.tensor(x.tolist(), requires_grad=True)`) came back from inductor without
requires_grad: the graph had no input requiring grad, so it was compiled for inference.
Such graphs (their autograd history starts inside them) run as they are, a counted fallback."""
import pytest
import torch

from tests.capture.differential import check


@pytest.mark.expect_fallback("unsupported", reason="graphs creating leaves that require grad "
                             "run as they are")
def test_leaves_made_inside_the_graph(backend):
    def f(x):
        made = torch.tensor(x.tolist(), requires_grad=True)
        return made, torch.zeros(2, requires_grad=True) + 0, x.detach().requires_grad_(), \
            made.is_leaf
    check(f, torch.ones(2, 2), graphs=None, breaks=None, backend=backend)
