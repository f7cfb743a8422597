"""One loop per parameter in a compiled optimizer step (`schedule/fusion.py`), against eager.

A functional optimizer step reads each param's old moments in the param update and then
writes the new moments into them: the updates of the moments may share the param update's
loop when every read of the old moment is at the element being written (each loop point
reads before it writes, and no point reads another's element). Checked here: the kernel
count per param for SGD with momentum, Adam and AdamW (C++ and Triton's CPU interpreter),
bit for bit over three steps with eager (Adam's sqrt through eager's kernel, as the optimizer
tests run it: eager's MKL sqrt is not correctly rounded) or with the same step compiled
without fusion (the generated sqrt), and graphs where the fusion must not happen or
must keep eager's answer: a written input read by outputs before and after the write, an
update reading an input another update writes at other elements (a flip, a transpose, a
row), a view of an input written in place, and two inputs sharing memory.
"""
import copy
import sys

import pytest
import torch
import torch.fx

import dynamo
import inductor
from inductor.schedule import scheduler

SHAPES = [(6, 4), (5,), (3, 2, 2)]
OPTIMIZERS = {
    "sgd-momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1),
}


@pytest.fixture(params=["cpp", "triton"])
def backend(request, monkeypatch):
    if request.param == "triton":
        pytest.importorskip("triton")
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    return request.param


class Plans:
    """Records the plan of every graph the scheduler builds."""

    def __init__(self, monkeypatch):
        self.plans = []
        original = scheduler.schedule

        def record(graph):
            plan = original(graph)
            if inductor.config.max_fusion_nodes > 1:   # not an unfused reference's
                self.plans.append(plan)
            return plan
        monkeypatch.setattr(scheduler, "schedule", record)

    def kernels_writing(self, plan, name: str) -> list:
        return [kernel.name for kernel in plan.kernels() if name in kernel.stores]


def _params():
    torch.manual_seed(0)
    return [torch.randn(shape).requires_grad_() for shape in SHAPES]


def _step(opt):
    opt.step()


def _unfused_step(opt):
    opt.step()


def _run(kind: str, steps: int = 3, reference: str = "eager"):
    """The optimizer step jitted on one copy of the params and run on another, compared bit
    for bit after every step (params and every state tensor): eagerly, or (`"unfused"`)
    jitted with no fusion at all (one loop per buffer, the generated code's own sqrt)."""
    params, twins = _params(), _params()
    optimizer, twin_optimizer = OPTIMIZERS[kind](params), OPTIMIZERS[kind](twins)
    jitted = dynamo.jit(_step, backend="inductor")
    twin_step = _step if reference == "eager" else \
        dynamo.jit(_unfused_step, backend="inductor")
    for number in range(steps):
        generator = torch.Generator().manual_seed(number)
        for param, twin in zip(params, twins):
            grad = torch.randn(param.shape, generator=generator)
            param.grad, twin.grad = grad.clone(), grad.clone()
        saved = inductor.config.max_fusion_nodes
        inductor.config.max_fusion_nodes = 1 if reference == "unfused" else saved
        try:
            twin_step(twin_optimizer)
        finally:
            inductor.config.max_fusion_nodes = saved
        jitted(optimizer)
        for index, (param, twin) in enumerate(zip(params, twins)):
            assert torch.equal(param.detach(), twin.detach()), (number, index)
            state, expected = optimizer.state[param], twin_optimizer.state[twin]
            assert list(state) == list(expected)
            for key, value in expected.items():
                assert torch.equal(state[key], value), (number, index, key)
    return params, optimizer


def _step_plan(plans: Plans):
    """The plan of the step with state present (the second graph: the first makes state)."""
    assert len(plans.plans) == 2, [plan.describe() for plan in plans.plans]
    return plans.plans[-1]


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_one_loop_per_param_writes_the_param_and_its_moments(kind, backend, monkeypatch):
    """Every param, and every moment of it, is written by one kernel, the same for all of
    them (before: the param update recomputed the moments, then one loop per moment wrote
    them back: three loops per Adam param, two per SGD one)."""
    monkeypatch.setattr(inductor.config, "fallback_ops", "")
    plans = Plans(monkeypatch)
    params, _optimizer = _run(kind, reference="eager" if kind == "sgd-momentum" else "unfused")
    plan = _step_plan(plans)
    names = {buffer.get_name(): position for position, buffer in enumerate(plan.inputs)}
    loops = [kernel for kernel in plan.kernels() if kernel.outer_sizes != []]
    assert len(loops) == len(params), plan.describe()
    moments = 1 if kind == "sgd-momentum" else 2
    for kernel in loops:
        written_inputs = [name for name in kernel.stores if name in names]
        assert len(written_inputs) == 1 + moments, plan.describe()
        assert len(kernel.stores) == 1 + moments, plan.describe()


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_adam_kernel_count_with_step_counters_on_the_host(kind, backend, monkeypatch):
    """The path CUDA params take (the step counters counted on the host): exactly one
    kernel per param."""
    from dynamo.variables import optimizer_updates
    monkeypatch.setattr(optimizer_updates, "step_counted_on_host", lambda entry: True)
    monkeypatch.setattr(inductor.config, "fallback_ops", "")
    plans = Plans(monkeypatch)
    params, _optimizer = _run(kind, reference="unfused")
    plan = _step_plan(plans)
    assert len(plan.kernels()) == len(params), plan.describe()


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_adam_with_eager_sqrt_fuses_each_moment_with_its_reader(kind, backend, monkeypatch):
    """With sqrt through eager's kernel (as the optimizer tests run it): the second moment's
    update shares the loop computing its new value, the first moment's the param update's
    (two loops per param around the sqrt, not three), bit for bit with eager."""
    monkeypatch.setattr(inductor.config, "fallback_ops", "aten.sqrt")
    plans = Plans(monkeypatch)
    params, _optimizer = _run(kind)
    plan = _step_plan(plans)
    loops = [kernel for kernel in plan.kernels() if kernel.outer_sizes != []]
    assert len(loops) == 2 * len(params), plan.describe()


# -- hazards: graphs through `inductor.compile_fx`, against eager ---------------------------

def _check(function, make_inputs):
    """Compile, then call twice on fresh inputs; results and mutated inputs as eager's, bit
    for bit. Returns the plans' kernel counts."""
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), list(make_inputs()))
    for _ in range(2):
        eager_inputs = make_inputs()
        jit_inputs = copy.deepcopy(eager_inputs)
        expected = function(*eager_inputs)
        actual = compiled(*jit_inputs)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        torch.testing.assert_close(jit_inputs, eager_inputs, rtol=0, atol=0)
    return compiled


def _adam_like_inputs():
    torch.manual_seed(1)
    return tuple(torch.randn(64) for _ in range(4))


def test_param_read_by_outputs_before_and_after_its_write(backend, monkeypatch):
    """Outputs reading the old param and the new one next to the fused update."""
    plans = Plans(monkeypatch)

    def step(p, g, m, v):
        before = p * 3
        m.mul_(0.9).add_(g, alpha=0.1)
        v.mul_(0.99).addcmul_(g, g, value=0.01)
        p.sub_(m / (v + 1.0) * 0.01)
        return before, p * 2, m + p
    _check(step, _adam_like_inputs)
    plan = plans.plans[-1]
    # one loop: the old param read, the moments and the param written, the outputs stored
    assert len(plan.kernels()) == 1, plan.describe()
    assert {"arg0", "arg2", "arg3"} <= set(plan.kernels()[0].stores), plan.describe()


def test_update_reading_another_updated_input_at_other_elements(backend):
    """`s` reads `x` flipped, and both read `g` at the point: `x`'s update in the loop of
    `s`'s would overwrite elements `s` still reads (the later half of the points would read
    updated values)."""
    def function(x, s, g):
        s.add_(x.flip(0) * g)
        x.add_(g)
        return s
    _check(function, lambda: (torch.arange(64.0), torch.zeros(64), torch.full((64,), 3.0)))


def test_update_reading_another_updated_input_transposed(backend):
    def function(x, s, g):
        s.add_(x.t() * g)
        x.add_(g)
        return x
    _check(function, lambda: (torch.arange(64.0).view(8, 8), torch.zeros(8, 8),
                              torch.full((8, 8), 3.0)))


def test_update_reading_a_row_of_an_input_written_in_place(backend):
    """Every point reads row 0 of `x`, which the update of `x` overwrites at point 0."""
    def function(x, s, g):
        s.add_(x[0] * g)
        x.mul_(g)
        return s
    _check(function, lambda: (torch.arange(32.0).view(4, 8), torch.zeros(4, 8),
                              torch.full((4, 8), 3.0)))


def test_view_of_an_input_written_in_place(backend):
    """A strided view of the written input, read before and after the write."""
    def function(x, g):
        old = x[::2] * 1
        x.add_(g)
        return old, x[::2] + 1, x.view(4, 4).t().contiguous()
    _check(function, lambda: (torch.arange(16.0), torch.ones(16)))


def test_row_normalised_in_place(backend):
    """An update reading a reduction of its own input (the reduction reads whole rows)."""
    def function(x):
        x.div_(x.sum(1, keepdim=True))
        return x
    _check(function, lambda: (torch.randint(1, 9, (4, 16)).float(),))   # exact sums


@pytest.mark.expect_fallback("unsupported",
                             reason="a write into one of two inputs sharing a storage runs as is")
def test_two_updated_inputs_sharing_memory(backend):
    """Two in-place updates through inputs that are one tensor at the call: eager's answer
    (the compiled form assumes distinct memory, so the call runs as is)."""
    def function(m, v, g):
        m.mul_(0.9).add_(g)
        v.mul_(0.5).add_(m)
        return v
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function),
                                   [torch.ones(8), torch.ones(8), torch.ones(8)])
    shared, expected = torch.ones(8), torch.ones(8)
    grad = torch.arange(8.0)
    function(expected, expected, grad)
    compiled(shared, shared, grad)
    assert torch.equal(shared, expected)


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_params_of_one_shape_bit_for_bit(kind, backend, monkeypatch):
    """Params of one shape, whose loops may share one kernel: eager's values over three
    steps (sqrt through eager's kernel)."""
    monkeypatch.setattr(inductor.config, "fallback_ops", "aten.sqrt")
    monkeypatch.setattr(sys.modules[__name__], "SHAPES", [(8, 8)] * 4 + [(5,)] * 2)
    _run(kind)


@pytest.mark.static_shapes(reason="the params are plain tensors: with every size dynamic each "
                           "has its own symbols, so no two are known to share a shape")
def test_adamw_params_of_one_shape_share_a_loop(backend, monkeypatch):
    """AdamW's params of one shape read one common scalar, so their loops share a kernel (a
    horizontal fusion GPT-2's step gets: 14 params of 256 elements in one loop): each kernel
    writes whole params (a param with both moments), several per loop; bit for bit with the
    step compiled without fusion."""
    monkeypatch.setattr(inductor.config, "fallback_ops", "")
    monkeypatch.setattr(sys.modules[__name__], "SHAPES", [(8, 8)] * 4 + [(5,)] * 2)
    plans = Plans(monkeypatch)
    params, _optimizer = _run("adamw", reference="unfused")
    plan = _step_plan(plans)
    inputs = {buffer.get_name() for buffer in plan.inputs}
    loops = [kernel for kernel in plan.kernels() if kernel.outer_sizes != []]
    assert len(loops) == 2, plan.describe()
    for kernel, count in zip(loops, (4, 2)):
        assert len(set(kernel.stores) & inputs) == 3 * count, plan.describe()
