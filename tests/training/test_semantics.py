"""Autograd semantics of compiled training graphs, each against eager: outputs that do not need
grad, integer and bool outputs, aliased outputs, mutated inputs, retain_graph, .grad
accumulation, no_grad calls, autocast, double backward, dropout masks."""
import pytest
import torch
import torch.nn.functional as F

import dynamo
from inductor.autograd import DoubleBackwardError, compile_training, run_graph
from inductor.autograd import EagerVariant
from inductor.autograd.runtime import InferenceVariant, TrainingVariant
from tests.training.harness import RecordingBackend, assert_close

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


def leaf(*shape, grad=True):
    return torch.randn(*shape).requires_grad_(grad)


def compiled_fx(fn, *inputs):
    """`fn` symbolically traced and compiled straight through `compile_training`."""
    graph = torch.fx.symbolic_trace(fn)
    return compile_training(graph, list(inputs), run_graph)


def clones(*inputs):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]


def run_both(fn, compiled, inputs, loss=lambda out: out.sum()):
    """Eager and compiled forward + backward on clones of `inputs`; returns both sides."""
    sides = []
    for runner in (fn, compiled):
        arguments = clones(*inputs)
        torch.manual_seed(7)
        output = runner(*arguments)
        loss(output).backward()
        sides.append((output, arguments))
    return sides


def assert_same_grads(sides):
    (_, eager_inputs), (_, jit_inputs) = sides
    for index, (a, b) in enumerate(zip(jit_inputs, eager_inputs)):
        if b.grad is None:
            assert a.grad is None, f"input {index} got a gradient eager does not give"
        else:
            assert_close(a.grad, b.grad, f"input {index}.grad", TOLERANCE)


def test_outputs_without_grad_and_integer_and_bool_outputs():
    def fn(x, w):
        y = x @ w
        return y, y.detach() * 2, y.argmax(-1), y > 0, (x * 0).sum().long()
    inputs = (leaf(3, 4), leaf(4, 5))
    compiled = compiled_fx(fn, *inputs)
    sides = run_both(fn, compiled, inputs, loss=lambda out: out[0].sum())
    (eager, _), (jit, _) = sides
    for a, b in zip(jit, eager):
        assert a.dtype == b.dtype and a.requires_grad == b.requires_grad
        assert_close(a, b, "output", TOLERANCE)
    assert_same_grads(sides)


def test_output_is_the_input_object():
    def fn(x, w):
        return x, x @ w
    inputs = (leaf(3, 4), leaf(4, 5))
    compiled = compiled_fx(fn, *inputs)
    x, w = clones(*inputs)
    same, product = compiled(x, w)
    assert same is x
    product.sum().backward()
    assert_close(x.grad, w.detach().sum(1).expand(3, 4), "x.grad", TOLERANCE)


def test_output_view_of_input_shares_storage_and_gradient():
    def fn(x, w):
        return w.t(), w[1:], x @ w
    inputs = (leaf(3, 4), leaf(4, 5))
    compiled = compiled_fx(fn, *inputs)
    sides = run_both(fn, compiled, inputs,
                     loss=lambda out: (out[0] * 2).sum() + (out[1] ** 2).sum() + out[2].sum())
    assert_same_grads(sides)
    (jit, (x, w)) = sides[1]
    assert jit[0].data_ptr() == w.data_ptr() and jit[0]._base is w
    assert jit[1].data_ptr() == w[1:].data_ptr()


def test_outputs_aliasing_each_other_and_an_intermediate():
    def fn(x, w):
        y = torch.tanh(x @ w)
        z = y * 2
        return y, y.view(-1), y[0], z[1], z[2]
    inputs = (leaf(3, 4), leaf(4, 5))
    compiled = compiled_fx(fn, *inputs)
    weights = [torch.randn(s) for s in ((3, 5), (15,), (5,), (5,), (5,))]
    sides = run_both(fn, compiled, inputs,
                     loss=lambda out: sum((o * w).sum() for o, w in zip(out, weights)))
    assert_same_grads(sides)
    jit = sides[1][0]
    assert jit[1].data_ptr() == jit[0].data_ptr() == jit[2].data_ptr()
    assert jit[3].untyped_storage().data_ptr() == jit[4].untyped_storage().data_ptr()
    with torch.no_grad():
        jit[0].add_(1)          # visible through the views, as in eager
    assert_close(jit[1].view(3, 5), jit[0], "view after in-place", TOLERANCE)


def test_same_tensor_returned_twice_is_one_object():
    def fn(x):
        y = x * 2
        return y, y
    compiled = compiled_fx(fn, leaf(3))
    a, b = compiled(leaf(3))
    assert a is b


def test_mutated_buffer_input():
    def fn(x, buffer):
        buffer.mul_(0.9).add_(x.detach().mean(0) * 0.1)
        buffer[0].add_(1)
        return (x * buffer).sum()
    inputs = (leaf(3, 4), torch.zeros(4))
    compiled = compiled_fx(fn, *inputs)
    sides = run_both(fn, compiled, inputs, loss=lambda out: out)
    assert_same_grads(sides)
    assert_close(sides[1][1][1], sides[0][1][1], "buffer after the call", TOLERANCE)
    assert not sides[1][1][1].requires_grad


def _op_counts(function, *names):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        function()
    found = {event.key: event.count for event in profiler.key_averages()}
    return {name: found.get(name, 0) for name in names}


def test_batchnorm_statistics_are_copied_back_in_one_call():
    """Training BatchNorm updates three buffers per layer; the compiled step writes them back with
    one `_foreach_copy_` per dtype (not a `copy_` call each), and allocates no zero
    gradients for those non-differentiable outputs. Buffers, outputs and gradients match
    eager."""
    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.Flatten(),
            torch.nn.Linear(8 * 8 * 8, 4), torch.nn.BatchNorm1d(4)).train()
    eager, model = build(), build()
    compiled = dynamo.jit(model)
    x = torch.randn(4, 3, 12, 12)
    for _ in range(2):
        eager(x).square().sum().backward()
        compiled(x).square().sum().backward()
    for (name, a), b in zip(model.named_buffers(), eager.buffers()):
        assert_close(a, b, name, TOLERANCE)
    for (name, a), b in zip(model.named_parameters(), eager.parameters()):
        # float32 batch statistics summed in another order, then divided by small variances
        assert_close(a.grad, b.grad, f"{name}.grad", {"rtol": 1e-3, "atol": 1e-4})
    counts = _op_counts(lambda: compiled(x).square().sum().backward(),
                        "aten::_foreach_copy_", "aten::zeros")
    # one call for the float32 statistics, one for the int64 counters
    assert counts == {"aten::_foreach_copy_": 2, "aten::zeros": 0}, counts


def test_writes_into_inputs_sharing_a_storage_run_eagerly():
    """Two updated inputs that are views of one storage: the functional graph would treat
    them as independent (the write through one not showing in the other), so the graph runs
    as it is, with eager's result."""
    def fn(x, first, second):
        with torch.no_grad():
            first.add_(1)
            second.mul_(3)
        return (x * 2).sum()
    expected = torch.zeros(6)
    fn(leaf(3), expected[:4], expected[2:])
    storage = torch.zeros(6)
    compiled = compiled_fx(fn, leaf(3), storage[:4], storage[2:])
    storage.zero_()
    compiled(leaf(3), storage[:4], storage[2:]).backward()
    assert_close(storage, expected, "shared storage", TOLERANCE)
    assert isinstance(next(iter(compiled.variants.values())), EagerVariant)


def test_unused_differentiable_output_gets_a_zero_gradient():
    """Gradients are not materialized by autograd: an output the loss ignores still feeds
    the backward graph zeros of its shape, as eager would."""
    def fn(x, w):
        y = x @ w
        return y.sin(), y.cos() * 2
    inputs = (leaf(3, 4), leaf(4, 5))
    compiled = compiled_fx(fn, *inputs)
    sides = run_both(fn, compiled, inputs, loss=lambda out: out[1].sum())
    assert_same_grads(sides)
    sides = run_both(fn, compiled, inputs, loss=lambda out: out[0].sum())
    assert_same_grads(sides)


def test_mutated_input_that_requires_grad():
    def fn(x, w):
        x.mul_(w)
        return (x * 3).sum()
    base, weight = leaf(4), leaf(4)
    compiled = compiled_fx(fn, base * 1, weight)
    results = []
    for runner in (fn, compiled):
        b, w = clones(base, weight)
        x = b * 1                      # a non-leaf: updating it in place is legal
        out = runner(x, w)
        (out + x.sum()).backward()     # x's new value is differentiated too
        results.append((out, x, b.grad, w.grad))
    for a, b in zip(results[1], results[0]):
        assert_close(a, b, "mutated non-leaf", TOLERANCE)


def test_mutating_a_leaf_that_requires_grad_raises_like_eager():
    def fn(x):
        x.add_(1)
        return x * 2
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        fn(leaf(3))
    compiled = compiled_fx(fn, leaf(3) * 1)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        compiled(leaf(3))


def test_retain_graph_and_gradient_accumulation():
    def fn(x, w):
        return torch.sigmoid(x @ w)
    inputs = (leaf(3, 4), leaf(4, 5))
    compiled = compiled_fx(fn, *inputs)
    grads = []
    for runner in (fn, compiled):
        x, w = clones(*inputs)
        out = runner(x, w)
        out.sum().backward(retain_graph=True)
        (out * 2).sum().backward()                 # second backward through the same graph
        runner(x, w).pow(2).sum().backward()       # a new call accumulates into .grad
        grads.append((x.grad, w.grad))
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            out.sum().backward()
    assert_close(grads[1][0], grads[0][0], "x.grad", TOLERANCE)
    assert_close(grads[1][1], grads[0][1], "w.grad", TOLERANCE)


def test_no_grad_call_uses_no_joint_graph():
    def fn(x, w):
        return torch.relu(x @ w)
    inputs = (leaf(3, 4), leaf(4, 5))
    compiled = compiled_fx(fn, *inputs)
    with torch.no_grad():
        out = compiled(*inputs)
    assert not out.requires_grad
    assert_close(out, fn(*inputs).detach(), "no_grad output", TOLERANCE)
    kinds = {type(v) for v in compiled.variants.values()}
    assert kinds == {TrainingVariant, InferenceVariant}
    with torch.inference_mode():
        assert_close(compiled(*inputs), fn(*inputs), "inference_mode output", TOLERANCE)


def test_no_grad_call_first_traces_no_joint():
    def fn(x, w):
        return torch.relu(x @ w)
    inputs = (leaf(3, 4), leaf(4, 5))
    with torch.no_grad():
        compiled = compiled_fx(fn, *inputs)
        compiled(*inputs)
    assert all(isinstance(v, InferenceVariant) for v in compiled.variants.values())
    out = compiled(*inputs)           # grad mode back on: a training variant is compiled now
    assert out.requires_grad and isinstance(list(compiled.variants.values())[-1],
                                            TrainingVariant)


def test_requires_grad_pattern_selects_variant():
    def fn(x, w):
        return (x @ w).sum()
    compiled = compiled_fx(fn, leaf(3, 4), leaf(4, 5))
    x, w = leaf(3, 4, grad=False), leaf(4, 5)
    compiled(x, w).backward()
    assert x.grad is None and w.grad is not None
    frozen = compiled(leaf(3, 4, grad=False), leaf(4, 5, grad=False))
    assert not frozen.requires_grad


def test_unused_input_gets_no_gradient():
    def fn(x, w, unused):
        return (x @ w).sum()
    inputs = (leaf(3, 4), leaf(4, 5), leaf(2))
    compiled = compiled_fx(fn, *inputs)
    sides = run_both(fn, compiled, inputs, loss=lambda out: out)
    assert sides[1][1][2].grad is None
    assert_same_grads(sides)


def test_autocast_cpu_bfloat16():
    def fn(x, w, b):
        h = F.linear(x, w, b)                  # bfloat16 under autocast
        return torch.softmax(h.float(), -1).log() + h
    inputs = (leaf(4, 8), leaf(6, 8), leaf(6))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        compiled = compiled_fx(fn, *inputs)
    sides = []
    for runner in (fn, compiled):
        arguments = clones(*inputs)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = runner(*arguments)
        out.float().sum().backward()
        sides.append((out, arguments))
    (eager, eager_inputs), (jit, jit_inputs) = sides
    assert jit.dtype == eager.dtype
    loose = {"rtol": 2e-2, "atol": 2e-2}
    assert_close(jit, eager, "autocast output", loose)
    for a, b in zip(jit_inputs, eager_inputs):
        assert a.grad.dtype == b.grad.dtype
        assert_close(a.grad, b.grad, "autocast grad", loose)
    outside = compiled(*inputs)              # the same graph outside autocast: a new variant
    assert_close(outside, fn(*inputs), "fp32 output", TOLERANCE)


def test_double_backward_is_refused():
    def fn(x, w):
        return torch.tanh(x @ w).sum()
    inputs = (leaf(3, 4), leaf(4, 5))
    compiled = compiled_fx(fn, *inputs)
    x, w = clones(*inputs)
    with pytest.raises(DoubleBackwardError, match="create_graph=True"):
        torch.autograd.grad(compiled(x, w), w, create_graph=True)


def test_dropout_masks_match_eager_and_the_backward():
    def fn(x, w):
        return F.dropout(x @ w, 0.5, training=True)
    inputs = (leaf(16, 8), leaf(8, 32))
    compiled = compiled_fx(fn, *inputs)
    sides = run_both(fn, compiled, inputs)
    (eager, _), (jit, (x, w)) = sides
    assert torch.equal(jit != 0, eager != 0)       # same seed: the same elements dropped
    assert_same_grads(sides)
    # Two calls draw two masks; each backward uses its own call's mask.
    torch.manual_seed(1)
    first = compiled(x, w)
    second = compiled(x, w)
    assert not torch.equal(first != 0, second != 0)
    w.grad = None
    first.sum().backward()
    expected = x.detach().t() @ ((first != 0).float() * 2)
    assert_close(w.grad, expected, "grad through the first call's mask", TOLERANCE)


def test_dynamo_jit_function_with_grad_inputs():
    def fn(x, w, b):
        h = torch.relu(x @ w + b)
        return h.mean(), h.argmax(-1)
    inputs = (leaf(5, 4), leaf(4, 3), leaf(3))
    backend = RecordingBackend()
    jitted = dynamo.jit(fn, backend=backend)
    sides = run_both(fn, jitted, inputs, loss=lambda out: out[0])
    assert_same_grads(sides)
    assert backend.training_variants


def test_same_tensor_passed_twice_accumulates_both_gradients():
    def fn(a, b):
        return (a * b.sin()).sum()
    weight = leaf(5)
    compiled = compiled_fx(fn, weight, weight)
    expected_weight = weight.detach().clone().requires_grad_()
    fn(expected_weight, expected_weight).backward()
    compiled(weight, weight).backward()
    assert_close(weight.grad, expected_weight.grad, "grad of a tensor passed twice", TOLERANCE)


def test_python_number_inputs_are_constants_of_their_variant():
    def fn(x, scale):
        return (x * scale).sum()
    compiled = compiled_fx(fn, leaf(3), 2.0)
    for scale in (2.0, 3.0, 2.0):
        x = leaf(3)
        compiled(x, scale).backward()
        assert_close(x.grad, torch.full((3,), scale), f"grad for scale {scale}", TOLERANCE)
    assert len(compiled.variants) == 2


def test_metadata_mutation_of_an_input_runs_eagerly():
    def fn(x, w):
        w.t_()
        return (x @ w).sum()
    inputs = (leaf(3, 4), torch.randn(5, 4))
    compiled = compiled_fx(fn, *inputs)
    sides = run_both(fn, compiled, inputs, loss=lambda out: out)
    assert_same_grads(sides)
    assert sides[1][1][1].shape == (4, 5)


def test_data_dependent_graph_runs_eagerly():
    def fn(x, w):
        kept = x[x > 0]                      # output shape depends on the data
        return (kept * w.sum()).sum()
    inputs = (torch.randn(8), leaf(3))
    compiled = compiled_fx(fn, *inputs)
    sides = run_both(fn, compiled, inputs, loss=lambda out: out)
    assert_same_grads(sides)


def test_dropout_of_a_transposed_input_draws_eager_mask():
    """Eager CPU dropout fills a mask laid out like its input, in memory order."""
    def fn(x, w):
        return F.dropout((x @ w).t(), 0.3, training=True) * 2
    inputs = (leaf(6, 4), leaf(4, 9))
    compiled = compiled_fx(fn, *inputs)
    sides = run_both(fn, compiled, inputs)
    (eager, _), (jit, _) = sides
    assert torch.equal(jit != 0, eager != 0)
    assert_same_grads(sides)
