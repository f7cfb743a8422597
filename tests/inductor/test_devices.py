"""Devices (issue 21): every constant and buffer a graph's kernels take is on the graph's device.

On an H100, MistralForCausalLM failed with `Pointer argument (at 0) cannot be accessed from
Triton (cpu tensor?)`: `torch.tensor(data, device="cuda")` traces through make_fx as a CPU
constant `_tensor_constant<n>` and a `_to_copy` to the GPU; `compile_aten` reads such
`get_attr` tensors in place and the `_to_copy` lowering keeps a value on its device, so a
Triton kernel was handed the CPU tensor. There is no GPU here: the graphs are compiled for
"cuda" with fake tensors up to the Triton source, and the devices of what each kernel takes
are checked without running anything (`codegen/devices.py`).
"""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from inductor.codegen import devices
from inductor.codegen.triton import source as triton_source
from inductor.lower import lower
from inductor.schedule.scheduler import schedule
from inductor.schedule.tiling import Target, tile

aten = torch.ops.aten
CUDA = torch.device("cuda:0")


@pytest.fixture
def fake_mode(monkeypatch):
    """A fake-tensor mode; constants are "copied" to the GPU as fake tensors."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)

    def copy_to(value, device):
        with mode:
            return mode.from_tensor(value).to(device) if not isinstance(
                value, torch._subclasses.FakeTensor) else value.to(device)
    monkeypatch.setattr(devices, "copy_to", copy_to)
    return mode


def graph_module(build, constants: dict) -> torch.fx.GraphModule:
    """An ATen graph: `build(graph, x)` returns the outputs; `constants`: attributes."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(list(build(graph, x)))
    root = torch.nn.Module()
    for name, value in constants.items():
        setattr(root, name, value)
    return torch.fx.GraphModule(root, graph)


def kernel_devices(gm, mode, place=True) -> dict:
    """Compile `gm` for CUDA up to the Triton source: {kernel argument: device}."""
    with mode:
        x = torch.empty(4, 3, device=CUDA)
    if place:
        devices.place_traced_constants(gm, CUDA)
    FakeTensorProp(gm, mode).propagate(x)
    plan = schedule(lower(gm, [x], None))
    tile(plan, Target("cuda", 132, 32768))
    module = triton_source.generate(plan, lambda name: plan.buffers[name].get_dtype(),
                                    interpret=False, device=CUDA)
    return {name: str(plan.buffers[name].get_device()) for kernel in module.kernels
            for name in kernel.arguments}


def copied_constant(graph, x):
    """x + torch.tensor([1., 2., 3.], device="cuda"), as make_fx traces it."""
    constant = graph.get_attr("_tensor_constant0")
    fresh = graph.call_function(aten.lift_fresh_copy.default, (constant,))
    moved = graph.call_function(aten._to_copy.default, (fresh,),
                                {"dtype": torch.float32, "device": CUDA})
    return [graph.call_function(aten.add.Tensor, (x, moved))]


def scalar_constant(graph, x, name="_tensor_constant0"):
    """x * torch.tensor(4096): eager reads the 0-d CPU tensor as a scalar."""
    constant = graph.get_attr(name)
    return [graph.call_function(aten.mul.Tensor, (x, constant))]


def held(name):
    """x * a tensor the module holds as `name` (a buffer: read by reference)."""
    return lambda graph, x: scalar_constant(graph, x, name)


@pytest.mark.parametrize("build, value", [(copied_constant, torch.tensor([1., 2., 3.])),
                                          (scalar_constant, torch.tensor(4096.))])
def test_traced_constants_reach_kernels_on_the_graph_device(fake_mode, build, value):
    gm = graph_module(build, {"_tensor_constant0": value})
    arguments = kernel_devices(gm, fake_mode)
    assert arguments and set(arguments.values()) == {"cuda:0"}, arguments
    assert gm._tensor_constant0.device == CUDA


def test_without_placement_the_copy_is_a_transfer(fake_mode):
    """What the H100 ran into (the kernel took the CPU constant) cannot happen even without
    the placement: the copy to the GPU runs through ATen; placing the constant once saves
    that transfer on every call."""
    gm = graph_module(copied_constant, {"_tensor_constant0": torch.tensor([1., 2., 3.])})
    arguments = kernel_devices(gm, fake_mode, place=False)
    assert arguments and set(arguments.values()) == {"cuda:0"}, arguments


def test_zero_d_constants_held_by_reference_stay_and_are_copied_at_launch(fake_mode):
    """A module's own tensor may change between calls: never copied at compile time. Eager
    mixes only 0-d CPU tensors with GPU ones, and a kernel reads such a one as eager does,
    as a scalar, through a copy made at each launch (`host_scalar_argument`): never stale.
    (Before, a compile-time `DeviceMismatch` and the graph ran through eager kernels.)"""
    gm = graph_module(held("running_scale"), {"running_scale": torch.tensor(3.)})
    assert sorted(kernel_devices(gm, fake_mode).values()) == ["cpu", "cuda:0", "cuda:0"]
    assert gm.running_scale.device.type == "cpu"


def test_constants_that_are_outputs_or_written_stay(fake_mode):
    def returned(graph, x):
        return [graph.call_function(aten.mul.Tensor, (x, 2.0)),
                graph.get_attr("_tensor_constant0")]
    gm = graph_module(returned, {"_tensor_constant0": torch.tensor(4096.)})
    assert devices.place_traced_constants(gm, CUDA) == []

    def written(graph, x):
        constant = graph.get_attr("_tensor_constant0")
        graph.call_function(aten.add_.Tensor, (constant, 1.0))
        return [graph.call_function(aten.mul.Tensor, (x, constant))]
    gm = graph_module(written, {"_tensor_constant0": torch.tensor(4096.)})
    assert devices.place_traced_constants(gm, CUDA) == []


def test_cpu_kernels_take_host_memory_only(fake_mode):
    """The C++ code generator checks the same: a CUDA tensor handed to a C++ kernel."""
    from inductor.codegen.cpp import source as cpp_source
    with fake_mode:
        weight = torch.ones(3, device=CUDA)
    gm = graph_module(held("weight"), {"weight": weight})
    x = torch.randn(4, 3)
    plan = schedule(lower(gm, [x], None))
    with pytest.raises(devices.DeviceMismatch, match="weight"):
        cpp_source.segments(plan, lambda name: plan.buffers[name].get_dtype(), 1, 32768, True)


def test_cpu_graphs_with_traced_constants_run_as_eager():
    """End to end on the CPU (C++): the placement pass leaves CPU graphs as they were."""
    import inductor
    from torch.fx.experimental.proxy_tensor import make_fx

    def function(x):
        return (x * torch.tensor(3.0) + torch.tensor([1.0, 2.0, 3.0]),)
    x = torch.randn(4, 3)
    graph = make_fx(function)(x)
    assert graph.graph.find_nodes(op="get_attr")
    torch.testing.assert_close(inductor.compile_aten(graph, [x])(x)[0], function(x)[0])


def scale_of_a_constant(graph, x):
    """s = torch.tensor(64.).sqrt(); return x / s, s: eager computes s on the CPU (DeBERTa-v2's
    attention scale; its training graph saves s for the backward of the division)."""
    constant = graph.get_attr("_tensor_constant0")
    scale = graph.call_function(aten.sqrt.default, (constant,))
    return [graph.call_function(aten.div.Tensor, (x, scale)), scale]


def test_a_value_eager_computes_on_the_cpu_stays_there(fake_mode):
    """Moving the constant made the square root (an output, or a saved tensor of a training
    graph) a GPU tensor where eager's is a CPU one: the constant stays, the square root runs
    through its eager kernel on the CPU, and the division's kernel takes it as a 0-d CPU
    buffer (copied to the GPU at launch)."""
    gm = graph_module(scale_of_a_constant, {"_tensor_constant0": torch.tensor(64.)})
    with fake_mode:
        x = torch.empty(4, 3, device=CUDA)
    FakeTensorProp(gm, fake_mode).propagate(x)        # make_fx records these
    assert devices.place_traced_constants(gm, CUDA) == []
    loop_graph = lower(gm, [x], None)
    assert loop_graph.outputs[1].get_device().type == "cpu"
    assert "aten.sqrt" in loop_graph.fallback_ops
    arguments = kernel_devices(gm, fake_mode, place=False)
    assert sorted(arguments.values()) == ["cpu", "cuda:0", "cuda:0"], arguments


def saved_scale(graph, x):
    """A backward graph's shape: a saved 0-d CPU divisor first, then the gradient."""
    gradient = graph.placeholder("gradient")
    return [graph.call_function(aten.div.Tensor, (gradient, x))]


def test_a_gpu_graph_takes_a_cpu_scalar_input_copied_at_launch(fake_mode):
    """DeBERTa-v2's training graph fell back (DeviceMismatch: a kernel would take
    `_to_copy_76`, a 0-d CPU input): the kernel now takes a copy made before the launch."""
    from inductor import pipeline
    from inductor.codegen.triton import wrapper as triton_wrapper
    gm = graph_module(saved_scale, {})
    with fake_mode:
        scale, gradient = torch.empty((), device="cpu"), torch.empty(4, 3, device=CUDA)
    FakeTensorProp(gm, fake_mode).propagate(scale, gradient)
    assert pipeline._device_of([scale, gradient]) == CUDA
    assert pipeline._eager_only_reason([scale, gradient]) in (None, "Triton is not installed")
    plan = schedule(lower(gm, [scale, gradient], None, CUDA))
    tile(plan, Target("cuda", 132, 32768))
    module = triton_source.generate(plan, lambda name: plan.buffers[name].get_dtype(),
                                    interpret=False, device=CUDA)
    (kernel,) = module.kernels

    class Launcher:
        device = CUDA
    text, _call = triton_wrapper.generate(plan, {kernel.step: Launcher()},
                                          {kernel.step: kernel.arguments})
    assert "arg0_on_device = arg0.to(" in text and "arg0_on_device" in text.split("launch")[-1]


def test_a_cpu_scalar_a_kernel_writes_is_still_a_mismatch(fake_mode):
    """Only read: a kernel writing the copy would lose the write (`s.copy_(g.sum())`)."""
    def written(graph, scale):
        gradient = graph.placeholder("gradient")
        total = graph.call_function(aten.sum.default, (gradient,))
        graph.call_function(aten.copy_.default, (scale, total))
        return [graph.call_function(aten.mul.Tensor, (gradient, 2.0))]
    gm = graph_module(written, {})
    with fake_mode:
        scale, gradient = torch.empty((), device="cpu"), torch.empty(4, 3, device=CUDA)
    FakeTensorProp(gm, fake_mode).propagate(scale, gradient)
    plan = schedule(lower(gm, [scale, gradient], None, CUDA))
    tile(plan, Target("cuda", 132, 32768))
    with pytest.raises(devices.DeviceMismatch, match="arg0"):
        triton_source.generate(plan, lambda name: plan.buffers[name].get_dtype(),
                               interpret=False, device=CUDA)


def test_copies_to_another_device_are_transfers():
    """`_to_copy(x, device=...)` to another device runs through ATen (a loop body kept the
    value where it was): here a CPU graph copying to the meta device."""
    def function(x):
        return (x.to("meta") * 2, x + 1)
    from torch.fx.experimental.proxy_tensor import make_fx
    x = torch.randn(3)
    graph = make_fx(function)(x)
    loop_graph = lower(graph, [x], None)
    assert "aten._to_copy" in loop_graph.fallback_ops
    assert loop_graph.outputs[0].get_device().type == "meta"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cpu_scalars_in_gpu_graphs_on_the_gpu():
    import inductor
    from torch.fx.experimental.proxy_tensor import make_fx

    def function(x):
        scale = torch.tensor(64.).sqrt()
        return (x / scale, scale)

    def backward_like(scale, gradient):
        return (gradient / scale,)
    x = torch.randn(4, 3, device="cuda")
    graph = make_fx(function)(x)
    result = inductor.compile_aten(graph, [x])(x)
    assert result[1].device.type == "cpu" and result[0].device.type == "cuda"
    torch.testing.assert_close(result, list(function(x)))
    scale = torch.tensor(3.)
    graph = make_fx(backward_like)(scale, x)
    compiled = inductor.compile_aten(graph, [scale, x])
    assert compiled.report.reason is None
    torch.testing.assert_close(compiled(scale, x)[0], x / scale)
