"""The glue's input fetches: steps shared by several graph inputs are read once per call, and
every call still reads the frame's current objects (a parameter swapped for another one with
the same properties passes the guards and must reach the graph)."""
import torch
from torch import nn

import dynamo
from dynamo.backends import CountingBackend


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.second = nn.Linear(4, 4)

    def forward(self, x):
        return self.second(torch.relu(self.first(x)))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def _glue_of(jitted) -> str:
    [record] = [record for record in jitted._framejit_driver.records if record.graph is not None]
    return record.glue_source


def test_shared_steps_are_fetched_once():
    torch.manual_seed(0)
    model, x = Stack(), torch.randn(2, 4)
    jitted = dynamo.jit(model, backend=CountingBackend())
    torch.testing.assert_close(jitted(x), model(x))
    glue = _glue_of(jitted)
    call = next(line for line in glue.splitlines() if "compiled(" in line)
    # 12 parameters under 3 blocks: the blocks and the ModuleList are read before the call
    assert "_modules['blocks']" not in call, glue
    assert glue.count("_modules['blocks']") == 1, glue
    assert glue.count("['1']") == 1, glue
    assert call.count("_parameters[") == 12, glue


def test_swapped_parameter_reaches_the_graph():
    torch.manual_seed(0)
    model, x = Stack(), torch.randn(2, 4)
    jitted = dynamo.jit(model, backend=CountingBackend())
    jitted(x)
    with torch.no_grad():
        model.blocks[1].second.weight = nn.Parameter(torch.randn(4, 4))
    torch.testing.assert_close(jitted(x), model(x))
    model.blocks[2].first = nn.Linear(4, 4)
    torch.testing.assert_close(jitted(x), model(x))


def test_single_input_chains_stay_inline():
    def scale(x, holder):
        return x * holder.weight

    holder = nn.Linear(2, 2)
    jitted = dynamo.jit(scale, backend=CountingBackend())
    x = torch.randn(2, 2)
    torch.testing.assert_close(jitted(x, holder), scale(x, holder))
    glue = _glue_of(jitted)
    assert "i0 =" not in glue, glue
