"""Training graphs (an input requiring grad, or a weight that does) over symbolic sizes whose
inputs are views at an offset or with strides that are not dense (found by the suite under
`JIT_DYNAMIC_BY_DEFAULT=1`: tests/repros/test_inductor_p30_views_of_inputs_at_an_offset.py,
26 tests, "Cannot convert symbols to int"). Such an input's storage offset and strides are
symbols of their own; the training wrapper bound sizes only, so rebuilding an output view at
`offset + 3` failed. `inductor.autograd.symbols.Binder` binds strides and offsets too.
Runs with `dynamic=True` on two sizes, compared with eager: values, sizes, strides, offsets,
`_base`, the written input and the gradients.
"""
import pytest
import torch

import dynamo


def _inputs(rows: int, layout: str, input_grad: bool):
    leaf = torch.randint(-4, 5, (rows, 8) if layout == "every_other_column" else (rows, 4))
    leaf = leaf.float().requires_grad_(input_grad)
    views = {"offset": lambda: leaf[1:], "every_other_column": lambda: leaf[:, 1::2],
             "transposed": lambda: leaf.t()[1:]}
    return leaf, views[layout]()


def views_after_a_write(y, w):
    v = y[..., 3]
    y[y > 0] = 0.75
    return v, y[1:][..., 2], y * w


def views_of_an_input_requiring_grad(y, w):
    return y[1], y[:, 1:][1:], y * w


def _run(function, rows, layout, input_grad):
    torch.manual_seed(rows)
    leaf, y = _inputs(rows, layout, input_grad)
    w = torch.tensor(2.0, requires_grad=True)
    outputs = function(y, w)
    facts = [(tuple(value.shape), value.stride(), value.storage_offset(),
              value._base is not None, value.detach().tolist()) for value in outputs]
    sum(value.sum() for value in outputs if value.requires_grad).backward()
    return facts, y.detach().tolist(), w.grad.tolist(), \
        leaf.grad.tolist() if input_grad else None


@pytest.mark.parametrize("layout", ["offset", "every_other_column", "transposed"])
@pytest.mark.parametrize("function,input_grad", [(views_after_a_write, False),
                                                 (views_of_an_input_requiring_grad, True)])
def test_view_inputs_of_a_training_graph(function, input_grad, layout):
    jitted = dynamo.jit(function, backend="inductor", dynamic=True)
    for rows in (5, 7):
        assert _run(jitted, rows, layout, input_grad) == _run(function, rows, layout, input_grad)
