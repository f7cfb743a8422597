"""Program fuzzer, inductor seed 11550 (P30): a training graph returned `y[..., 3]` of an input
`y` at storage offset 4 and then wrote `y[y > 0] = 0.75`; the view was rebuilt at offset
4 + 7 (setStorage ... out of bounds). The analysis read layouts from functional wrappers, whose
layout is that of their current value: the write replaced the input's value by a fresh
tensor (offset 0, contiguous), an input requiring grad was a contiguous clone from the start,
and a view kept the layout of the value it was made of. Layouts now come from a run on plain
fake tensors (`signature._eager_layouts`). Also covered: views made after the write,
views of views, inputs whose strides are not dense (`[:, 1::2]`, a transpose), inputs
requiring grad, the inference path."""
import pytest
import torch

import dynamo


def _inputs(layout, input_grad):
    """(the leaf, the input: a view of it at an offset or with strides that are not dense)."""
    shape = (4, 8) if layout == "every_other_column" else (5, 4)
    leaf = torch.randint(-4, 5, shape).float()   # small integers: gradients' sums are exact
    leaf.requires_grad_(input_grad)
    if layout == "offset":
        return leaf, leaf[1:]
    if layout == "every_other_column":
        return leaf, leaf[:, 1::2]
    return leaf, leaf.t()[1:]    # (3, 5), strides (1, 4), offset 1


def _write_between_views(y, w):
    v = y[..., 3]
    y[y > 0] = 0.75
    u = y[1:][..., 2]            # a view of a view, made after the write
    return v, u, y * w


def _write_in_place_then_view(y, w):
    y.mul_(2)
    return y[1], y.t()[1:], w * 3


def _views_of_an_input_requiring_grad(y, w):
    return y[1], y[:, 1:][1:], y * w


def _write_intermediate_between_views(y, w):
    c = (y * w).t()
    v = c[..., 2]
    c[c > 0] = 0.75
    u = c[1:][..., 1]
    return v, u, c


def _write_hidden_intermediate_between_views(y, w):
    c = (y * w).t()
    v = c[..., 2]
    c.mul_(2)
    u = c[1:][..., 1]
    return v, u


def _facts(value, storages):
    if not isinstance(value, torch.Tensor):
        return value
    storage = value.untyped_storage().data_ptr()
    return (tuple(value.shape), value.stride(), value.storage_offset(),
            storages.index(storage) if storage in storages else None,
            value.requires_grad, value._base is not None, value.detach().tolist())


def _run(fn, layout, grad, input_grad, seed):
    torch.manual_seed(seed)
    leaf, y = _inputs(layout, input_grad)
    w = torch.tensor(2.0, requires_grad=grad)
    storages = [y.untyped_storage().data_ptr()]
    outputs = fn(y, w)
    storages += [value.untyped_storage().data_ptr() for value in outputs]
    facts = [_facts(value, storages) for value in outputs]
    grads = None
    if grad:
        total = sum(value.sum() for value in outputs if value.requires_grad)
        total.backward()
        grads = (w.grad.tolist(), leaf.grad.tolist() if input_grad else None)
    return facts, y.detach().tolist(), grads


CASES = [(_write_between_views, False), (_write_in_place_then_view, False),
         (_views_of_an_input_requiring_grad, True), (_write_intermediate_between_views, False),
         (_write_hidden_intermediate_between_views, False)]


@pytest.mark.parametrize("layout", ["offset", "every_other_column", "transposed"])
@pytest.mark.parametrize("grad", [True, False], ids=["w_requires_grad", "no_grad"])
@pytest.mark.parametrize("fn,input_grad", CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_views_of_inputs_keep_eager_layout(code_generator, fn, input_grad, grad, layout):
    jitted = dynamo.jit(fn, backend=code_generator)
    for seed in range(2):
        expected = _run(fn, layout, grad, input_grad, seed)
        assert _run(jitted, layout, grad, input_grad, seed) == expected


_LIN = torch.nn.Linear(4, 4)
with torch.no_grad():   # small integers: the sums are exact
    _LIN.weight.copy_(torch.arange(16.0).reshape(4, 4) % 5 - 2)
    _LIN.bias.fill_(1.0)


def _seed_11550(x, y, lst):
    t1 = _LIN(x)
    l1 = [(y - float(t1.sum())) for q1 in lst]    # a graph break
    _t3 = y[..., 3]
    y[y > 0] = 0.75
    return {"r0": l1, "r1": y, "r2": t1}


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
def test_seed_11550(code_generator):
    jitted = dynamo.jit(_seed_11550, backend=code_generator)
    for fn in (_seed_11550, jitted, jitted):
        torch.manual_seed(0)
        args = (torch.randint(-4, 5, (5, 4)).float()[1:], torch.randn(5, 4)[1:],
                [torch.randn(5)[1:] for _ in range(2)])
        result = fn(*args)
        facts = ([value.tolist() for value in result["r0"]], result["r1"].tolist(),
                 result["r1"] is args[1], result["r2"].detach().tolist(), args[1].tolist())
        if fn is _seed_11550:
            expected = facts
        else:
            assert facts == expected
