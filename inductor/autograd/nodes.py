"""Stage "run" of training compilation: the autograd nodes of one compiled call.

Input: a `TrainingVariant` (module `runtime`): its compiled forward, `Partition`, signature,
version plan, and the joint trace's output groups (`joint.output_groups`). Output:
`CompiledNodes`, which runs the compiled forward once per call (without autograd), then gives
each group of function outputs an autograd node of its own: a `torch.autograd.Function`
("CompiledFunction") whose edges lead to the inputs that group's gradients reach and no
others, which saves the values that group's backward reads, and whose backward runs the
backward graph for the gradients that arrive (`partition.absent`), compiled on first use.

Eager gives each output the history it depends on; one node for all outputs linked unrelated
histories (program fuzzer P29: see `joint.output_groups`). A backward reading no saved value
unpacks nothing: a node saving nothing may be run again, as eager's that save nothing may
(`avg.add_(w)` twice, the returned `avg` backed through after each call).
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Optional, Sequence

import torch
import torch.fx

from inductor.autograd.global_state import autocast_off, current_autocast
from inductor.autograd.partition.absent import without_unused_saved
from inductor.autograd.signature import TensorMeta
from inductor.autograd.symbols import is_symbolic, known_ints
from inductor.autograd.version_messages import name_outputs
from inductor.eager_run import version_of
from inductor.autograd.versions import (INPUT, OUTPUT, CallVersions, ModifiedSavedInput,
                                        caller_hooks_active, check, check_saved_inputs)


class DoubleBackwardError(RuntimeError):
    """Raised when a gradient of a compiled region is itself differentiated (`create_graph=True`,
    or `torch.autograd.grad` of a gradient). Cause: compiled backward graphs are not
    differentiable. Fix: run the region whose gradient you differentiate eagerly (for example
    `dynamo.jit(..., backend="eager")` or leaving that function uncompiled)."""


class Backward:
    """One backward graph of a `TrainingVariant`, for the calls where given tangents do not
    arrive (see `TrainingVariant.backward_for`), taking only the saved values it reads.
    `kept`: their positions among the partition's saved values (`uses`, as a set); `reads`:
    the inputs it reads (saved, or the memory of saved values); `zeros_for`: tangent
    positions it takes as zeros, not absent."""

    __slots__ = ("graph", "kept", "reads", "uses", "zeros_for", "run", "layout", "geometry")

    def __init__(self, graph: torch.fx.GraphModule, partition,
                 zeros_for: frozenset = frozenset()):
        self.graph, self.kept = without_unused_saved(graph, len(partition.saved_reads))
        # a saved tensor whose sizes alone the backward reads (the zeros for an absent
        # gradient, shaped by symbolic sizes) does not read its memory: a write into it
        # since the call changes nothing this backward computes, as in eager's
        self.uses = frozenset(index for index, placeholder in zip(
            self.kept, self.graph.graph.nodes) if not _sizes_only(placeholder))
        self.reads = sorted({partition.saved_reads[index] for index in self.uses} - {None})
        self.zeros_for = zeros_for
        self.run: Optional[Callable] = None
        # compiled ahead of time: the strides of the example's tensors (None: compiled from
        # the first call's own values, or symbolic), and the sizes and strides of arguments
        # found laid out so (`runtime.geometry_of`: a cheaper comparison per call)
        self.layout: Optional[tuple] = None
        self.geometry: Optional[list] = None

    def with_zeros(self, zeros_for: frozenset) -> "Backward":
        """This backward, also taking zeros for the tangents at `zeros_for`."""
        copy = Backward.__new__(Backward)
        copy.graph, copy.kept, copy.reads, copy.uses = self.graph, self.kept, self.reads, \
            self.uses
        copy.zeros_for, copy.run = self.zeros_for | zeros_for, self.run
        copy.layout, copy.geometry = self.layout, self.geometry
        return copy


aten = torch.ops.aten

_SIZE_READS = frozenset({aten.sym_size.int, aten.sym_size.default, aten.sym_stride.int,
                         aten.sym_stride.default, aten.sym_numel.default,
                         aten.sym_storage_offset.default})


def _sizes_only(placeholder: torch.fx.Node) -> bool:
    """Whether a saved value's placeholder is read for its sizes alone (strides, numel,
    offset: metadata of the alias `_save` made, which no write into the memory changes)."""
    return bool(placeholder.users) and all(
        user.op == "call_function" and user.target in _SIZE_READS for user in placeholder.users)


class _Group:
    """One autograd node of a call: the function outputs at `positions`, their tangents'
    positions among the tangents (`tangents`; the others are `absent` for its backward), the
    inputs requiring grad given no edge (`cut`), the saved values kept (`saved`, positions),
    the outputs marked non-differentiable (`non_differentiable`); the inputs
    ((index, eager saves it)) and outputs whose counters it compares."""

    __slots__ = ("positions", "tangents", "absent", "cut", "saved", "non_differentiable",
                 "watched_inputs", "watched_outputs", "checks", "function", "frees")


class _Call:
    """What one call's nodes share: the function outputs and the saved values (computed,
    then inputs); `versions`: the counters of the node being made (None: no checks);
    `tangent_sizes`: for symbolic sizes, the outputs' sizes per tangent (zeros for gradients
    that do not arrive), else None."""

    __slots__ = ("versions", "outputs", "values", "tangent_sizes")

    def __init__(self, versions: Optional[CallVersions], outputs: tuple, values: list,
                 tangent_sizes: Optional[list] = None):
        self.versions, self.outputs, self.values = versions, outputs, values
        self.tangent_sizes = tangent_sizes


class CompiledNodes:
    """Runs a `TrainingVariant`'s forward and makes its autograd nodes (see module doc)."""

    def __init__(self, variant, groups: Sequence[Sequence[int]],
                 freeing: Sequence[Sequence[int]] = ()):
        partition, signature = variant.partition, variant.signature
        self.variant = variant
        self.count = partition.function_output_count
        self.saved_primals = partition.saved_primals
        self.differentiable = differentiable = [output.differentiable
                                                for output in signature.function_outputs]
        self.tangent_positions = [position for position, flag in enumerate(differentiable)
                                  if flag]
        self.tangent_metas = [signature.function_outputs[position].meta
                              for position in self.tangent_positions]
        # symbolic sizes: zeros for a missing gradient take the call's output sizes
        self.symbolic_tangents = any(is_symbolic(meta.size) for meta in self.tangent_metas)
        self.plan = variant.versions
        # symbolic sizes of eager's saved tensors: evaluated per call for version messages
        self.size_binder = variant.binder if any(
            is_symbolic(watch.size) for watch in self.plan.watches) else None
        self.bumped_outputs = output_bumps(signature)
        self.output_memory = [(index, position) for index, position
                              in enumerate(partition.saved_outputs) if position is not None]
        self.mutated = set(signature.mutated_inputs)
        # inputs' memory saved with counters of their own (`_save`), except inputs the graph
        # writes: the epilogue's copy after the forward would change what the backward reads
        self.fresh = [index is not None and index not in self.mutated
                      for index in partition.saved_reads]
        groups = [tuple(group) for group in groups] or [tuple(range(self.count))]
        freeing = {tuple(group) for group in freeing}
        self.groups = [self._group(positions, signature.differentiable_inputs,
                                   positions in freeing) for positions in groups]

    def _group(self, positions: tuple, differentiable_inputs: Sequence[int],
               frees: bool = False) -> _Group:
        variant, count = self.variant, len(self.tangent_positions)
        group = _Group()
        group.positions = positions
        # eager's history here frees saved tensors: with none kept, a token stands for them
        group.frees = frees
        group.tangents = frozenset(index for index, position
                                   in enumerate(self.tangent_positions) if position in positions)
        group.absent = frozenset(range(count)) - group.tangents
        reached = variant.inputs_reached
        # (every edge where the trace did not say, or its gradients reach no input)
        reach = frozenset().union(*(reached[p] for p in positions)) if reached else None
        group.cut = [index for index in differentiable_inputs if index not in reach] \
            if reach else []
        group.saved = variant.backward_for(group.absent).kept
        group.non_differentiable = [p for p in positions if not self.differentiable[p]]
        self._watch(group, variant.partition)
        group.function = _make_function(self, group)
        return group

    def _watch(self, group: _Group, partition) -> None:
        """The inputs and outputs whose counters `group`'s backward compares (`versions`):
        eager's saved tensors its outputs' gradients unpack, and what its backward reads."""
        positions = set(group.positions)
        watches = [watch for watch in self.plan.watches if positions & set(watch.reached_by)]
        saved_inputs = {watch.root[1] for watch in watches if watch.root[0] == INPUT}
        reads = {partition.saved_reads[index] for index in group.saved} - {None}
        group.watched_inputs = [(index, index in saved_inputs)
                                for index in sorted(saved_inputs | reads)]
        group.watched_outputs = sorted({watch.root[1] for watch in watches
                                        if watch.root[0] == OUTPUT})
        group.checks = bool(watches or reads or any(
            index in group.saved for index, _ in self.output_memory))

    def _written_memory(self, primals: list) -> set:
        """The storages of the inputs the graph writes (the epilogue's copies)."""
        return {_memory(primals[index]) for index in self.mutated}

    def __call__(self, primals: list) -> list:
        """Run the forward; the function outputs, each with its group's node."""
        enabled = torch.is_grad_enabled()   # (no `no_grad()` object: a call's cost)
        torch._C._set_grad_enabled(False)
        try:
            outputs = run_without_autocast(self.variant.run_forward, list(primals))
        finally:
            torch._C._set_grad_enabled(enabled)
        # An output the generated code returns as a view of a buffer (a 1-D linear's squeezed
        # addmm) is no view in eager: written in place afterwards, as a view of this Function
        # it would raise "Output 1 of CompiledFunction is a view ...".
        function_outputs = tuple(unviewed(output) for output in outputs[:self.count])
        bump_versions(function_outputs, self.bumped_outputs)
        values = [*outputs[self.count:], *[primals[index] for index in self.saved_primals]]
        call = _Call(None, function_outputs, values, [
            function_outputs[position].shape for position in self.tangent_positions]
            if self.symbolic_tangents else None)
        del outputs
        result = list(function_outputs)
        hooks = caller_hooks_active()   # (eager checks no versions then)
        written = self._written_memory(primals) if self.mutated else None
        for group in self.groups:
            call.versions = versions = (CallVersions() if group.checks and not hooks
                                        else None)
            if versions is not None and self.size_binder is not None:
                versions.sizes = (self.size_binder, self.size_binder.bind(primals))
            if versions is not None:
                for index, saved in group.watched_inputs:
                    primal = primals[index]
                    versions.watch_input(index, primal, saved, index in self.mutated or (
                        bool(written) and _memory(primal) in written))
            produced = group.function.apply(call, *_edges(primals, group, function_outputs))
            for position, tensor in zip(group.positions, produced):
                result[position] = tensor
            if versions is not None:
                for position in group.watched_outputs:
                    versions.watch_output(position, result[position],
                                          self.differentiable[position])
        return result


def _memory(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def _edges(primals: list, group: _Group, outputs: tuple) -> list:
    """The inputs of `group`'s node: those requiring grad that its gradients do not reach
    (`cut`) as detached aliases (no edge), unless the group returns that very tensor."""
    if not group.cut:
        return primals
    returned = {id(outputs[position]) for position in group.positions}
    edges = list(primals)
    for index in group.cut:
        primal = primals[index]
        if isinstance(primal, torch.Tensor) and id(primal) not in returned:
            edges[index] = primal.detach()
    return edges


def _make_function(nodes: CompiledNodes, group: _Group) -> type:
    variant = nodes.variant
    plan, signature, partition = variant.versions, variant.signature, variant.partition
    input_bumps = [info.version_bumps for info in signature.inputs]
    bumps = [output.version_bumps for output in signature.function_outputs]
    count, positions, saved = nodes.count, group.positions, group.saved
    tangent_positions, tangent_metas = nodes.tangent_positions, nodes.tangent_metas
    fresh = [nodes.fresh[index] for index in saved]
    output_memory = [(saved.index(index), position) for index, position in nodes.output_memory
                     if index in saved]
    reached, grad_of_input = variant.inputs_reached, partition.grad_of_input

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, call, *primals):
            ctx.versions, ctx.tangent_sizes = call.versions, call.tangent_sizes
            name_outputs(ctx, plan, positions)   # eager's node names, for later graphs' checks
            _save(ctx, [call.values[index] for index in saved], fresh, output_memory,
                  call.outputs, saved, group.frees)
            ctx.mark_non_differentiable(*[call.outputs[p] for p in group.non_differentiable])
            # Missing gradients come as None: autograd would otherwise allocate zeros for
            # every output, the non-differentiable ones (BatchNorm's updated statistics)
            # included; backward makes zeros only for differentiable outputs left unused.
            ctx.set_materialize_grads(False)
            return tuple(call.outputs[position] for position in positions)

        @staticmethod
        def backward(ctx, *grads):
            _refuse_double_backward()
            if group.frees:
                # freed by an earlier backward (unless retained): eager's error, as its
                # nodes that save tensors raise it
                ctx._raw_saved_tensors   # noqa: B018
            every = [None] * count
            for position, grad in zip(positions, grads):
                every[position] = grad
            tangents = [every[position] for position in tangent_positions]
            backward = variant.backward_for(frozenset(
                position for position, grad in enumerate(tangents) if grad is None),
                group.absent)
            if ctx.versions is not None:   # eager's errors first, then ours
                _check_versions(ctx, backward, lambda: (
                    check(plan, ctx.versions, every, input_bumps, bumps),
                    check_saved_inputs(backward.reads, ctx.versions, input_bumps),
                    _check_saved_outputs(ctx.saved_outputs, backward.uses)))
            # A backward reading no saved value unpacks none (it may run again, as eager's
            # nodes that save nothing may: see the module doc).
            kept = dict(zip(saved, _unpack(ctx, len(saved)))) if backward.kept else {}
            arguments = _backward_arguments([kept[index] for index in backward.kept],
                                            tangents, tangent_metas, backward.zeros_for,
                                            ctx.tangent_sizes)
            del kept
            if hasattr(ctx, "maybe_clear_saved_tensors"):
                ctx.maybe_clear_saved_tensors()   # free them early unless retain_graph
            gradients = variant.run_backward(backward, arguments)
            return (None,) + _input_gradients(gradients, every, reached, grad_of_input)

    return CompiledFunction


def _check_versions(ctx, backward, checks: Callable[[], Any]) -> None:
    """Run a node's version `checks` as eager's node unpacks its saved tensors: a node whose
    saved tensors were freed raises "...backward through the graph a second time" before any
    version error (the raw list raises that without checking versions), and a node that
    raised a version error has freed them (unless the graph is retained): a second backward
    through it raises "...a second time" (program fuzzer seed 37198)."""
    if backward.kept:
        ctx._raw_saved_tensors   # noqa: B018
    try:
        checks()
    except RuntimeError:
        if backward.kept and hasattr(ctx, "maybe_clear_saved_tensors"):
            ctx.maybe_clear_saved_tensors()
        raise


def _input_gradients(gradients: Sequence, grads: Sequence, reached: Sequence,
                     grad_of_input: Sequence) -> tuple:
    """Per input: its gradient among the backward's `gradients`, None where it gets none.
    Inputs no arriving gradient (`grads`, per function output) reaches get None, not zeros:
    eager leaves their `.grad` unset (an unused output's zero tangent reached them)."""
    if not reached:
        return tuple(None if position is None else gradients[position]
                     for position in grad_of_input)
    live = frozenset().union(*(reached[position] for position, grad in enumerate(grads)
                               if grad is not None))
    return tuple(None if position is None or index not in live else gradients[position]
                 for index, position in enumerate(grad_of_input))


def _backward_arguments(saved: Sequence[Any], tangents: Sequence[Any],
                        metas: Sequence[TensorMeta], zeros_for: frozenset,
                        sizes: Optional[Sequence] = None) -> list:
    """The saved values, then per tangent position its gradient, zeros where it did not
    arrive and `zeros_for` holds it, nothing where it did not arrive otherwise. `sizes`: the
    call's output sizes per tangent, for graphs with symbolic sizes (the metas' are symbols)."""
    arguments = list(saved)
    for position, (grad, meta) in enumerate(zip(tangents, metas)):
        if grad is not None:
            arguments.append(grad.contiguous())
        elif position in zeros_for:
            size = known_ints(meta.size) if sizes is None else sizes[position]
            arguments.append(torch.zeros(size, dtype=meta.dtype, device=meta.device))
    return arguments


def _unpack(ctx: Any, count: int) -> list:
    """The `count` values `_save` saved, in order: tensors from autograd's saved tensors,
    sizes (ints, of graphs with symbolic sizes) from `ctx.numbers`."""
    numbers = ctx.numbers
    if not numbers:
        return list(ctx.saved_tensors)
    tensors = iter(ctx.saved_tensors if len(numbers) < count else ())
    return [numbers[index] if index in numbers else next(tensors) for index in range(count)]


def _save(ctx: Any, values: list, fresh: Sequence[bool], output_memory: Sequence[tuple],
          function_outputs: Sequence[torch.Tensor], indices: Sequence[int],
          frees: bool = False) -> None:
    """Save `values` (the saved values at positions `indices`) for the backward: views as
    non-views; the memory of inputs (`fresh`) and of function outputs (`output_memory`:
    (position among `values`, output position) where they may share it) through aliases
    with version counters of their own. Autograd checks every saved tensor's counter when
    the backward unpacks them, but a compiled backward reads values eager's does not, and
    for some calls none of them (an output whose gradient never arrives): `check` makes
    eager's checks, `check_saved_inputs` and `_check_saved_outputs` framejit's, for the
    values the call reads (a write into an output saved for another one's gradient raised
    "modified by an inplace operation" where eager's backward ran, program fuzzer seed 310).
    `ctx.saved_outputs`: (saved position, output position, a weak reference to the output,
    its version now) per output whose memory is saved. `frees`: eager's history saves
    tensors; where nothing else is saved, an empty token is, so that autograd frees it
    after a backward and a second one raises as eager's. Sizes saved (ints: graphs with
    symbolic sizes) are kept in `ctx.numbers` (`_unpack`)."""
    fresh = list(fresh)
    ctx.saved_outputs = []
    for index, position in output_memory:
        output = function_outputs[position]
        if values[index].untyped_storage().data_ptr() == output.untyped_storage().data_ptr():
            fresh[index] = True
            ctx.saved_outputs.append((indices[index], position, weakref.ref(output),
                                      version_of(output)))
    saved = [value.data if flag else unviewed(value) for value, flag in zip(values, fresh)]
    # sizes (ints, for graphs with symbolic sizes) are kept aside: autograd saves tensors
    ctx.numbers = {index: value for index, value in enumerate(saved)
                   if not isinstance(value, torch.Tensor)}
    tensors = [value for value in saved if isinstance(value, torch.Tensor)]
    ctx.save_for_backward(*(tensors or ([torch.empty(0)] if frees else [])))


def _check_saved_outputs(saved_outputs: Sequence[tuple], uses: frozenset) -> None:
    """Raise `ModifiedSavedInput` if a function output whose memory this backward reads was
    changed in place after the call (eager's errors, `check`, come first)."""
    for index, position, reference, version in saved_outputs:
        output = reference()
        if index in uses and output is not None and version_of(output) != version:
            raise ModifiedSavedInput(
                f"framejit: output {position} of a compiled graph was modified in place after "
                "the call, and the compiled backward reads it (eager's backward would not: it "
                "saved other values). Modify it after backward(), or run this function "
                "eagerly.")


def _refuse_double_backward() -> None:
    """A backward running with grad mode on records a graph of its own: not supported."""
    if torch.is_grad_enabled():
        raise DoubleBackwardError(
            "framejit: differentiating the gradient of a compiled region "
            "(create_graph=True or a double backward) is not supported. Run the region "
            "whose gradient you differentiate eagerly (dynamo.jit(..., backend='eager') "
            "or leave it uncompiled).")


def unviewed(value: Any) -> Any:
    """`value`, or for a view, an alias of its memory that is no view (`detach`)."""
    if isinstance(value, torch.Tensor) and value._is_view():
        return value.detach()
    return value


def bump_version(tensor: torch.Tensor, count: int) -> None:
    """Move `tensor`'s version counter `count` times, as `count` in-place writes would."""
    if not tensor.is_inference():
        for _ in range(count):
            torch.autograd.graph.increment_version(tensor)


def bump_versions(outputs: Sequence, bumps: Sequence) -> None:
    """Move the counters of `outputs` as `output_bumps` says, each counter once: outputs
    sharing one (`d = t.detach()` returned next to a `t` written after) were moved once per
    output, and the backward raised for a view of `t` saved after the write (program fuzzer
    inductor seed 26569: "output 0 of Select, is at version 2; expected version 1")."""
    before = [version_of(outputs[position]) for position, _ in bumps]
    for (position, times), version in zip(bumps, before):
        if version_of(outputs[position]) == version:   # (not moved through an alias)
            bump_version(outputs[position], times)


def output_bumps(signature) -> list:
    """(function output position, count): fresh outputs the graph wrote into after making
    them (`y = x + 1; y.add_(1)` leaves eager's `y._version` at 1)."""
    return [(position, output.version_bumps)
            for position, output in enumerate(signature.function_outputs)
            if output.version_bumps and output.source != "mutated_input"]


def run_without_autocast(run: Callable, arguments: list) -> Any:
    """`run(arguments)` (a `list_callable`) with autocast off: casts are graph nodes."""
    state = current_autocast()
    if not state:
        return run(arguments)
    with autocast_off(state):
        return run(arguments)
