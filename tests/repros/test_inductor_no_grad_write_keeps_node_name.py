"""Program fuzzer, inductor seeds 17326, 17747 (campaign at 2d4b380): a returned tensor that
eager's `minimum` saved, written by the caller under `no_grad`, fails the backward on both
sides; eager's message names the node that made it ("output 0 of Add"), the compiled one
named "output 1 of CompiledFunction": a write under `no_grad` renames no node."""
import torch

import dynamo


def _saved_and_returned(x, y):
    a = torch.add(y, x, alpha=0.5)
    return torch.minimum(a, y), a


def _error(fn, grad_on_write):
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = torch.tensor([0.5, 1.0, -1.0])
    t, a = fn(x, y)
    with torch.set_grad_enabled(grad_on_write):
        a.mul_(2)
    try:
        t.sum().backward()
    except RuntimeError as error:
        return str(error)
    return None


def test_no_grad_write_keeps_eager_node_name(code_generator):
    jitted = dynamo.jit(_saved_and_returned, backend=code_generator)
    for grad_on_write in (False, True):
        expected = _error(_saved_and_returned, grad_on_write)
        assert expected is not None
        assert _error(jitted, grad_on_write) == expected
