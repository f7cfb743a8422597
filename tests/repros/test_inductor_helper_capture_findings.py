"""Capture bugs met while building the training soundness suite (inductor-mutation's report):

- Two locals whose names both make the identifier `v` (`_` and `__`) gave the glue two
  parameters `L_v`: SyntaxError.
- `torch._foreach_lerp_(averages, params, w)` bumps no version counter on fake tensors, so the
  node counted as pure and was dropped: the averages never changed. Mutation is now also read
  from the operator's schema.
- `torch.optim`'s functions (`sgd(...)`) were recorded as one graph node, which FX could not
  name again (`torch.optim.sgd.sgd`: AttributeError); they are traced into now.
- The compiled backward, compiled on the first `loss.backward()` inside a jitted region, ran
  with frame capture on: sympy's and tqdm's frames were captured (hundreds of graphs).
"""
import copy

import torch
from torch.optim.sgd import sgd as sgd_step

import dynamo
from tests.capture.differential import check


def test_locals_named_underscores(backend):
    def f(_, __):
        print("break")
        return _ + __
    check(f, torch.ones(3), torch.ones(3), graphs=None, breaks=1, backend=backend)


def test_foreach_in_place_updates(backend):
    def ema(averages, params, weight):
        torch._foreach_lerp_(averages, params, weight)
        torch._foreach_mul_(params, 0.5)
        return averages[0] + 1
    check(ema, [torch.zeros(3), torch.zeros(2)], [torch.ones(3), torch.ones(2)], 0.25,
          backend=backend)


def test_functional_sgd(backend):
    def step(params, grads, buffers, foreach):
        sgd_step(params, grads, buffers, foreach=foreach, weight_decay=0.0, momentum=0.9,
                 lr=0.1, dampening=0.0, nesterov=False, maximize=False)
    for foreach in (False, True):
        check(step, [torch.ones(3)], [torch.full((3,), 0.5)], [torch.zeros(3)], foreach,
              graphs=None, backend=backend)


def test_backward_inside_a_jitted_step_captures_no_library_frames():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    reference = copy.deepcopy(model)
    inputs = torch.randn(8, 4)

    def train(net, x):
        loss = net(x).pow(2).sum()
        loss.backward()
        return loss

    jitted = dynamo.jit(train)
    for _ in range(2):
        torch.testing.assert_close(jitted(model, inputs), train(reference, inputs))
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad)
    records = jitted._framejit_driver.records
    assert {record.code.co_name for record in records} == {"train"}, \
        sorted({(record.code.co_filename, record.code.co_name) for record in records})
