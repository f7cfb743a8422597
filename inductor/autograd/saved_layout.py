"""Stage "partition" -> "run" of training compilation: the layout saved values cross in.

Input: a `Partition` whose forward the code generator keeps channels-last
(`inductor.lower.graph.prefers_channels_last`: a CPU graph with 2-D convolutions). Output: per
saved value, the strides the forward returns it with and the backward is compiled for
(`SavedLayout.strides`, None: as traced), the backward graph's placeholders carrying them.

Why: the joint graph is traced with contiguous fakes, so every saved activation was traced
contiguous, and the forward returned its channels-last activations copied to NCHW (the CNN of
`benchmarks.training.whole_step`: one 2 ms kernel per step); the backward then ran oneDNN's
NCHW convolution backward, about twice as slow as NHWC at 16 channels on 32x32 images. Here a
saved activation computed from a convolution keeps the channels-last layout it has in the
forward, and the backward reads it so (its convolutions' backward, `lower/convolution.py`,
and the BatchNorm and ReLU backward between them, stay channels-last).

Only for code generators that honour requested output strides (`accepts_output_strides`);
a graph run as is (`aot_eager`) keeps traced layouts. Static sizes only.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.fx

from inductor.autograd.output_views import is_view_node
from inductor.config import config
from inductor.lower.graph import channels_last_strides, prefers_channels_last

aten = torch.ops.aten


def saved_layouts(partition) -> list:
    """Per saved computed value (in the forward's output order after the function outputs):
    channels-last strides where the forward computes it from a convolution's result and keeps
    it channels-last, else None."""
    count = partition.saved_computed_count
    if count == 0 or not config.channels_last or not prefers_channels_last(partition.forward):
        return [None] * count
    graph = partition.forward.graph
    output_node = next(node for node in reversed(graph.nodes) if node.op == "output")
    outputs = list(output_node.args[0])
    first = partition.function_output_count
    returned = {value for value in outputs[:first] if isinstance(value, torch.fx.Node)}
    from_convolution = _computed_from_convolution(graph)
    layouts = []
    for index, value in enumerate(outputs[first:first + count]):
        keep = (isinstance(value, torch.fx.Node) and value in from_convolution and
                value not in returned and not is_view_node(value) and
                partition.saved_outputs[index] is None and
                partition.saved_reads[index] is None and _channels_last_candidate(value))
        layouts.append(channels_last_strides(value.meta["val"].shape) if keep else None)
    return layouts


def relayout_backward(partition, layouts: list) -> None:
    """Give the backward's placeholders of saved values the strides in `layouts` (their
    fake values, which `runtime.backward_example` and the code generator read)."""
    placeholders = [node for node in partition.backward.graph.nodes if node.op == "placeholder"]
    for node, strides in zip(placeholders, layouts):
        value = node.meta.get("val")
        if strides is None or not isinstance(value, torch.Tensor):
            continue
        with value.fake_mode:
            node.meta["val"] = torch.empty_strided(value.shape, strides, dtype=value.dtype,
                                                   device=value.device)


def forward_strides(partition, layouts: list, function_strides: list) -> list:
    """The per-output stride overrides of the forward's compile (`runtime.compile_graph`'s
    `eager_strides`): the function outputs' (eager's), then the saved values' layouts."""
    first = partition.function_output_count
    if len(function_strides) != first:
        raise AssertionError(f"{len(function_strides)} function output strides for {first} "
                             "function outputs")
    return list(function_strides) + list(layouts)


def _computed_from_convolution(graph: torch.fx.Graph) -> set:
    """Nodes with a convolution among their inputs, transitively."""
    found: set = set()
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is aten.convolution.default or \
                any(argument in found for argument in node.all_input_nodes):
            found.add(node)
    return found


def _channels_last_candidate(node: torch.fx.Node) -> bool:
    """A dense 4-D CPU value of static size with channels and pixels, traced
    contiguous (the layout the forward would otherwise copy it into)."""
    value: Optional[torch.Tensor] = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dim() != 4 or \
            value.device.type != "cpu":
        return False
    if any(isinstance(extent, torch.SymInt) for extent in value.shape):
        return False
    _batch, channels, height, width = value.shape
    return channels > 1 and height * width > 1 and value.is_contiguous()

