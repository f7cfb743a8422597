"""Program fuzzer, inductor seed 10825 (torch 2.11): `t1 = x.T + y @ x.T; t1.zero_()` returned
by a training graph came back with strides (2, 1), eager's (1, 2). The analysis read eager's
layouts from functional wrappers, whose layout is their current value's: functionalization
turns a write into an op that lays its result out anew (`zero` on torch 2.11; `masked_fill`,
`index_add`, `scatter`, `index_put` on every version: dense strides), and values computed from
the written tensor follow it. Layouts now come from a run on plain fake tensors (P30)."""
import pytest
import torch

import dynamo

WRITES = {
    "zero_": lambda t, y: t.zero_(),
    "masked_fill_": lambda t, y: t.masked_fill_(y[:, :3] > 0, 0.5),
    "index_add_": lambda t, y: t.index_add_(0, torch.tensor([1]), y[:1, :3]),
    "scatter_": lambda t, y: t.scatter_(0, torch.zeros(1, 3, dtype=torch.long), 1.0),
    "setitem_mask": lambda t, y: t.__setitem__(t > 0, 0.75),
}


def _program(write):
    def fn(x, y):
        t1 = x.T + (y @ x.T)     # eager: strides (1, 4)
        write(t1, y)
        after = t1 * 2           # computed from the written value: eager (1, 4) too
        return t1, after, t1[1:], y * 1
    return fn


def _run(fn, grad):
    x = torch.randint(-4, 5, (3, 4)).float().requires_grad_(grad)
    y = torch.randint(-4, 5, (4, 4)).float()
    outputs = fn(x, y)
    facts = [(tuple(value.shape), value.stride(), value.storage_offset(),
              value.detach().tolist()) for value in outputs]
    if grad:
        sum(value.sum() for value in outputs if value.requires_grad).backward()
        facts.append(x.grad.tolist())
    return facts


@pytest.mark.parametrize("grad", [True, False], ids=["training", "inference"])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_written_values_keep_eager_layout(code_generator, write, grad):
    fn = _program(WRITES[write])
    jitted = dynamo.jit(fn, backend=code_generator)
    torch.manual_seed(0)
    expected = _run(fn, grad)
    torch.manual_seed(0)
    assert _run(jitted, grad) == expected


def _seed_10825(x, y, s):
    t1 = (x.T + (y @ x.T))
    t1.zero_()
    return (t1, s,)


def test_seed_10825(code_generator):
    jitted = dynamo.jit(_seed_10825, backend=code_generator)
    for fn in (_seed_10825, jitted, jitted):
        x = torch.arange(4.0).reshape(2, 2).requires_grad_()
        y = torch.ones(2, 2, requires_grad=True)
        t1, s = fn(x, y, 2)
        facts = (t1.stride(), t1.tolist(), t1.requires_grad, s)
        if fn is _seed_10825:
            expected = facts
        else:
            assert facts == expected
