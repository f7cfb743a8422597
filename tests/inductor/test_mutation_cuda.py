"""Mutation, aliasing, views and grad mode on CUDA tensors (Triton kernels), against eager CUDA.

The CPU tests (`test_mutation_semantics.py`, `test_mutation_update_rounding.py`) hold the
reasoning; these run the same model on a GPU: in-place updates in program order, the aliasing
check, outputs viewing intermediates, grad-mode regions, a 0-d CPU constant in a CUDA graph
(graph-fuzzer class 15), zero-size buffers, and updates rounded as eager's CUDA kernels."""
import copy
import operator

import pytest
import torch
import torch.fx

import inductor

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def cuda(*values):
    return tuple(value.cuda() for value in values)


def check(function, inputs, exact=True, compile_inputs=None):
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function)
                                   if not isinstance(function, torch.fx.GraphModule)
                                   else function, list(compile_inputs or inputs))
    eager_inputs, jit_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
    expected, actual = function(*eager_inputs), compiled(*jit_inputs)
    tolerance = {"rtol": 0, "atol": 0} if exact else {}
    torch.testing.assert_close(actual, expected, **tolerance)
    torch.testing.assert_close(jit_inputs, eager_inputs, **tolerance)
    return compiled


def test_update_reads_the_old_value_of_an_updated_input():
    def function(x, s):
        x.add_(1)
        s.add_(x)
        return s
    check(function, cuda(torch.ones(1000), torch.zeros(1000)))


def test_sgd_momentum_step():
    def step(p, g, buf):
        buf.mul_(0.9).add_(g)
        p.add_(buf, alpha=-0.1)
        return p
    torch.manual_seed(0)
    check(step, cuda(torch.randn(1000), torch.randn(1000), torch.randn(1000)))


@pytest.mark.parametrize("name", ["add_alpha", "addcmul", "addcdiv", "addcmul_value_1",
                                  "addcmul_0d", "addcdiv_value_1", "lerp", "lerp_tensor"])
def test_updates_round_as_eager(name):
    updates = {
        "add_alpha": lambda a, b, c, w: a.add(b, alpha=-0.37),
        "addcmul": lambda a, b, c, w: a.addcmul(b, c, value=-0.37),
        "addcdiv": lambda a, b, c, w: a.addcdiv(b, c, value=-0.37),
        # value 1: ATen's CUDA kernel is fma(b, c, a), not fma(1, b * c, a)
        "addcmul_value_1": lambda a, b, c, w: a.addcmul(b, c),
        # an optimizer's `p.add_(g, alpha=-lr)` with lr a 0-d float64 tensor on the device
        "addcmul_0d": lambda a, b, c, w: a.addcmul(b, (w[0] - 2).double()),
        "addcdiv_value_1": lambda a, b, c, w: a.addcdiv(b, c),
        "lerp": lambda a, b, c, w: a.lerp(b, 0.9),
        "lerp_tensor": lambda a, b, c, w: a.lerp(b, w),
    }
    torch.manual_seed(0)
    check(updates[name], cuda(torch.randn(4096), torch.randn(4096),
                              torch.randn(4096).abs() + 0.5, torch.rand(4096)))


@pytest.mark.expect_fallback("unsupported", reason="a write into one of two inputs sharing a "
                             "storage runs as is (the variant compiled for that call)")
def test_compiled_for_distinct_inputs_called_with_one_tensor_twice():
    def function(a, b):
        a.mul_(3)
        return b + 1
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function),
                                   list(cuda(torch.ones(8), torch.ones(8))))
    a = torch.ones(8, device="cuda")
    assert compiled(a, a).tolist() == [4.0] * 8 and a.tolist() == [3.0] * 8


def test_views_of_intermediates():
    check(lambda x: ((x + 1)[:1], x + 1), cuda(torch.randn(4)))
    first, second = check(lambda a: (a + 1).chunk(2, 1), cuda(torch.randn(4, 4)))(
        torch.zeros(4, 4, device="cuda"))
    assert first.untyped_storage().data_ptr() == second.untyped_storage().data_ptr()


def test_no_grad_region():
    graph = torch.fx.Graph()
    x, weight, bias = (graph.placeholder(name) for name in ("x", "weight", "bias"))
    graph.call_function(torch._C._set_grad_enabled, (False,))
    y = graph.call_function(torch.nn.functional.linear, (x, weight, bias))
    graph.call_function(torch._C._set_grad_enabled, (True,))
    graph.output((y,))
    inputs = cuda(torch.randn(2, 3), torch.randn(3, 3), torch.randn(3))
    inputs[1].requires_grad_(True)
    compiled = inductor.compile_fx(torch.fx.GraphModule({}, graph), list(inputs))
    (result,) = compiled(*inputs)
    assert not result.requires_grad


def test_zero_dim_cpu_constant_in_a_cuda_graph():
    """`x[...] = False` stores a 0-d CPU constant: the graph ran as is ("inputs on several
    devices") until lifted scalars moved to the graph's device."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.call_function(operator.setitem, (x, (Ellipsis,), False))
    graph.output((graph.call_function(operator.add, (x, 1)),))
    module = torch.fx.GraphModule({}, graph)
    compiled = check(module, (torch.ones(3, 4, dtype=torch.bool, device="cuda"),))
    assert compiled.report.reason is None


def test_zero_size_buffers():
    check(lambda a, b: (a * 2, b + 1), cuda(torch.randn(0, 5), torch.randn(3)))


@pytest.mark.parametrize("weight_decay", [0.0, 0.1], ids=["adam", "adamw"])
def test_adam_steps_bit_for_bit_with_torch_optim(weight_decay):
    """torch.optim's single-tensor Adam/AdamW update, its Python-float scalars as constants
    (one graph per step), against torch.optim itself over 20 steps."""
    torch.manual_seed(0)
    reference = torch.nn.Parameter(torch.randn(4096, device="cuda"))
    optimizer = (torch.optim.AdamW([reference], lr=0.01, weight_decay=weight_decay,
                                   foreach=False) if weight_decay else
                 torch.optim.Adam([reference], lr=0.01, foreach=False))
    param = reference.detach().clone()
    exp_avg, exp_avg_sq = torch.zeros_like(param), torch.zeros_like(param)
    for step in range(1, 21):
        step_size = 0.01 / (1 - 0.9 ** step)
        correction_sqrt = (1 - 0.999 ** step) ** 0.5

        def update(param, grad, exp_avg, exp_avg_sq):
            if weight_decay:
                param.mul_(1 - 0.01 * weight_decay)
            exp_avg.lerp_(grad, 1 - 0.9)
            exp_avg_sq.mul_(0.999).addcmul_(grad, grad, value=1 - 0.999)
            denominator = (exp_avg_sq.sqrt() / correction_sqrt).add_(1e-8)
            param.addcdiv_(exp_avg, denominator, value=-step_size)
        grad = torch.randn(4096, device="cuda")
        reference.grad = grad.clone()
        optimizer.step()
        arguments = [param, grad, exp_avg, exp_avg_sq]
        inductor.compile_fx(torch.fx.symbolic_trace(update), arguments)(*arguments)
        assert torch.equal(exp_avg, optimizer.state[reference]["exp_avg"]), f"step {step}"
        assert torch.equal(exp_avg_sq, optimizer.state[reference]["exp_avg_sq"]), f"step {step}"
        assert torch.equal(param, reference.detach()), f"step {step}"
