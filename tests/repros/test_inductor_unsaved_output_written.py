"""Program fuzzer, inductor seed 20036: a training graph returned `t1` and products of it;
eager's `mm` saves only `x` (which requires no grad), but the partitioner saved the returned
`t1` to recompute the products in the backward. The caller then wrote `t1` (`t1[1:2] = ...`)
and the compiled backward raised `ModifiedSavedInput` where eager's runs. Function outputs
eager does not save now cost what unsaved inputs cost: the products are saved instead."""
import torch

import dynamo


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2))

    def forward(self, t):
        return torch.add(self.w, t, alpha=0.5)


def _make():
    net = _Net()

    def fn(x):
        t1 = net(x.select(0, 0))
        products = [x.matmul(t1) * t1.matmul(x.T) for _ in range(2)]
        print("break")
        t1[1:2] = t1.mean(-1, keepdim=True)
        return products
    return net, fn


def test_output_written_after_the_call_is_not_saved(code_generator, capsys):
    torch.manual_seed(0)
    net, fn = _make()
    jitted = dynamo.jit(fn, backend=code_generator)
    x = torch.randn(2, 2)
    for _ in range(2):
        sum(p.sum() for p in fn(x)).backward()
        expected, net.w.grad = net.w.grad, None
        sum(p.sum() for p in jitted(x)).backward()
        torch.testing.assert_close(net.w.grad, expected)
        net.w.grad = None
