"""A buffer registered as `None` (and a parameter set to `None`) was read without a guard: setting
it to a tensor after capture kept the `is None` branch. Module members read as `None` are guarded
to stay `None`."""
import torch

from tests.repros.after_change import check_after_changes


class Offset(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", None)
        self.lin = torch.nn.Linear(4, 4, bias=False)

    def forward(self, x):
        y = self.lin(x)
        if self.offset is not None:
            y = y + self.offset
        if self.lin.bias is not None:
            y = y * 2
        return y


def test_none_buffer_then_tensor_then_none(backend):
    module = Offset()
    x = torch.ones(2, 4)

    def set_offset(value):
        return lambda: setattr(module, "offset", value)

    def set_bias():
        module.lin.bias = torch.nn.Parameter(torch.ones(4))
    steps = [(None, lambda: (x,)), (set_offset(torch.full((4,), 7.0)), lambda: (x,)),
             (set_bias, lambda: (x,)), (set_offset(None), lambda: (x,))]
    check_after_changes(module, backend, steps)
