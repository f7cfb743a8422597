"""Stage "run" of training compilation (the last stage).

Input: compiled forward/backward graphs (a `Partition` compiled by `compile_inner`) or one
compiled inference graph, plus the `GraphSignature`. Output: callables taking the graph's flat
inputs and returning what the original graph returns:

- `TrainingVariant`: a `torch.autograd.Function` whose forward runs the compiled forward and
  saves what the partitioner chose, and whose backward compiles the backward graph on first use
  and runs it; double backward is refused with `DoubleBackwardError`.
- `InferenceVariant`: the compiled forward-only graph, for calls without autograd.

Both finish the same way ("epilogue"): copy new values into mutated inputs (under `no_grad`
when the graph updated them under `no_grad`), then rebuild outputs that alias inputs or other
outputs as views of their bases, so aliasing and in-place semantics match eager.
"""
from __future__ import annotations

import inspect
import logging
import math
import weakref
from typing import Any, Callable, Optional, Sequence

import torch
from torch.utils import _pytree as pytree

from inductor.autograd.boxed import StridedGraphRunner
from inductor.autograd.global_state import autocast_off, current_autocast
from inductor.autograd.output_views import OutputViews, WithRebuiltViews
from inductor.autograd.partition.absent import without_tangents
from inductor.autograd.signature import (GraphSignature, OutputInfo, OutputKind, TensorMeta,
                                         ViewHistory)
from inductor.autograd.versions import (CallVersions, ModifiedSavedInput, VersionPlan,
                                        caller_hooks_active, check, check_saved_inputs,
                                        name_node, set_versions)

log = logging.getLogger("framejit.training")


class DoubleBackwardError(RuntimeError):
    """Raised when a gradient of a compiled region is itself differentiated (`create_graph=True`,
    or `torch.autograd.grad` of a gradient). Cause: compiled backward graphs are not
    differentiable. Fix: run the region whose gradient you differentiate eagerly (for example
    `dynamo.jit(..., backend="eager")` or leaving that function uncompiled)."""


def invoke(compiled: Callable, arguments: list) -> Any:
    """Call a `compile_inner` result with the list itself when it takes one (it may clear the
    list to free inputs early), else with the values spread. A result takes a list when it
    declares `takes_argument_list = True`, or when it (or its `run` function) carries a
    `with_argument_list` form, as inductor's `CompiledGraph` and generated wrapper do."""
    return list_callable(compiled)(arguments)


def list_callable(compiled: Callable) -> Callable:
    """`compiled` as a callable taking one list of inputs (which it may empty). Resolved once
    per compiled graph by the variants, so a call costs no attribute lookups."""
    if getattr(compiled, "takes_argument_list", False):
        return compiled
    for function in (compiled, getattr(compiled, "run", None)):
        boxed = getattr(function, "with_argument_list", None)
        if boxed is not None:
            return boxed

    def spread(arguments: list) -> Any:
        return compiled(*arguments)
    return spread


def output_strides(graph: torch.fx.GraphModule) -> list:
    """The traced strides of each output of `graph` (None for non-tensors)."""
    output_node = next(node for node in reversed(graph.graph.nodes) if node.op == "output")
    strides = []
    for value in output_node.args[0]:
        fake = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        strides.append(tuple(fake.stride()) if isinstance(fake, torch.Tensor) else None)
    return strides


def compile_graph(compile_inner: Callable, graph: torch.fx.GraphModule,
                  example_inputs: list, view_positions: Sequence[int] = (),
                  eager_strides: Sequence = ()) -> Callable:
    """`compile_inner(graph, example_inputs)`, also passing `output_strides` when it accepts
    them: the traced strides (the backward reads saved values with the strides they had when
    traced, and views of outputs are rebuilt from those strides), except where
    `eager_strides` (per leading output position, or None) names eager's: the caller sees
    those outputs, or views of them rebuilt from eager's geometry (`Epilogue`). In that case
    the outputs at `view_positions` that are views come back as their bases and are rebuilt
    after each call (`output_views`), instead of being copied by the code generator. A
    `compile_inner` that takes no strides has its outputs copied to eager's where they differ.
    """
    try:
        accepts = "output_strides" in inspect.signature(compile_inner).parameters
    except (TypeError, ValueError):
        accepts = False
    if not accepts:
        compiled = compile_inner(graph, example_inputs)
        if not any(stride is not None for stride in eager_strides):
            return compiled
        return WithEagerLayout(compiled, eager_strides)
    views = OutputViews(graph, view_positions)
    strides = output_strides(views.graph)
    for position, stride in enumerate(eager_strides):
        if stride is not None and strides[position] is not None:
            strides[position] = tuple(stride)
    compiled = compile_inner(views.graph, example_inputs, output_strides=strides)
    report = getattr(compiled, "report", None)
    if getattr(report, "reason", None) is not None:
        # Run as is (the code generator gave up): op by op, freeing inputs at last use.
        compiled = StridedGraphRunner(views.graph, example_inputs, strides, report)
    if not views.views:
        return compiled
    return WithRebuiltViews(compiled, views, list_callable(compiled))


def function_output_strides(signature: GraphSignature) -> list:
    """Per function output: eager's strides where the caller sees it or views of it (a fresh
    output, a hidden base), else None (an input's new value, copied into the input). The
    decomposed graph may lay a value out otherwise (`baddbmm` of a transposed input as `add`:
    its strides follow the input's), and a view rebuilt from eager's geometry over it read
    other elements (graph fuzzer class 31 in training)."""
    return [None if output.source == "mutated_input" else output.meta.stride
            for output in signature.function_outputs]


class WithEagerLayout:
    """A compiled graph (of a `compile_inner` that takes no strides) whose outputs are copied
    to eager's strides where they come back laid out otherwise."""

    takes_argument_list = True

    def __init__(self, compiled: Callable, eager_strides: Sequence):
        self.compiled = compiled
        self.run = list_callable(compiled)
        self.strides = [(position, tuple(stride)) for position, stride
                        in enumerate(eager_strides) if stride is not None]

    @property
    def report(self):
        """The inner compiled graph's report, if it has one."""
        return getattr(self.compiled, "report", None)

    def __call__(self, arguments: list) -> list:
        results = list(self.run(arguments))
        for position, stride in self.strides:
            value = results[position]
            if isinstance(value, torch.Tensor) and value.numel() > 1 and any(
                    size != 1 and actual != wanted for size, actual, wanted
                    in zip(value.shape, value.stride(), stride)):
                results[position] = torch.empty_strided(
                    value.shape, stride, dtype=value.dtype, device=value.device).copy_(value)
        return results


def _rebuild_view(base: torch.Tensor, meta: TensorMeta, base_offset: int) -> torch.Tensor:
    offset = base.storage_offset() + meta.storage_offset - base_offset
    if (offset == base.storage_offset() and meta.stride == tuple(base.stride())
            and meta.size == tuple(base.size())):
        return base.view(meta.size)
    if (offset == base.storage_offset() and base.is_contiguous() and _is_contiguous(meta)
            and math.prod(meta.size) == base.numel()):
        return base.view(meta.size)
    return base.as_strided(meta.size, meta.stride, offset)


def _is_contiguous(meta: TensorMeta) -> bool:
    expected = 1
    for size, stride in reversed(list(zip(meta.size, meta.stride))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


class Epilogue:
    """Applies input mutations and assembles the user-visible outputs.

    Updates autograd does not record (BatchNorm's running statistics and counters: three per
    layer in training; any update made under `no_grad`, or of an input that needs no gradient
    with a value that has none) are copied back with one `torch._foreach_copy_` call per dtype
    and device under `no_grad`: a few multi-tensor kernels on GPUs instead of one copy each
    (ResNet-50 has 159; a list mixing dtypes would copy one by one). Their memory is disjoint:
    `signature.analyze` refuses graphs that write into inputs sharing a storage. Updates
    autograd records stay `copy_` calls, after those."""

    def __init__(self, signature: GraphSignature):
        self.signature = signature
        groups: dict = {}
        self.recorded = []
        for position, output in enumerate(signature.function_outputs):
            if output.source != "mutated_input":
                continue
            info = signature.inputs[output.index]
            if info.mutation_hidden or not (info.requires_grad or output.differentiable):
                # one call per dtype and device: `_foreach_copy_`'s multi-tensor kernels take
                # lists of one dtype (a mixed list copies tensor by tensor)
                key = (output.meta.dtype, output.meta.device)
                groups.setdefault(key, []).append((position, output.index))
            else:
                self.recorded.append((position, output.index, info.written_through_view,
                                      info.eager_node))
        self.unrecorded = [([index for _, index in group], [position for position, _ in group])
                           for group in groups.values()]
        # Eager moves an input's version counter once per write; the copies below move it
        # once. Where that differs (two writes; BatchNorm's running statistics, which eager
        # updates without a bump), the counter is set to eager's after the copies.
        self.versions_set = [(index, info.version_bumps) for index, info
                             in enumerate(signature.inputs)
                             if info.is_tensor and info.version_bumps != info.mutates_data]
        self.outputs = signature.outputs
        self.spec = signature.output_spec

    def __call__(self, arguments: Sequence, function_outputs: Sequence) -> Any:
        if self.versions_set:
            tensors = [arguments[index] for index, _ in self.versions_set]
            eager_versions = [version_of(tensor) + bumps
                              for tensor, (_, bumps) in zip(tensors, self.versions_set)]
        if self.unrecorded:
            with torch.no_grad():
                for indices, positions in self.unrecorded:
                    torch._foreach_copy_([arguments[index] for index in indices],
                                         [function_outputs[position] for position in positions])
        for position, index, through_view, eager_node in self.recorded:
            if through_view:   # (`x[i] = v`): the input's node is CopySlices, as in eager
                torch.ops.aten.alias(arguments[index]).copy_(function_outputs[position])
            else:
                arguments[index].copy_(function_outputs[position])
                name_node(arguments[index], eager_node)
        if self.versions_set:
            set_versions(tensors, eager_versions)
        flat = []
        for output in self.outputs:
            kind = output.kind
            if kind is OutputKind.COMPUTED:
                flat.append(function_outputs[output.base])
            elif kind is OutputKind.INPUT:
                flat.append(arguments[output.base])
            elif kind is OutputKind.VIEW_OF_INPUT:
                flat.append(_output_view(arguments[output.base], output))
            elif kind is OutputKind.VIEW_OF_OUTPUT:
                flat.append(_output_view(function_outputs[output.base], output))
            else:
                flat.append(output.value)
        return pytree.tree_unflatten(flat, self.spec)


def _output_view(base: torch.Tensor, output: OutputInfo) -> torch.Tensor:
    """An output view rebuilt over `base` with the autograd state eager left it in
    (`ViewHistory`): a `detach()` alias gets no gradient where its base gained one in the
    graph (a buffer written with a value that requires grad) and is no view, a view made
    inside a `no_grad` region no node, and one whose base was written after it raises on
    `grad_fn` as eager's."""
    history, meta = output.history, output.meta
    if history is ViewHistory.DETACHED:
        with torch.no_grad():
            return _rebuild_view(base, meta, output.base_offset).detach()
    if history is ViewHistory.NO_GRADIENT and base.requires_grad:
        return _rebuild_view(base.detach(), meta, output.base_offset)
    if history in (ViewHistory.RECORDED, ViewHistory.NO_GRADIENT):
        return _rebuild_view(base, meta, output.base_offset)
    with torch.no_grad():
        if history is ViewHistory.NO_GRAD or base.is_inference() or base._version == 0:
            return _rebuild_view(base, meta, output.base_offset)
        # made while the base's counter read one less, as eager's was before the write
        version = base._version
        set_versions([base], [version - 1])
        try:
            return _rebuild_view(base, meta, output.base_offset)
        finally:
            set_versions([base], [version])


def version_of(tensor: torch.Tensor) -> int:
    """`tensor._version` (0 for inference tensors, which have no counter)."""
    return 0 if tensor.is_inference() else tensor._version


def bump_version(tensor: torch.Tensor, count: int) -> None:
    """Move `tensor`'s version counter `count` times, as `count` in-place writes would."""
    if not tensor.is_inference():
        for _ in range(count):
            torch.autograd.graph.increment_version(tensor)


def output_bumps(signature: GraphSignature) -> list:
    """(function output position, count): fresh outputs the graph wrote into after making
    them (`y = x + 1; y.add_(1)` leaves eager's `y._version` at 1)."""
    return [(position, output.version_bumps)
            for position, output in enumerate(signature.function_outputs)
            if output.version_bumps and output.source != "mutated_input"]


def _run_without_autocast(run: Callable, arguments: list) -> Any:
    """`run(arguments)` (a `list_callable`) with autocast off: casts are graph nodes."""
    state = current_autocast()
    if not state:
        return run(arguments)
    with autocast_off(state):
        return run(arguments)


class InferenceVariant:
    """A compiled forward-only graph and its epilogue (calls with no gradient to compute)."""

    def __init__(self, signature: GraphSignature, compiled: Callable):
        self.compiled = compiled
        self.run = list_callable(compiled)
        self.epilogue = Epilogue(signature)
        self.output_bumps = output_bumps(signature)

    def __call__(self, arguments: list) -> Any:
        # Nothing computed here needs a backward: library calls must not record autograd
        # history on inputs that require grad (a `no_grad` region inside a grad-mode call).
        with torch.no_grad():
            outputs = _run_without_autocast(self.run, list(arguments))
        for position, count in self.output_bumps:
            bump_version(outputs[position], count)
        return self.epilogue(arguments, outputs)


class TrainingVariant:
    """A compiled forward, a backward compiled on first use, and the autograd glue."""

    def __init__(self, signature: GraphSignature, partition, compiled_forward: Callable,
                 compile_inner: Callable, versions: VersionPlan = VersionPlan(()),
                 inputs_reached: Sequence = ()):
        self.signature = signature
        self.versions = versions
        self.inputs_reached = tuple(inputs_reached)
        self.partition = partition
        self.compiled_forward = compiled_forward
        self.run_forward = list_callable(compiled_forward)
        self.compiled_backward: Optional[Callable] = None
        self.backwards: dict = {frozenset(): _Backward(partition.backward, partition)}
        self.compile_inner = compile_inner
        self.epilogue = Epilogue(signature)
        self.differentiable = [output.differentiable for output in signature.function_outputs]
        self.function = _make_function(self)

    def __call__(self, arguments: list) -> Any:
        if torch.is_grad_enabled():
            outputs = self.function.apply(CallVersions(), *arguments)
            return self.epilogue(arguments, outputs)
        # an `enable_grad` region inside a `no_grad` caller computes differentiably, and the
        # views the epilogue rebuilds of its outputs must record history too (made under
        # no_grad, `linear`'s view of its hidden product required grad with no grad_fn: the
        # parameters got no gradient, program fuzzer seed 300)
        with torch.enable_grad():
            outputs = self.function.apply(CallVersions(), *arguments)
            return self.epilogue(arguments, outputs)

    def backward_for(self, absent: frozenset) -> "_Backward":
        """The backward for calls where the tangents at positions `absent` do not arrive
        (`partition.absent`); the full one, given zeros for them, where it cannot be built."""
        backward = self.backwards.get(absent)
        if backward is None:
            partition = self.partition
            pruned = without_tangents(partition.backward, len(partition.saved_reads), absent)
            backward = self.backwards[absent] = (
                _Backward(partition.backward, partition, zeros_for=absent) if pruned is None
                else _Backward(pruned, partition))
        return backward

    def backward_callable(self, backward: "_Backward", example: list) -> Callable:
        """`backward` compiled as a `list_callable`, compiling it now on its first call."""
        if backward.run is None:
            log.debug("compiling backward graph:\n%s", backward.graph.code)
            graph = backward.graph
            compiled = compile_graph(self.compile_inner, graph, list(example),
                                     range(len(output_strides(graph))))
            if self.compiled_backward is None:   # the first compiled (for tests and logs)
                self.compiled_backward = compiled
            backward.run = list_callable(compiled)
        return backward.run


class _Backward:
    """One backward graph of a `TrainingVariant`: for the calls where given tangents do not
    arrive (see `TrainingVariant.backward_for`). `reads`: the inputs it reads (saved, or the
    memory of saved values); `uses`: the saved values it reads (their positions);
    `zeros_for`: tangent positions it takes as zeros, not absent."""

    __slots__ = ("graph", "reads", "uses", "zeros_for", "run")

    def __init__(self, graph: torch.fx.GraphModule, partition,
                 zeros_for: frozenset = frozenset()):
        self.graph = graph
        saved = [node for node in graph.graph.nodes
                 if node.op == "placeholder"][:len(partition.saved_reads)]
        self.uses = frozenset(index for index, node in enumerate(saved) if node.users)
        self.reads = sorted({partition.saved_reads[index] for index in self.uses} - {None})
        self.zeros_for = zeros_for
        self.run: Optional[Callable] = None


def _unviewed(value: Any) -> Any:
    """`value`, or for a view, an alias of its memory that is no view (`detach`)."""
    if isinstance(value, torch.Tensor) and value._is_view():
        return value.detach()
    return value


def _identity(function: Callable) -> Callable:
    return function


# The autograd engine runs a compiled backward after the compiled forward returned, in the
# caller's code: a front end that captures Python frames (dynamo) sets this to wrap functions
# so that they run with capture off, so that neither compiling the backward (sympy, the code
# generator) nor running it is traced as the user's code.
outside_capture: Callable[[Callable], Callable] = _identity


def _compile_and_run_backward(variant: TrainingVariant, backward: _Backward,
                              arguments: list) -> list:
    compiled = variant.backward_callable(backward, arguments)
    return _run_without_autocast(compiled, arguments)


def _backward_arguments(saved: Sequence[torch.Tensor], tangents: Sequence[Any],
                        metas: Sequence[TensorMeta], zeros_for: frozenset) -> list:
    """The saved values, then per tangent position its gradient, zeros where it did not
    arrive and `zeros_for` holds it, nothing where it did not arrive otherwise."""
    arguments = list(saved)
    for position, (grad, meta) in enumerate(zip(tangents, metas)):
        if grad is not None:
            arguments.append(grad.contiguous())
        elif position in zeros_for:
            arguments.append(torch.zeros(meta.size, dtype=meta.dtype, device=meta.device))
    return arguments


def _save(ctx: Any, values: list, fresh: Sequence[bool], output_memory: Sequence[tuple],
          function_outputs: Sequence[torch.Tensor]) -> None:
    """Save `values` for the backward: views as non-views; the memory of inputs (`fresh`) and
    of function outputs (`output_memory`: (saved position, output position) where they may
    share it) through aliases with version counters of their own. Autograd checks every
    saved tensor's counter when the backward unpacks them, but a compiled backward reads
    values eager's does not, and for some calls none of them (an output whose gradient never
    arrives): `check` makes eager's checks, `check_saved_inputs` and `_check_saved_outputs`
    framejit's, for the values the call reads (a write into an output saved for another
    one's gradient raised "modified by an inplace operation" where eager's backward ran,
    program fuzzer seed 310). `ctx.saved_outputs`: (saved position, output position, a
    weak reference to the output, its version now) per output whose memory is saved."""
    fresh = list(fresh)
    ctx.saved_outputs = []
    for index, position in output_memory:
        output = function_outputs[position]
        if values[index].untyped_storage().data_ptr() == output.untyped_storage().data_ptr():
            fresh[index] = True
            ctx.saved_outputs.append((index, position, weakref.ref(output),
                                      version_of(output)))
    ctx.save_for_backward(*[value.data if flag else _unviewed(value)
                            for value, flag in zip(values, fresh)])


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


def _make_function(variant: TrainingVariant) -> type:
    partition = variant.partition
    count = partition.function_output_count
    saved_primals = partition.saved_primals
    differentiable = variant.differentiable
    non_differentiable = [i for i, flag in enumerate(differentiable) if not flag]
    grad_of_input = partition.grad_of_input
    signature = variant.signature
    metas = [output.meta for output in signature.function_outputs]
    # Eager's version checks (module `versions`): the inputs and outputs whose counters the
    # backward compares, and how far the call moves each counter.
    plan = variant.versions
    input_bumps = [info.version_bumps for info in signature.inputs]
    bumps = [output.version_bumps for output in signature.function_outputs]
    bumped_outputs = output_bumps(signature)
    watched_inputs = sorted(plan.watched_inputs | set(partition.reads_inputs))
    watched_outputs = sorted(plan.watched_outputs)
    stale_inputs = plan.stale_inputs
    reached = variant.inputs_reached
    output_memory = [(index, position) for index, position
                     in enumerate(partition.saved_outputs) if position is not None]
    checks = bool(plan.watches or partition.reads_inputs or output_memory)
    # inputs' memory saved with counters of their own (`_save`), except inputs the graph
    # writes: the epilogue's copy after the forward would change what the backward reads
    mutated = set(signature.mutated_inputs)
    fresh = [index is not None and index not in mutated for index in partition.saved_reads]
    tangent_metas = [meta for meta, flag in zip(metas, differentiable) if flag]

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, versions, *primals):
            for index in watched_inputs:
                primal = primals[index]
                versions.inputs[index] = (weakref.ref(primal), version_of(primal),
                                          primal._is_view(), primal.detach()
                                          if index in stale_inputs else None)
            outputs = _run_without_autocast(variant.run_forward, list(primals))
            # An output the generated code returns as a view of a buffer (a 1-D linear's
            # squeezed addmm) is no view in eager: written in place afterwards, as a view of
            # this Function it would raise "Output 1 of CompiledFunction is a view ...".
            function_outputs = tuple(_unviewed(output) for output in outputs[:count])
            for position, times in bumped_outputs:
                bump_version(function_outputs[position], times)
            for position in watched_outputs:
                versions.watch_output(position, function_outputs[position])
            ctx.versions = versions if checks and not caller_hooks_active() else None
            # Saved values as non-views too: a view made here (no grad mode) of an output
            # whose version is bumped above was refused on unpacking ("A view was created in
            # no_grad mode and its base ... has been modified inplace": `c.unfold(1, 2,
            # 2).mul_(5); return c * x, c`, the saved `c` a view of the returned one).
            _save(ctx, [*outputs[count:], *[primals[i] for i in saved_primals]], fresh,
                  output_memory, function_outputs)
            ctx.mark_non_differentiable(*[function_outputs[i] for i in non_differentiable])
            # Missing gradients come as None: autograd would otherwise allocate zeros for
            # every output, the non-differentiable ones (BatchNorm's updated statistics)
            # included; backward makes zeros only for differentiable outputs left unused.
            ctx.set_materialize_grads(False)
            return function_outputs

        @staticmethod
        def backward(ctx, *grads):
            _refuse_double_backward()
            tangents = [grad for grad, flag in zip(grads, differentiable) if flag]
            backward = variant.backward_for(frozenset(
                position for position, grad in enumerate(tangents) if grad is None))
            if ctx.versions is not None:   # eager's errors first, then ours
                check(plan, ctx.versions, grads, input_bumps, bumps)
                check_saved_inputs(backward.reads, ctx.versions, input_bumps)
                _check_saved_outputs(ctx.saved_outputs, backward.uses)
            arguments = _backward_arguments(ctx.saved_tensors, tangents, tangent_metas,
                                            backward.zeros_for)
            if hasattr(ctx, "maybe_clear_saved_tensors"):
                ctx.maybe_clear_saved_tensors()   # free them early unless retain_graph
            gradients = outside_capture(_compile_and_run_backward)(variant, backward,
                                                                    arguments)
            return (None,) + _input_gradients(gradients, grads, reached, grad_of_input)

    return CompiledFunction


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
