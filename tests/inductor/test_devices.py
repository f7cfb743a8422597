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


def test_without_placement_the_mismatch_is_a_compile_time_error(fake_mode):
    """What the H100 ran into, caught before launch: the kernel would take the CPU constant."""
    gm = graph_module(copied_constant, {"_tensor_constant0": torch.tensor([1., 2., 3.])})
    with pytest.raises(devices.DeviceMismatch, match=r"const0 \(from _tensor_constant0\), "
                                                      r"a constant held by the graph on cpu"):
        kernel_devices(gm, fake_mode, place=False)


def test_constants_held_by_reference_stay_and_are_reported(fake_mode):
    """A module's own tensor may change between calls: never copied, so a kernel reading it
    on another device is a compile-time `DeviceMismatch` (a counted fallback), not a crash."""
    gm = graph_module(held("running_scale"), {"running_scale": torch.tensor(3.)})
    with pytest.raises(devices.DeviceMismatch, match="running_scale"):
        kernel_devices(gm, fake_mode)
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
