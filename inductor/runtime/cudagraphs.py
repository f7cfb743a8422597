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

Graphs that compute gradients (`inductor.autograd`'s compiled forward and backward, each
recorded on its own: `recording_training`, `TrainingGraphRunner`). The forward hands out its
saved values (outputs only a backward reads: their fake value is a backward graph's
placeholder) as tensors over the recording's own memory, uncopied, and the backward, finding
its inputs at those addresses (or at a parameter's), reads them in place (the addresses are
in its signature). Sound by construction: a forward replays over that memory only when no
tensor over it is left from its last call (the storages' reference counts,
`OutputPlan.in_use`); while one is (a second forward before the first one's backward, a graph
retained, a saved value a hook or an output's autograd node keeps), the call runs kernel by
kernel, counted. The new values of inputs the graph writes (BatchNorm's running statistics:
159 in ResNet-50), which the caller copies into those inputs at once and drops, are handed out
uncopied under the same check (`COPIED_INTO_INPUTS`). What the caller sees stays a copy: the
function outputs, and the gradients `AccumulateGrad` adopts as `.grad` (which outputs are
handed out uncopied decides what is copied, not soundness: the check covers every tensor
handed out uncopied). Outputs of fresh memory are
copied (`_foreach_copy_`; outputs sharing a storage keep sharing one copy); outputs aliasing
an input are rebuilt over the caller's input (`OutputPlan`).
A graph whose tensors are not all on the GPU is not recorded.
Counts, process-wide: `counts()`.
"""
from __future__ import annotations

import collections
import logging
import weakref
from typing import Callable, Optional, Sequence

import torch

from inductor.config import config
from inductor.runtime import native
from inductor.runtime.compiled_graph import CompiledGraph

log = logging.getLogger("framejit.inductor")

# Device types whose graphs are recorded (tests on CPU simulate CUDA graphs and add "cpu").
RECORDED_DEVICES = ("cuda",)

# Process-wide: "recorded" (CUDA graphs captured), "replayed", "unrecorded_calls" (calls past
# `cudagraph_max_records`), "not_recorded" (graphs running without CUDA graphs: recording
# failed, or a training graph with tensors off the GPU); prefixed "training " for training,
# which also counts per recording "outputs_uncopied" (saved values handed out uncopied),
# "transient_uncopied" (new values of inputs handed out uncopied: `COPIED_INTO_INPUTS`) and
# "inputs_read_in_place" (a backward's saved values and parameters, by address), and
# "saved_in_use_calls" (forward calls run kernel by kernel: `TrainingGraphRunner`).
_counts: collections.Counter = collections.Counter()


def counts() -> dict:
    """The CUDA-graph counts since the process started (see `_counts`)."""
    return dict(_counts)


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

    counted = ""   # the prefix of this runner's `_counts` keys

    def __init__(self, compiled, aten_graph):
        self._start(compiled, len(aten_graph.constants), mutated_positions(aten_graph.module))

    def _start(self, compiled, constants: int, mutated: list) -> None:
        self.compiled = compiled
        self.constants = constants
        self.mutated = mutated
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
        return self._call(list(inputs))

    def _call(self, inputs: list):
        if self.disabled or torch.cuda.is_current_stream_capturing():
            return self.compiled(*inputs)
        signature = self._signature(inputs)
        recording = self.recordings.get(signature)
        if recording is None:
            results = self.compiled(*inputs)
            if len(self.recordings) < config.cudagraph_max_records:
                self._record(signature, inputs)
                recording = self.recordings.get(signature)
                if recording is not None:
                    return self._recorded_call(recording, results)
            elif not self.disabled:
                self._past_limit(signature)
            return results
        return self._replay(recording, inputs)

    def _recorded_call(self, recording: "_Recording", results):
        """The results of the call that made `recording` (its run before the capture)."""
        return results

    def _past_limit(self, signature) -> None:
        """Count a call whose signature is not recorded because the limit is reached."""
        if not self.unrecorded_calls:
            log.warning("mode='reduce-overhead': %d CUDA graphs recorded for a graph "
                        "(cudagraph_max_records); calls with other sizes or addresses run "
                        "without CUDA graphs", len(self.recordings))
        self.unrecorded_calls += 1
        _counts[self.counted + "unrecorded_calls"] += 1
        self.unrecorded_signatures.add(signature)

    def _disable(self, reason: str) -> None:
        self.disabled = reason
        _counts[self.counted + "not_recorded"] += 1
        log.warning("mode='reduce-overhead': running %swithout CUDA graphs (%s)",
                    "a training graph " if self.counted else "", reason)

    def _record(self, signature, inputs) -> None:
        copied, static_inputs = [], []
        if any(isinstance(value, torch.Tensor) and value.device.type not in RECORDED_DEVICES
               for value in inputs):   # (a CPU scalar is read by value when recorded)
            self._disable("a tensor input is not on the GPU")
            return
        for position, value in enumerate(inputs):
            if isinstance(value, torch.Tensor) and not self._static(position, value):
                in_place = self._read_in_place(position, value)
                if in_place is not None:
                    static_inputs.append(in_place)
                    continue
                if not _dense(value):
                    self._disable("an input overlaps itself in memory")
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
            recording = self._recording(graph, static_inputs, outputs, copied)
        except Exception as error:  # noqa: BLE001  (e.g. a synchronising op inside)
            self._disable(f"recording failed: {type(error).__name__}: {error}")
            return
        self.recordings[signature] = recording
        self.recorded += 1
        _counts[self.counted + "recorded"] += 1

    def _read_in_place(self, position: int, value: torch.Tensor) -> Optional[torch.Tensor]:
        """A tensor the recording reads in place of copying `value` in (None: copy it)."""
        return None

    def _recording(self, graph, static_inputs: list, outputs: list,
                   copied: list) -> "_Recording":
        return _Recording(graph, static_inputs, outputs, copied)

    def _replay(self, recording: _Recording, inputs) -> list:
        _counts[self.counted + "replayed"] += 1
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


class NotRecordable(Exception):
    """A recorded graph's outputs cannot be handed out as copies (an output viewing an input
    with another dtype): the graph runs without CUDA graphs."""


class OutputPlan:
    """How a training recording hands its outputs out after each replay, decided once at
    recording time from the recorded outputs and static inputs (`recorded_inputs`):

    - `fresh`: an output alone in its storage, dense: a new tensor of its strides;
    - `shared`: outputs sharing a storage (or one not dense): the bytes they span, copied
      once into a new storage, each output rebuilt over it with its own geometry (outputs
      sharing memory in the graph share it in the copies too);
    - `aliases`: an output in an input's memory (a static buffer or a parameter read in
      place): rebuilt over the caller's input with the same geometry;
    - `empty`: zero elements, a new tensor; non-tensors are handed out as recorded;
    - `static`: an output among `saved` (values only a backward reads, or that the caller
      copies into inputs at once: `TrainingGraphRunner`), alone in its storage,
      dense, that nothing but the recording holds: handed out uncopied, as a new tensor over
      the recording's memory (`.data`: a version counter of its own). The next replay may
      overwrite it only once every tensor over that memory is gone (`in_use`).

    The copies are one `torch._foreach_copy_` per dtype and device (`CopyGroups`). Nothing
    else handed out is recording memory."""

    def __init__(self, outputs: Sequence, recorded_inputs: Sequence,
                 saved: frozenset = frozenset()):
        inputs = {}
        for position, value in enumerate(recorded_inputs):
            if isinstance(value, torch.Tensor) and value.numel():
                inputs.setdefault(_storage(value), position)
        self.values = list(outputs)
        self.sources: list = []                 # recorded tensors (or byte views) copied
        self.targets: list = []                 # per source: how to allocate its copy
        self.fresh: list = []                   # (position, source index)
        self.shared: list = []                  # (position, source index, geometry)
        self.aliases: list = []                 # (position, input position, geometry)
        self.empty: list = []                   # (position, geometry)
        self.static: list = []                  # (position, recorded output, its storage)
        owners = collections.Counter(_storage(value) for value in outputs
                                     if _tensor_with_memory(value))
        groups: dict = {}
        for position, value in enumerate(outputs):
            if not isinstance(value, torch.Tensor):
                continue
            if not value.numel():
                self.empty.append((position, _geometry(value)))
            elif _storage(value) in inputs:
                self._alias(position, value, recorded_inputs[inputs[_storage(value)]],
                            inputs[_storage(value)])
            elif owners[_storage(value)] == 1 and _dense(value):
                storage = _held_by_the_recording_only(value) if position in saved else None
                if storage is not None:
                    self.static.append((position, value, storage))
                    continue
                self.fresh.append((position, len(self.sources)))
                self.sources.append(value)
                self.targets.append(_geometry(value))
            else:
                groups.setdefault(_storage(value), []).append(position)
        for positions in groups.values():
            self._share(positions)
        self.kept_inputs = sorted({position for _, position, _ in self.aliases})
        # outputs made by `hand_out` (the copy and `set_` moved their version counters)
        self.made = [position for position, _ in self.fresh] + \
            [position for position, _, _ in self.shared]
        self.zeros = [0] * len(self.made)
        self.copy = CopyGroups(self.sources)
        self.allocate = native.empty_strided()
        # `in_use` per call: the storages' handles, and their reference counts when only the
        # recording holds them (each count is at least `_RECORDING_HOLDS`: see `in_use`)
        self.static_handles = [storage._cdata for _, _, storage in self.static]
        self.static_holds = _RECORDING_HOLDS * len(self.static)

    def _alias(self, position: int, value: torch.Tensor, recorded: torch.Tensor,
               input_position: int) -> None:
        if value.dtype != recorded.dtype:
            raise NotRecordable("an output views an input as another dtype")
        size, stride, dtype, _, offset = _geometry(value)
        self.aliases.append((position, input_position,
                             (size, stride, offset - recorded.storage_offset())))

    def _share(self, positions: list) -> None:
        """Outputs at `positions` share one storage: copy the bytes they span."""
        values = [self.values[position] for position in positions]
        align = max(value.element_size() for value in values)
        low = min(value.storage_offset() * value.element_size() for value in values)
        low -= low % align
        high = max((value.storage_offset() + _extent(value)) * value.element_size()
                   for value in values)
        device = values[0].device
        source = torch.empty(0, dtype=torch.uint8, device=device).set_(
            values[0].untyped_storage(), low, (high - low,), (1,))
        index = len(self.sources)
        self.sources.append(source)
        self.targets.append(((high - low,), (1,), torch.uint8, device, 0))
        for position, value in zip(positions, values):
            size, stride, dtype, _, offset = _geometry(value)
            start = (offset * value.element_size() - low) // value.element_size()
            self.shared.append((position, index, (size, stride, dtype, start)))

    def hand_out(self, inputs: Sequence) -> list:
        """The outputs of the replay that just ran, as copies (`inputs`: the call's)."""
        allocate = self.allocate
        copies = [allocate(size, stride, dtype, device)
                  for size, stride, dtype, device, _ in self.targets]
        self.copy(copies, self.sources)
        results = list(self.values)
        for position, index in self.fresh:
            results[position] = copies[index]
        for position, index, (size, stride, dtype, start) in self.shared:
            results[position] = torch.empty(0, dtype=dtype, device=copies[index].device).set_(
                copies[index].untyped_storage(), start, size, stride)
        if self.made:   # fresh tensors read version 0, as the graph's own results
            _set_versions([results[position] for position in self.made], self.zeros)
        for position, input_position, (size, stride, offset) in self.aliases:
            base = inputs[input_position]
            results[position] = base.as_strided(size, stride, base.storage_offset() + offset)
        for position, (size, stride, dtype, device, _) in self.empty:
            results[position] = torch.empty_strided(size, stride, dtype=dtype, device=device)
        for position, recorded, _ in self.static:
            results[position] = recorded.data
        return results

    def in_use(self) -> bool:
        """Whether a tensor handed out over the recording's memory (`static`), or any other
        tensor over that memory, still exists: a replay would overwrite its values. The plan
        holds each storage twice (the recorded output and the storage object kept), so no
        count is below `_RECORDING_HOLDS`, and their sum exceeds `static_holds` exactly when
        one count does (one pass in C over the handles, not a Python call per storage:
        ResNet-50's forward hands out 368)."""
        return sum(map(_storage_use_count, self.static_handles)) != self.static_holds


# References a recording holds to the storage of an output it hands out uncopied: the
# recorded output tensor, and the storage object `OutputPlan.static` keeps to count them.
_RECORDING_HOLDS = 2


_storage_use_count = torch._C._storage_Use_Count


def _use_count(storage) -> int:
    """How many tensors (and storage objects) hold `storage` (its reference count)."""
    return _storage_use_count(storage._cdata)


def _held_by_the_recording_only(value: torch.Tensor):
    """`value`'s storage (an object kept to count its holders) where only `value` holds it,
    else None (something in the compiled graph keeps it: the output is copied)."""
    storage = value.untyped_storage()
    return storage if _use_count(storage) == _RECORDING_HOLDS else None


class CopyGroups:
    """Copies lists of tensors laid out like `examples` (sources into targets, position by
    position) with one `torch._foreach_copy_` per dtype and device: its multi-tensor kernels
    take lists of one dtype; a mixed list copies tensor by tensor (ResNet-50's training
    recordings: 906 copies per iteration, 1.8 ms of the GPU's time and more of the host's)."""

    def __init__(self, examples: Sequence[torch.Tensor]):
        groups: dict = {}
        for index, value in enumerate(examples):
            groups.setdefault((value.dtype, value.device), []).append(index)
        self.groups = list(groups.values())

    def __call__(self, targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]) -> None:
        if len(self.groups) == 1:
            torch._foreach_copy_(targets, sources)
            return
        for indices in self.groups:
            torch._foreach_copy_([targets[index] for index in indices],
                                 [sources[index] for index in indices])


_set_versions = torch._C._autograd._unsafe_set_version_counter


def _storage(value: torch.Tensor) -> int:
    return value.untyped_storage().data_ptr()


def _tensor_with_memory(value) -> bool:
    return isinstance(value, torch.Tensor) and value.numel() > 0


def _geometry(value: torch.Tensor) -> tuple:
    return (tuple(value.shape), tuple(value.stride()), value.dtype, value.device,
            value.storage_offset())


def _extent(value: torch.Tensor) -> int:
    """Elements from the tensor's first to one past its last (numel > 0)."""
    return 1 + sum((size - 1) * stride for size, stride in zip(value.shape, value.stride()))


class _TrainingRecording(_Recording):
    """A training recording: also how its outputs are handed out, and which copied inputs
    are released after the copy-in (none is read after the replay)."""

    def __init__(self, graph, inputs: list, outputs: list, copied: list, plan: OutputPlan,
                 mutated: Sequence[int]):
        super().__init__(graph, inputs, outputs, copied)
        self.plan = plan
        kept = set(plan.kept_inputs) | set(mutated)
        self.released = [position for position in copied if position not in kept]
        self.copied_inputs = [inputs[position] for position in copied]
        self.copy_in = CopyGroups(self.copied_inputs)


# Memory a recording keeps that a backward may read: the saved values a forward hands out
# uncopied (`OutputPlan.static`) and the parameters it reads in place; address -> a weak
# reference to the tensor. A backward recorded with an input at such an address (and of its
# geometry) reads that memory in place (`TrainingGraphRunner._read_in_place`): the address
# is part of the backward's signature, and the recording keeps the memory alive.
_saved_buffers: dict = {}

# Fake values of the placeholders of graphs compiled through `recording_training`, by id:
# a forward output whose fake value is a backward's placeholder is a saved value (the
# partition gives both graphs the joint node's `meta`).
_placeholder_fakes: dict = {}


def _remember(table: dict, key: int, value) -> None:
    """`table[key]` = a weak reference to `value`, removed when `value` dies."""
    def forget(reference, key=key):
        if table.get(key) is reference:
            del table[key]
    table[key] = weakref.ref(value, forget)


def _remembered(table: dict, key: int):
    reference = table.get(key)
    return None if reference is None else reference()


def _fakes(graph: torch.fx.GraphModule, op: str) -> list:
    """The fake values of `graph`'s placeholders (`op` "placeholder") or outputs ("output")."""
    if op == "placeholder":
        nodes = [node for node in graph.graph.nodes if node.op == "placeholder"]
    else:
        output = next(node for node in reversed(graph.graph.nodes) if node.op == "output")
        nodes = list(output.args[0]) if isinstance(output.args[0], (tuple, list)) else []
    return [node.meta.get("val") if isinstance(node, torch.fx.Node) else None
            for node in nodes]


class TrainingGraphRunner(CudaGraphRunner):
    """Replays one compiled graph of a training graph (its forward, or one of its backwards)
    as CUDA graphs (see the module docstring). Takes the boxed calling convention: copied
    inputs are released after they are copied in, before the replay.

    A forward hands out its saved values (outputs whose fake value is a backward's
    placeholder, each once among the outputs) uncopied (`OutputPlan.static`), and replays
    only while no tensor over that memory is left from its last call; otherwise that call
    runs kernel by kernel (counted: `saved_in_use_calls`). A backward whose input is such
    memory reads it in place (its address is in the signature). Outputs at `transient`
    positions (new values of inputs, which the caller copies into them at once and drops:
    `COPIED_INTO_INPUTS`) are handed out uncopied too, under the same check."""

    counted = "training "

    def __init__(self, compiled, graph: torch.fx.GraphModule,
                 output_fakes: Optional[list] = None, transient: frozenset = frozenset()):
        self._start(compiled, 0, mutated_positions(graph))
        self.transient = frozenset(transient)
        # positions read in place (parameters, inputs marked static), fixed at the first
        # call: their addresses are the signature's; every other tensor is copied in
        self.static_positions: Optional[frozenset] = None
        # the fake value of each output as traced (`_saved_positions`)
        self.output_fakes = _fakes(graph, "output") if output_fakes is None else output_fakes
        self.saved_in_use_calls = 0   # forward calls run kernel by kernel (see above)

    def _static(self, position: int, value) -> bool:
        return position in self.static_positions

    def _signature(self, inputs) -> tuple:
        # (per call, for every input: a backward takes hundreds; no attribute probes)
        static = self.static_positions
        if static is None:
            static = self.static_positions = frozenset(
                position for position, value in enumerate(inputs)
                if isinstance(value, torch.Tensor) and
                CudaGraphRunner._static(self, position, value))
        saved = _saved_buffers
        parts = []
        for position, value in enumerate(inputs):
            if not isinstance(value, torch.Tensor):
                parts.append(("value", value))
                continue
            address = value.data_ptr()
            parts.append((value.shape, value.stride(), value.dtype, value.device,
                          address if position in static or address in saved else None))
        return tuple(parts)

    def with_argument_list(self, arguments: list):
        """The graph's inputs as one list, which this call empties."""
        inputs = list(arguments)
        arguments.clear()
        return self._call(inputs)

    def _read_in_place(self, position: int, value: torch.Tensor) -> Optional[torch.Tensor]:
        """A forward's recorded output that `value` is (same memory and geometry), read in
        place by this recording; None where it is not one, or the graph writes into it."""
        recorded = _remembered(_saved_buffers, value.data_ptr())
        if recorded is None or position in self.mutated or recorded.dtype != value.dtype or \
                recorded.shape != value.shape or recorded.stride() != value.stride() or \
                _storage(recorded) != _storage(value):
            return None
        return recorded

    def _saved_positions(self, outputs: list) -> frozenset:
        """The positions of outputs that are saved values (see the class docstring)."""
        fakes = self.output_fakes
        if len(fakes) != len(outputs):
            return frozenset()
        seen = collections.Counter(id(fake) for fake in fakes if fake is not None)
        return frozenset(position for position, fake in enumerate(fakes)
                         if isinstance(fake, torch.Tensor) and seen[id(fake)] == 1 and
                         _remembered(_placeholder_fakes, id(fake)) is fake)

    def _recording(self, graph, static_inputs: list, outputs: list,
                   copied: list) -> _TrainingRecording:
        unread = set(copied) | self.static_positions
        in_place = {position for position, value in enumerate(static_inputs)
                    if isinstance(value, torch.Tensor) and position not in unread}
        # an output in the memory of an input read in place (another recording's) is copied,
        # not rebuilt over the caller's tensor: a gradient is never recording memory
        saved = self._saved_positions(outputs)
        plan = OutputPlan(outputs, [None if position in in_place else value
                                    for position, value in enumerate(static_inputs)],
                          saved | {position for position in self.transient
                                   if position < len(outputs)})
        for position, recorded, _ in plan.static:
            if position in saved:   # (what a backward may read: not the transient values)
                _remember(_saved_buffers, recorded.data_ptr(), recorded)
        for position in sorted(self.static_positions - set(self.mutated)):
            value = static_inputs[position]   # parameters: a backward reads them as saved
            if value.numel():
                _remember(_saved_buffers, value.data_ptr(), value)
        transient = sum(position not in saved for position, _, _ in plan.static)
        _counts["training outputs_uncopied"] += len(plan.static) - transient
        _counts["training transient_uncopied"] += transient
        _counts["training inputs_read_in_place"] += len(in_place)
        return _TrainingRecording(graph, static_inputs, outputs, copied, plan, self.mutated)

    def _recorded_call(self, recording: _TrainingRecording, results):
        """The first call's saved values, copied into the recording's memory and handed out
        from there, so that the backward's first call (its recording) reads them in place."""
        if not recording.plan.static:
            return results
        results = list(results)
        for position, recorded, _ in recording.plan.static:
            value = results[position]
            if isinstance(value, torch.Tensor) and value.dtype == recorded.dtype and \
                    value.shape == recorded.shape and value.stride() == recorded.stride():
                recorded.copy_(value)
                results[position] = recorded.data
        return results

    def _replay(self, recording: _TrainingRecording, inputs: list) -> list:
        if recording.plan.static and recording.plan.in_use():
            return self._saved_in_use(inputs)
        _counts["training replayed"] += 1
        recording.copy_in(recording.copied_inputs,
                          [inputs[position] for position in recording.copied])
        for position in recording.released:
            inputs[position] = None
        recording.graph.replay()
        for position in self.mutated:
            if recording.inputs[position] is not inputs[position]:
                inputs[position].copy_(recording.inputs[position])
        return recording.plan.hand_out(inputs)

    def _saved_in_use(self, inputs: list) -> list:
        """A forward call while tensors over the memory its recording hands out uncopied
        are alive (a second forward before the first one's backward, a graph retained, a
        saved value kept): replaying would overwrite them; it runs kernel by kernel."""
        if not self.saved_in_use_calls:
            log.warning("mode='reduce-overhead': a training forward runs without CUDA graphs "
                        "while values it saved for a backward are still in use (a second "
                        "forward before the first backward, retain_graph, or a saved value "
                        "kept); counted in cudagraphs.counts()")
        self.saved_in_use_calls += 1
        _counts["training saved_in_use_calls"] += 1
        return self.compiled(*inputs)


def off_gpu_reason(graph: torch.fx.GraphModule, example_inputs: Sequence) -> Optional[str]:
    """Why a graph cannot be recorded as a CUDA graph: a tensor input or output not on a
    CUDA device (a CPU scalar read by value at recording time would be replayed as that
    value; CPU work is not captured). None where every tensor is on the GPU."""
    tensors = [value for value in example_inputs if isinstance(value, torch.Tensor)]
    output = next(node for node in reversed(graph.graph.nodes) if node.op == "output")
    outputs: list = []
    torch.fx.node.map_arg(output.args, lambda node: outputs.append(node.meta.get("val")))
    tensors += [value for value in outputs if isinstance(value, torch.Tensor)]
    if not tensors:
        return "no tensors on the GPU"
    for value in tensors:
        if value.device.type not in RECORDED_DEVICES:
            return f"a tensor on {value.device.type}, not the GPU"
    return None


_warned_off_gpu: set = set()

# The key of a graph module's `meta` naming the output positions whose values the caller
# copies into inputs right after the call and then drops (set by `inductor.autograd` on a
# training forward: the new values of the inputs it writes). `recording_training` hands
# those out uncopied (`TrainingGraphRunner`'s `transient`), under the liveness check.
COPIED_INTO_INPUTS = "framejit_copied_into_inputs"


def recording_training(compile_inner: Callable) -> Callable:
    """`compile_inner` (a `compile_aten` taking `output_strides`) whose results, for graphs
    on the GPU that it compiled, replay as CUDA graphs (`TrainingGraphRunner`); a graph it
    runs as is, or one off the GPU (counted, one warning per reason), is returned as is."""
    def compile_recorded(gm: torch.fx.GraphModule, example_inputs: Sequence,
                         output_strides: Optional[Sequence] = None):
        for fake in _fakes(gm, "placeholder"):   # (before compiling, which may rewrite)
            if isinstance(fake, torch.Tensor):
                _remember(_placeholder_fakes, id(fake), fake)
        output_fakes = _fakes(gm, "output")
        transient = gm.meta.get(COPIED_INTO_INPUTS, frozenset())
        compiled = compile_inner(gm, example_inputs, output_strides=output_strides)
        report = getattr(compiled, "report", None)
        if report is None or report.reason is not None:
            return compiled
        reason = off_gpu_reason(gm, example_inputs)
        if reason is not None:
            _counts["training not_recorded"] += 1
            if reason not in _warned_off_gpu:
                _warned_off_gpu.add(reason)
                log.warning("mode='reduce-overhead': a training graph runs without CUDA "
                            "graphs (%s)", reason)
            return compiled
        return CompiledGraph(TrainingGraphRunner(compiled, gm, output_fakes, transient), report)
    return compile_recorded
