"""Stage "lower": a functional ATen FX graph becomes a `LoopGraph` of loop-IR buffers.

Input: the graph, one example (fake or real) tensor per placeholder, and the strides eager
gives each output. Output: a `LoopGraph`: input buffers, the buffers in creation order
(computed loops, library calls, fallbacks), the outputs, and the in-place writes into inputs.

Each ATen node goes through its lowering (`lower/registry.py`) or, without one, becomes an
eager fallback. Values stay unrealized (inlined into readers) unless reused by several
readers with a costly body, read by a library call, or returned.
"""
from __future__ import annotations

import dataclasses
import operator
from typing import Any, Optional, Sequence

import sympy
import torch
import torch.fx
import torch.utils._pytree as pytree

from inductor.aliasing import memory_root
from inductor.config import config
from inductor.ir.layout import Layout
from inductor.ir.symbols import stride_expr, to_expr
from inductor.ir.nodes import (Buffer, ComputedBuffer, ConstantBuffer, InputBuffer, Pointwise,
                               ReinterpretView, SizeInput, StorageBox, TensorBox,
                               building)
from inductor.ir.ops import ops
from inductor.lower import extern
from inductor.lower.accumulate_into import accumulate_into_sums
from inductor.lower.elementwise import (body_cost, body_transcendentals, opmath_dtype,
                                        value_loader)
from inductor.lower.registry import lowering_for
from inductor.lower.shared_uses import uses_meet
from inductor.lower.size_floats import CONSUMERS as SIZE_FLOAT_CONSUMERS
from inductor.lower.size_floats import size_float
from inductor.size_variants import NotSymbolic

aten = torch.ops.aten

# Bodies reused by several readers are realized when they load more than this many values
# or perform more than this many operations (cheaper ones are recomputed in each reader).
REUSE_LOADS_THRESHOLD = 4
REUSE_OPS_THRESHOLD = 30


@dataclasses.dataclass
class LoopGraph:
    """The loop IR of one graph."""

    inputs: list                      # InputBuffer per placeholder
    buffers: list                     # ComputedBuffer / ExternKernel / MultiOutput, in order
    outputs: list                     # per output: Buffer, ReinterpretView, Python value or None
    fallback_ops: dict                # ATen op name -> nodes run through eager kernels
    library_calls: dict               # ATen op name -> nodes kept as library calls
    constants: list = dataclasses.field(default_factory=list)  # ConstantBuffers (get_attr)
    channels_last: bool = False       # 4-D activations kept NHWC (see prefers_channels_last)

    def buffer(self, name: str) -> Buffer:
        for buffer in self.inputs + self.constants + self.buffers:
            if buffer.get_name() == name:
                return buffer
        raise KeyError(name)


class GraphLowering(torch.fx.Interpreter):
    """Runs the ATen graph with lowerings in place of kernels."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence,
                 output_strides: Optional[Sequence] = None,
                 device: Optional[torch.device] = None):
        super().__init__(gm, garbage_collect_values=False)
        self.example_inputs = list(example_inputs)
        tensors = [value for value in self.example_inputs if isinstance(value, torch.Tensor)]
        self.device = torch.device(device) if device is not None else \
            tensors[0].device if tensors else None
        self.output_strides = list(output_strides or [])
        self.inputs: list = []
        self.constants: list = []
        self.buffers: list = []
        self.fallback_ops: dict = {}
        self.library_calls: dict = {}
        self.current: Optional[torch.fx.Node] = None
        self.fake_mode = None     # extern.py's FakeTensorMode, made once per graph
        self.forced_fallbacks = {name.strip() for name in config.fallback_ops.split(",")
                                 if name.strip()}
        self.channels_last = config.channels_last and prefers_channels_last(gm)

    def register_buffer(self, buffer: Buffer) -> str:
        """Name `buffer` and append it to the graph's buffers."""
        buffer.name = f"buf{len(self.buffers)}"
        if buffer.origin is None and self.current is not None:
            buffer.origin = self.current.name
        self.buffers.append(buffer)
        return buffer.name

    def current_example(self):
        """The example value (fake tensor) of the FX node being lowered."""
        return self.current.meta.get("val") if self.current is not None else None

    def count_library_call(self, name: str) -> None:
        self.library_calls[name] = self.library_calls.get(name, 0) + 1

    def lower(self) -> LoopGraph:
        """Run the lowering over the whole graph."""
        with building(self):
            outputs = self.run(*self.example_inputs)
            for buffer in self.buffers:
                buffer.layout.freeze() if buffer.layout is not None else None
        return LoopGraph(self.inputs, self.buffers, outputs, self.fallback_ops,
                         self.library_calls, self.constants, self.channels_last)

    def run_node(self, node: torch.fx.Node) -> Any:
        self.current = node
        recorded = node.meta.get("val")
        if node.op == "call_function" and isinstance(recorded, torch.SymInt):
            return to_expr(recorded)    # size arithmetic: its ShapeEnv expression
        if node.op == "call_function" and isinstance(recorded, torch.SymFloat):
            return size_float(node, *self.fetch_args_kwargs_from_env(node))
        if isinstance(recorded, (torch.SymFloat, torch.SymBool)):
            raise NotSymbolic(f"a size computed as a {type(recorded).__name__} ({node.name})")
        if node.op in ("call_function", "output") and \
                node.target not in SIZE_FLOAT_CONSUMERS and any(
                    isinstance(argument.meta.get("val"), torch.SymFloat)
                    for argument in node.all_input_nodes):
            raise NotSymbolic(f"a size computed as a SymFloat used by {node.name}")
        result = super().run_node(node)
        if node.op == "call_function" and len(node.users) > 1:
            meet = uses_meet(node)
            for box in pytree.tree_leaves(result):
                if isinstance(box, TensorBox):
                    _realize_if_costly(box, meet)
        return result

    def placeholder(self, target, args, kwargs):
        position = len(self.inputs)
        example = self.example_inputs[position]
        if isinstance(example, torch.SymInt):
            buffer = SizeInput(f"arg{position}", to_expr(example))
            buffer.origin = self.current.name
            self.inputs.append(buffer)
            return buffer.expression
        if isinstance(example, (int, float, bool)):
            return self._number_input(position, example)
        layout = Layout(example.device, example.dtype, example.shape, example.stride(), 0)
        buffer = InputBuffer(f"arg{position}", layout)
        buffer.origin = self.current.name
        self.inputs.append(buffer)
        return TensorBox.create(buffer)

    def _number_input(self, position: int, example):
        """A Python number placeholder: the partitioned forward of a training graph with
        symbolic sizes keeps an int input that nothing reads as a plain int (fuzzer seed
        47521: `AttributeError: 'int' object has no attribute 'device'`). Unread, it is an
        input the wrapper takes and ignores; read, the graph was traced with its value."""
        if self.current.users:
            raise NotImplementedError(f"graph input {self.current.name} is a Python "
                                      f"{type(example).__name__} that the graph reads")
        buffer = SizeInput(f"arg{position}", sympy.Integer(0))
        buffer.origin = self.current.name
        self.inputs.append(buffer)
        return example

    def get_attr(self, target, args, kwargs):
        """A tensor attribute of the module: read in place through a reference."""
        value = operator.attrgetter(target)(self.module)
        if not isinstance(value, torch.Tensor):
            return value
        layout = Layout(value.device, value.dtype, value.shape, value.stride(), 0)
        buffer = ConstantBuffer(f"const{len(self.constants)}", layout, value)
        buffer.origin = self.current.name
        self.constants.append(buffer)
        return TensorBox.create(buffer)

    def call_function(self, target, args, kwargs):
        if target is operator.getitem:
            return args[0][args[1]]
        if target is aten.copy_.default:
            return self._mutate_input(*args)
        if self._elsewhere(self.current.meta.get("val")):
            return self._extern(target, args, kwargs)
        lowering = None if str(getattr(target, "overloadpacket", "")) in \
            self.forced_fallbacks else lowering_for(target)
        if lowering is not None and not _has_unsupported_arguments(
                args, kwargs, self.current.meta.get("val")):
            try:
                result = lowering(*args, **kwargs)
            except NotImplementedError:
                result = None
            if result is not None:
                return self._annotate(result, args)
        return self._extern(target, args, kwargs)

    def _elsewhere(self, example) -> bool:
        """Whether eager computes this node on another device than the graph's (a 0-d CPU
        tensor in a GPU graph: `torch.tensor(n).sqrt()`, DeBERTa's attention scale; a copy
        to another device): it runs through its eager kernel there, so the value lives
        where eager's does (a kernel of the graph would have computed it on the graph's
        device, or, for a copy, left it where it was)."""
        if self.device is None:
            return False
        devices = {value.device for value in pytree.tree_leaves(example)
                   if isinstance(value, torch.Tensor)}
        return bool(devices) and not all(_same_device(device, self.device)
                                         for device in devices)

    def call_method(self, target, args, kwargs):
        raise NotImplementedError(f"call_method {target} in an ATen graph")

    def call_module(self, target, args, kwargs):
        raise NotImplementedError(f"call_module {target} in an ATen graph")

    def _annotate(self, result, args=()):
        """Give fresh loop bodies the FX node's name and eager's strides (or channels-last,
        see `preferred_stride`)."""
        example = self.current.meta.get("val")
        leaves = pytree.tree_leaves(result)
        examples = pytree.tree_leaves(example) if example is not None else []
        for position, box in enumerate(leaves):
            if not isinstance(box, TensorBox) or not isinstance(box.data, StorageBox):
                continue
            storage = box.data
            matched = position < len(examples) and len(leaves) == len(examples) and \
                isinstance(examples[position], torch.Tensor)
            stride = self.preferred_stride(examples[position], args) if matched else None
            if not storage.is_realized():
                storage.data.origin = self.current.name
                if stride is not None:
                    storage.preferred_stride = stride
            elif storage.data.layout is not None and not storage.data.layout.fixed \
                    and stride is not None:
                storage.data.layout.decide(stride)
        return result

    def preferred_stride(self, example: torch.Tensor, args=()) -> list:
        """Eager's strides for a node's result, or channels-last where a 4-D input is
        channels-last (graphs with 2-D convolutions feed them channels-last activations,
        which run faster; the ops between convolutions keep that layout, as eager's
        TensorIterator would). Inputs of another size count too: a concatenation along the
        channels or a pooling of channels-last inputs stays channels-last (SqueezeNet's
        concatenation stored NCHW made the pooling after it read across channels with a
        3025-element stride: 1.68 ms of a 13 ms call)."""
        if self.channels_last and example.dim() == 4:
            for value in pytree.tree_leaves(args):
                if not isinstance(value, TensorBox) or len(value.get_size()) != 4:
                    continue
                size = [int(s) for s in value.get_size()]
                if size[1] > 1 and size[2] * size[3] > 1 and _strides_agree(
                        _known_stride(value), channels_last_strides(size), size):
                    return channels_last_strides(example.shape)
        return list(example.stride())

    def _extern(self, target, args, kwargs):
        example = self.current.meta.get("val")
        kind = "library" if extern.is_library_op(target) else "fallback"
        counts = self.library_calls if kind == "library" else self.fallback_ops
        name = str(getattr(target, "overloadpacket", getattr(target, "__name__", target)))
        counts[name] = counts.get(name, 0) + 1
        return extern.make_extern(target, args, kwargs, example, kind)

    def _mutate_input(self, destination: TensorBox, source, *_ignored):
        """`copy_` into a graph input: a loop writing the new value into its memory."""
        target = destination.data.data if isinstance(destination.data, StorageBox) else None
        if not isinstance(target, InputBuffer):
            raise NotImplementedError("copy_ into something other than a graph input")
        dtype = target.get_dtype()
        loader = value_loader(source, target.get_size(), opmath_dtype(dtype))

        def inner_fn(index):
            return ops.to_dtype(loader(index), dtype)
        body = Pointwise(target.get_device(), dtype, inner_fn, target.get_size())
        buffer = ComputedBuffer(None, target.layout, body, mutated_input=target.get_name())
        self.register_buffer(buffer)
        return destination

    def output(self, target, args, kwargs):
        values = list(args[0]) if isinstance(args[0], (list, tuple)) else [args[0]]
        nodes = self.current.args[0]
        nodes = list(nodes) if isinstance(nodes, (list, tuple)) else [nodes]
        owners: dict = {}   # buffer name -> the FX node owning its memory in eager
        results = []
        for position, (value, node) in enumerate(zip(values, nodes)):
            owner = memory_root(node)[0] if isinstance(node, torch.fx.Node) else None
            value = self._unshared(value, owner, owners)
            result = self._finish_output(value, position)
            name = result.get_name() if isinstance(result, (Buffer, ReinterpretView)) else None
            if name is not None:
                owners.setdefault(name, owner)
            results.append(result)
        return results

    def _unshared(self, value, owner, owners: dict):
        """`value`, or a copy of it where its memory is an input's or another output's that
        it does not share in eager: a lowering may hand back its operand unchanged (`sign`
        of bools, `floor` of integers) or read one through an index remap (`permute_copy`,
        `flip`); returned as is, the output aliased an input (`out is x`)."""
        if not isinstance(value, TensorBox) or owner is None:
            return value
        storage = value.storage()
        buffer = storage.data if storage is not None and storage.is_realized() else None
        if buffer is None:
            return value
        foreign = isinstance(buffer, InputBuffer) and owner.op not in ("placeholder", "get_attr")
        if not foreign and owners.get(buffer.get_name(), owner) is owner:
            return value
        return TensorBox.create(Pointwise(value.get_device(), value.get_dtype(),
                                          value.make_loader(), value.get_size()))

    def _finish_output(self, value, position: int):
        if not isinstance(value, TensorBox):
            return value
        stride = self.output_strides[position] if position < len(self.output_strides) \
            else None
        storage = value.data if isinstance(value.data, StorageBox) else None
        # A layout given to an output is frozen: the same value returned again with other
        # strides (a training forward's output, and the value saved for the backward as
        # traced) is copied, not re-decided under the first (it came back laid out so).
        if storage is not None and not storage.is_realized():
            storage.preferred_stride = list(stride) if stride is not None else \
                storage.preferred_stride
            buffer = storage.realize()
            if stride is not None and buffer.layout is not None:
                buffer.layout.freeze()
            return buffer
        if storage is not None:
            buffer = storage.data
            if buffer.layout is not None and not buffer.layout.fixed and stride is not None:
                buffer.layout.decide(stride)
                buffer.layout.freeze()
            if stride is None or _strides_match(buffer.layout, stride):
                return buffer
        view = value.data if isinstance(value.data, ReinterpretView) else None
        if view is None and storage is None:
            # A view of a realized buffer (the logits' reshape of the vocabulary product):
            # returned as a strided view, as eager does, not copied (131 MB per call in llama).
            view = extern.strided_view(value)
        if view is not None and (stride is None or _strides_match(view.layout, stride)):
            return _with_strides(view, stride)
        copy = TensorBox.create(Pointwise(value.get_device(), value.get_dtype(),
                                          value.make_loader(), value.get_size()),
                                preferred_stride=list(stride) if stride is not None else None)
        return copy.realize()


def _strides_match(layout: Layout, stride: Sequence) -> bool:
    return all(extent == 1 or sympy.expand(stride_expr(actual) - stride_expr(wanted)) == 0
               for extent, actual, wanted in zip(layout.size, layout.stride, stride))


def _with_strides(view: ReinterpretView, stride: Optional[Sequence]) -> ReinterpretView:
    """`view` with eager's strides on its one-long dims too (they address nothing, but
    `.stride()` shows them: `(v @ w).unsqueeze_(0)` is (n, 1) in eager, not (0, 1))."""
    layout = view.layout
    if stride is None or all(sympy.expand(stride_expr(actual) - stride_expr(wanted)) == 0
                             for actual, wanted in zip(layout.stride, stride)):
        return view
    strides = [wanted if extent == 1 else actual
               for extent, actual, wanted in zip(layout.size, layout.stride, stride)]
    return ReinterpretView(view.data, Layout(layout.device, layout.dtype, layout.size, strides,
                                             layout.offset))


def _realize_if_costly(box: TensorBox, meet: bool = False) -> None:
    # through views: the halves of a split (`x.chunk(2, 1)` in ShuffleNet) are views of one
    # body read by two consumers; left unrealized, each block inlined the previous blocks'
    # concatenations and shuffles (a kernel loading 36 buffers, 0.78 ms at batch 1)
    storage = box.storage()
    if storage is None or not isinstance(storage.data, Pointwise):
        return
    loads, operations = body_cost(storage.data)
    if meet and operations <= REUSE_OPS_THRESHOLD and not body_transcendentals(storage.data):
        return      # every use is in one body at one index (lower/shared_uses.py)
    if loads > REUSE_LOADS_THRESHOLD or operations > REUSE_OPS_THRESHOLD:
        storage.realize()


UNSUPPORTED_DTYPES = (torch.complex32, torch.complex64, torch.complex128)


def _known_stride(box: TensorBox):
    """The strides a box's value has or will have in memory, where known without views."""
    storage = box.data if isinstance(box.data, StorageBox) else None
    if storage is None:
        return None
    if storage.is_realized():
        layout = storage.data.layout
        return None if layout is None else [int(s) for s in layout.stride]
    return storage.preferred_stride


def _strides_agree(stride, wanted, size) -> bool:
    return stride is not None and len(stride) == len(wanted) and all(
        int(extent) == 1 or int(actual) == int(expected)
        for extent, actual, expected in zip(size, stride, wanted))


def channels_last_strides(size) -> list:
    """Dense strides of an NCHW-sized tensor stored as NHWC."""
    _n, channels, height, width = [int(extent) for extent in size]
    return [height * width * channels, 1, width * channels, channels]


def convolution_prefers_channels_last(input_elements: int, weight_size,
                                      output_elements: int, switches_graph: bool = False) -> bool:
    """Whether one 2-D convolution on CPU tensors should run channels-last. Channels-last
    activations make oneDNN's convolutions faster, but the weight is then copied to
    channels-last on every call (parameters may change between calls), so convolutions with
    more weight than activation elements (resnet18's last stage) stay contiguous: at batch 1,
    all of resnet18 channels-last ran 40 -> 43 ms. A 1x1 kernel's contiguous weight already
    has channels-last strides (nothing is copied), so those always run channels-last:
    MobileNetV2's last stage (1x1 convolutions of 160-1280 channels on 7x7 images) ran
    contiguous between channels-last depthwise convolutions, each switch a transposing store,
    and the 1x1 convolutions 5-10% slower contiguous (`docs/performance-notes.md`). That
    holds in a graph already channels-last; `switches_graph` (whether this convolution alone
    makes a graph channels-last, copying its inputs and outputs) keeps the elements rule."""
    sizes = [int(extent) for extent in weight_size]
    if not switches_graph and len(sizes) == 4 and sizes[2] * sizes[3] == 1:
        return True
    weight_elements = 1
    for extent in sizes:
        weight_elements *= extent
    return input_elements + output_elements >= weight_elements


def prefers_channels_last(gm: torch.fx.GraphModule) -> bool:
    """Whether a graph's 4-D activations should be kept channels-last.

    CPU graphs (C++ backend): when a 2-D convolution, or the backward of one (a training
    backward graph: `convolution_backward` reads the forward's input and the output's
    gradient), prefers it (see `convolution_prefers_channels_last`; the lowering decides per
    convolution). CUDA graphs, only with `config.gpu_channels_last`: when they have a 2-D
    convolution and none is grouped with several channels per group."""
    from inductor.config import config

    found = False
    for node in gm.graph.nodes:
        values = _convolution_values(node)
        if values is None:
            continue
        if not all(isinstance(value, torch.Tensor) and value.dim() == 4 for value in values):
            continue
        if any(isinstance(value.numel(), torch.SymInt) for value in values):
            continue    # symbolic sizes: contiguous (comparing them would add guards)
        devices = {value.device.type for value in values}
        if devices == {"cuda"} and config.gpu_channels_last:
            if node.args[8] > 1 and values[1].shape[1] > 1:
                return False
            found = True
            continue
        if devices != {"cpu"} or config.cpu_backend != "cpp":
            return False
        found = found or convolution_prefers_channels_last(
            values[0].numel(), values[1].shape, values[2].numel(), switches_graph=True)
    return found


def _convolution_values(node: torch.fx.Node) -> Optional[list]:
    """(input, weight, output) example values of a convolution node, where the output of a
    `convolution_backward` is the gradient it reads; None for other nodes. A backward only on
    CPU tensors (CUDA graphs decide by their forward convolutions alone)."""
    if node.op != "call_function":
        return None
    if node.target is aten.convolution.default:
        arguments = [node.args[0], node.args[1], node]
    elif node.target is aten.convolution_backward.default:
        arguments = [node.args[1], node.args[2], node.args[0]]
    else:
        return None
    values = [argument.meta.get("val") if isinstance(argument, torch.fx.Node) else None
              for argument in arguments]
    if node.target is aten.convolution_backward.default and not all(
            isinstance(value, torch.Tensor) and value.device.type == "cpu"
            for value in values):
        return None
    return values


def _has_unsupported_arguments(args, kwargs, example=None) -> bool:
    """Values the lowerings do not model: symbolic sizes, tensors on devices without a code
    generator (CPU and CUDA have one), complex numbers (in arguments or results)."""
    for value in pytree.tree_leaves((args, kwargs)):
        if isinstance(value, (torch.SymInt, complex)):
            return True
        if isinstance(value, TensorBox) and (value.get_device().type not in ("cpu", "cuda")
                                             or value.get_dtype() in UNSUPPORTED_DTYPES):
            return True
    return any(isinstance(value, torch.Tensor) and value.dtype in UNSUPPORTED_DTYPES
               for value in pytree.tree_leaves(example))


def _same_device(first: torch.device, second: torch.device) -> bool:
    """Whether two devices are one, `cuda` and `cuda:0` alike (index None: the first)."""
    return first.type == second.type and (first.index or 0) == (second.index or 0)


def lower(gm: torch.fx.GraphModule, example_inputs: Sequence,
          output_strides: Optional[Sequence] = None,
          device: Optional[torch.device] = None) -> LoopGraph:
    """Lower an ATen graph into loop IR (see the module docstring). `device`: the graph's,
    where its kernels run (default: that of its first tensor input). Sums of a tensor and a
    scatter-add into zeros first become scatter-adds into the tensor (`accumulate_into.py`)."""
    accumulate_into_sums(gm)
    return GraphLowering(gm, example_inputs, output_strides, device).lower()

