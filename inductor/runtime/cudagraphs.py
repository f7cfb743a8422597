"""`mode="reduce-overhead"`: a compiled graph recorded once as a CUDA graph and replayed.

Input: a compiled graph (`CompiledGraph` over flat tensors: lifted constants first, then the
user's inputs) and its `AtenGraph`. Output: a `CudaGraphRunner`, callable like the graph,
returning the same values as the default mode.

- The first call with a new input signature runs the graph normally (that run also tunes
  the kernels and loads libraries), then records it: inputs are copied into static buffers,
  and the graph's launches are captured into a CUDA graph with its own memory pool. Later
  calls copy the inputs in, replay, copy in-place updates of inputs back out, and return
  copies of the outputs (so results stay valid across calls; `cudagraph_copy_outputs=False`
  returns the static outputs, which the next replay overwrites, as torch.compile does).
- Lifted constants, parameters and tensors marked static are read in place, not copied;
  their addresses are part of the signature: if one moves (its memory was reallocated),
  the graph is recorded again. New shapes, strides or dtypes also record again, up to
  `cudagraph_max_records` recordings per graph; past that, and where recording fails
  (a CPU synchronisation inside the graph), calls run without CUDA graphs.
- A graph with symbolic sizes (one compile for every size, issue 23) records one CUDA graph
  per distinct size the same way, bounded by the same limit. Past it the recordings made
  stay (no eviction: sizes that cycle would record again and again, each recording costing
  a normal run plus the capture), and calls with a signature not recorded launch the
  kernels one by one. Those calls are counted (`unrecorded_calls`, and the distinct
  signatures in `unrecorded_signatures`) and the first one logs a warning.
"""
from __future__ import annotations

import logging
from typing import Optional

import torch

from inductor.config import config

log = logging.getLogger("framejit.inductor")


def mutated_positions(module: torch.fx.GraphModule) -> list:
    """Placeholder positions the graph writes in place (trailing `aten.copy_` into them)."""
    placeholders = [node for node in module.graph.nodes if node.op == "placeholder"]
    copy = torch.ops.aten.copy_.default
    return [position for position, node in enumerate(placeholders)
            if any(user.target is copy and user.args[0] is node for user in node.users)]


def _dense(tensor: torch.Tensor) -> bool:
    """Whether the tensor's elements cover its memory exactly once (copyable into)."""
    pairs = sorted((stride, size) for size, stride in zip(tensor.shape, tensor.stride())
                   if size != 1)
    expected = 1
    for stride, size in pairs:
        if stride != expected:
            return False
        expected *= size
    return True


class _Recording:
    """One captured graph: static inputs, the outputs it writes, and the CUDA graph."""

    def __init__(self, graph, inputs: list, outputs: list, copied: list):
        self.graph = graph
        self.inputs = inputs
        self.outputs = outputs
        self.copied = copied        # positions whose values are copied in on each replay


class CudaGraphRunner:
    """Replays a compiled graph as CUDA graphs (see the module docstring)."""

    def __init__(self, compiled, aten_graph):
        self.compiled = compiled
        self.constants = len(aten_graph.constants)
        self.mutated = mutated_positions(aten_graph.module)
        self.recordings: dict = {}
        self.disabled: Optional[str] = None
        self.recorded = 0           # recordings made (tests and reports read it)
        self.unrecorded_calls = 0   # calls past `cudagraph_max_records` (kernel by kernel)
        self.unrecorded_signatures: set = set()

    def _static(self, position: int, value) -> bool:
        return position < self.constants or isinstance(value, torch.nn.Parameter) or \
            hasattr(value, "_dynamo_static_input_type")

    def _signature(self, inputs) -> tuple:
        parts = []
        for position, value in enumerate(inputs):
            if not isinstance(value, torch.Tensor):
                parts.append(("value", value))
                continue
            address = value.data_ptr() if self._static(position, value) else None
            parts.append((tuple(value.shape), value.stride(), value.dtype, value.device,
                          address))
        return tuple(parts)

    def __call__(self, *inputs):
        if self.disabled or torch.cuda.is_current_stream_capturing():
            return self.compiled(*inputs)
        signature = self._signature(inputs)
        recording = self.recordings.get(signature)
        if recording is None:
            results = self.compiled(*inputs)
            if len(self.recordings) < config.cudagraph_max_records:
                self._record(signature, inputs)
            elif not self.disabled:
                self._past_limit(signature)
            return results
        return self._replay(recording, inputs)

    def _past_limit(self, signature) -> None:
        """Count a call whose signature is not recorded because the limit is reached."""
        if not self.unrecorded_calls:
            log.warning("mode='reduce-overhead': %d CUDA graphs recorded for a graph "
                        "(cudagraph_max_records); calls with other sizes or addresses run "
                        "without CUDA graphs", len(self.recordings))
        self.unrecorded_calls += 1
        self.unrecorded_signatures.add(signature)

    def _record(self, signature, inputs) -> None:
        copied, static_inputs = [], []
        for position, value in enumerate(inputs):
            if isinstance(value, torch.Tensor) and not self._static(position, value):
                if not _dense(value):
                    self.disabled = "an input overlaps itself in memory"
                    return
                buffer = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype,
                                             device=value.device)
                buffer.copy_(value)
                copied.append(position)
                static_inputs.append(buffer)
            else:
                static_inputs.append(value)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                outputs = list(self.compiled(*static_inputs))
        except Exception as error:  # noqa: BLE001  (e.g. a synchronising op inside)
            self.disabled = f"recording failed: {type(error).__name__}: {error}"
            log.warning("mode='reduce-overhead': running without CUDA graphs (%s)",
                        self.disabled)
            return
        self.recordings[signature] = _Recording(graph, static_inputs, outputs, copied)
        self.recorded += 1

    def _replay(self, recording: _Recording, inputs) -> list:
        for position in recording.copied:
            recording.inputs[position].copy_(inputs[position])
        recording.graph.replay()
        for position in self.mutated:
            if recording.inputs[position] is not inputs[position]:
                inputs[position].copy_(recording.inputs[position])
        if not config.cudagraph_copy_outputs:
            return list(recording.outputs)
        return [value.clone() if isinstance(value, torch.Tensor) else value
                for value in recording.outputs]
