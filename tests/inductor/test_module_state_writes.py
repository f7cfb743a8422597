"""`compile_fx` of a graph that calls modules (`call_module`, as `torch.fx.symbolic_trace` leaves
BatchNorm) whose buffers the call writes: the module's tensors were traced as constants, so
the fake runs at compile time wrote them for real (BatchNorm's `num_batches_tracked` 5 after
3 calls, eager 3) and a write through a leaf module's forward could be lost. They are now
inputs of the traced function: each call writes them once, as eager."""
import copy

import torch
import torch.fx

import inductor


class _Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.count = torch.nn.Buffer(torch.zeros(3))

    def forward(self, x):
        self.count.add_(1)
        return x + self.count


class _LeafCounter(torch.fx.Tracer):
    def is_leaf_module(self, module, name):
        return isinstance(module, _Counter) or super().is_leaf_module(module, name)


def _traced(module):
    return torch.fx.GraphModule(module, _LeafCounter().trace(module))


def _compare(make, requires_grad):
    torch.manual_seed(0)
    eager = make()
    for parameter in eager.parameters():
        parameter.requires_grad_(requires_grad)
    jitted = copy.deepcopy(eager)
    gm = _traced(jitted)
    versions = {name: buffer._version for name, buffer in jitted.named_buffers()}
    compiled = inductor.compile_fx(gm, [torch.randn(8, 3)])
    # compiling writes nothing (the fake runs wrote the module's real buffers)
    assert {name: buffer._version for name, buffer in jitted.named_buffers()} == versions
    for _ in range(3):
        x = torch.randn(8, 3)
        actual = compiled(x)
        actual = actual[0] if isinstance(actual, (list, tuple)) else actual
        torch.testing.assert_close(actual, eager(x))
    for (name, want), (_, got) in zip(eager.named_buffers(), jitted.named_buffers()):
        torch.testing.assert_close(got, want, msg=name)


def test_batch_norm_buffers_written_once_per_call():
    for requires_grad in (False, True):
        _compare(lambda: torch.nn.Sequential(torch.nn.Linear(3, 3),
                                             torch.nn.BatchNorm1d(3)).train(), requires_grad)


def test_leaf_module_writing_its_buffer():
    for requires_grad in (False, True):
        _compare(lambda: torch.nn.Sequential(torch.nn.Linear(3, 3), _Counter()), requires_grad)
