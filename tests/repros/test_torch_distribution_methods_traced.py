"""Methods of torch objects are traced into since 518d023 (P18). A distribution's method that
breaks inside (its argument validation branches on a tensor's value) resumed as a nested
call whose function is torch's: the nested resume wrapped it as a torch function, which has
no closure to give (`AttributeError: 'TorchFunctionVariable' object has no attribute
'_closure'`; PyTorch's test_torch_distributions_functions under PEER_FULLGRAPH=0)."""
import torch

from tests.capture.differential import check


def log_prob_of_independent_normal(x):
    normal = torch.distributions.Normal(x, torch.tensor(1))
    independent = torch.distributions.Independent(normal, 1)
    return independent.log_prob(x)


def test_a_distribution_method_breaking_inside(backend):
    check(log_prob_of_independent_normal, torch.randn(2, 3), graphs=None, breaks=None,
          calls=3, backend=backend)
