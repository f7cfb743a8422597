"""Stage "run" of training compilation (the last stage).

Input: compiled forward/backward graphs (a `Partition` compiled by `compile_inner`) or one
compiled inference graph, plus the `GraphSignature`. Output: callables taking the graph's flat
inputs and returning what the original graph returns:

- `TrainingVariant`: runs the compiled forward and gives each group of outputs an autograd
  node (`nodes.CompiledNodes`: a `torch.autograd.Function` saving what its backward reads);
  backward graphs are compiled with the forward (`config.backward_ahead_of_time`: from
  examples made of the graph's metadata; recompiled at a call whose saved values or
  gradients come laid out otherwise), else on first use; double backward is refused with
  `DoubleBackwardError`.
- `InferenceVariant`: the compiled forward-only graph, for calls without autograd.

Both finish the same way ("epilogue"): copy new values into mutated inputs (under `no_grad`
when the graph updated them under `no_grad`), then rebuild outputs that alias inputs or other
outputs as views of their bases, so aliasing and in-place semantics match eager.
"""
from __future__ import annotations

import collections
import dataclasses
import inspect
import logging
import math
from typing import Any, Callable, Optional, Sequence

import torch
from torch.utils import _pytree as pytree

from inductor.autograd.boxed import StridedGraphRunner, run_graph
from inductor.autograd.nodes import (Backward, CompiledNodes, bump_versions, output_bumps,
                                     run_without_autocast, unviewed)
from inductor.autograd.output_views import OutputViews, WithRebuiltViews
from inductor.eager_run import version_of
from inductor.autograd.partition.absent import without_tangents
from inductor.autograd.signature import (GraphSignature, OutputInfo, OutputKind, TensorMeta,
                                         ViewHistory)
from inductor.autograd.symbols import (Binder, GuardedVariant, added_guards, known_ints,
                                       expected_strides, hint, is_symbolic, stride_rule)
from inductor import config
from inductor.runtime import fallbacks
from inductor.autograd.versions import VersionPlan, name_node, set_versions

log = logging.getLogger("framejit.training")

# How each backward graph got compiled, process-wide: "ahead_of_time" (with its forward),
# "at_first_call" (lazily, inside the autograd engine's call: the switch off, a node whose
# tangents did not all arrive, or an ahead-of-time compile that failed), "relayout" (again,
# for a call whose values came laid out unlike the ahead-of-time example),
# "ahead_of_time_failed" (logged as a warning; the backward compiles at its first call).
_backward_compiles: collections.Counter = collections.Counter()


def backward_compiles() -> dict:
    """The counts of backward compiles by how they happened (see `_backward_compiles`)."""
    return dict(_backward_compiles)


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
    return [None if fake is None else tuple(fake.stride()) for fake in _output_fakes(graph)]


def output_sizes(graph: torch.fx.GraphModule) -> list:
    """The traced sizes of each output of `graph` (None for non-tensors)."""
    return [None if fake is None else tuple(fake.shape) for fake in _output_fakes(graph)]


def _output_fakes(graph: torch.fx.GraphModule) -> list:
    output_node = next(node for node in reversed(graph.graph.nodes) if node.op == "output")
    fakes = []
    for value in output_node.args[0]:
        fake = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        fakes.append(fake if isinstance(fake, torch.Tensor) else None)
    return fakes


def accepts_output_strides(compile_inner: Callable) -> bool:
    """Whether `compile_inner` takes `output_strides` (a code generator returning its outputs
    with the strides asked for), not only `(graph, example_inputs)`."""
    try:
        return "output_strides" in inspect.signature(compile_inner).parameters
    except (TypeError, ValueError):
        return False


def compile_graph(compile_inner: Callable, graph: torch.fx.GraphModule,
                  example_inputs: list, view_positions: Sequence[int] = (),
                  eager_strides: Sequence = ()) -> Callable:
    """`compile_inner(graph, example_inputs)`, also passing `output_strides` when it accepts
    them: the traced strides (the backward reads saved values with the strides they had when
    traced, and views of outputs are rebuilt from those strides), except where
    `eager_strides` (per leading output position, or None) names eager's: the caller sees
    those outputs, or views of them rebuilt from eager's geometry (`Epilogue`); or, past
    the function outputs, the strides a saved value crosses to the backward in
    (`saved_layout`: channels-last activations, the backward compiled for them). In that case
    the outputs at `view_positions` that are views come back as their bases and are rebuilt
    after each call (`output_views`), instead of being copied by the code generator. A
    `compile_inner` that takes no strides has its outputs copied to eager's where they differ.
    """
    if not accepts_output_strides(compile_inner):
        compiled = compile_inner(graph, example_inputs)
        if not any(stride is not None for stride in eager_strides):
            return compiled
        return WithEagerLayout(compiled, eager_strides, output_sizes(graph))
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
    to eager's strides where they come back laid out otherwise. Symbolic strides (of a dense
    layout) are checked as the order of the dims (`symbols.stride_rule`)."""

    takes_argument_list = True

    def __init__(self, compiled: Callable, eager_strides: Sequence, sizes: Sequence = ()):
        self.compiled = compiled
        self.run = list_callable(compiled)
        sizes = list(sizes) + [None] * (len(eager_strides) - len(sizes))
        self.strides = [(position, stride_rule(size, stride))
                        for position, (stride, size) in enumerate(zip(eager_strides, sizes))
                        if stride is not None]
        self.strides = [(position, rule) for position, rule in self.strides
                        if rule is not None]

    @property
    def report(self):
        """The inner compiled graph's report, if it has one."""
        return getattr(self.compiled, "report", None)

    def __call__(self, arguments: list) -> list:
        results = list(self.run(arguments))
        for position, rule in self.strides:
            value = results[position]
            if not isinstance(value, torch.Tensor):
                continue
            stride = expected_strides(rule, value.shape)
            if value.numel() > 1 and any(
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
    autograd records stay `copy_` calls, after those.

    With symbolic sizes (`binder`: the graph's symbols bound from the call's inputs), the
    geometry of views and the sizes the graph returns are evaluated per call."""

    def __init__(self, signature: GraphSignature, binder: Optional[Binder] = None):
        self.signature = signature
        self.binder = binder if binder is not None and any(
            _symbolic_output(output) for output in signature.outputs + signature.detached_bases
        ) else None
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
        # user outputs, then the detached bases views of them are rebuilt over (made first)
        self.outputs = tuple(_constant_symbols_as_ints(output) for output in
                             signature.outputs + signature.detached_bases)
        self.count = len(signature.outputs)
        self.deferred = tuple(position for position, output in enumerate(self.outputs)
                              if output.kind is OutputKind.VIEW_OF_RESULT)
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
                name_node(arguments[index], "")   # (for earlier calls' watches of it)
            else:
                arguments[index].copy_(function_outputs[position])
                name_node(arguments[index], eager_node)
        if self.versions_set:
            set_versions(tensors, eager_versions)
        flat = []
        outputs = self.outputs if self.binder is None else self._concrete(arguments)
        for output in outputs:
            kind = output.kind
            if kind is OutputKind.COMPUTED:
                flat.append(function_outputs[output.base])
            elif kind is OutputKind.INPUT:
                flat.append(arguments[output.base])
            elif kind is OutputKind.VIEW_OF_INPUT:
                flat.append(_output_view(arguments[output.base], output))
            elif kind is OutputKind.VIEW_OF_OUTPUT:
                flat.append(_output_view(function_outputs[output.base], output))
            else:   # (a VIEW_OF_RESULT's place: made below, once its base is)
                flat.append(output.value)
        if self.deferred:
            for position in self.deferred:
                output = outputs[position]
                flat[position] = _output_view(flat[output.base], output)
            del flat[self.count:]
        return pytree.tree_unflatten(flat, self.spec)

    def _concrete(self, arguments: Sequence) -> list:
        """The outputs' infos with their sizes, strides and offsets for this call."""
        binder = self.binder
        bound = binder.bind(arguments)
        concrete = []
        for output in self.outputs:
            if _symbolic_output(output):
                meta = output.meta
                if meta is not None:
                    meta = dataclasses.replace(
                        meta, size=binder.evaluate(meta.size, bound),
                        stride=binder.evaluate(meta.stride, bound),
                        storage_offset=binder.evaluate(meta.storage_offset, bound))
                output = dataclasses.replace(
                    output, meta=meta, base_offset=binder.evaluate(output.base_offset, bound),
                    value=binder.evaluate(output.value, bound)
                    if is_symbolic(output.value) else output.value)
            concrete.append(output)
        return concrete


def _constant_symbols_as_ints(output: OutputInfo) -> OutputInfo:
    """The output's info with every SymInt whose value the trace fixed (its expression a
    constant: `s1 -> 5` after a guard) as a plain int: a real tensor's `view` refuses a
    SymInt even of known value (an LSTM's output view under `dynamic=True`:
    tests/dynamic/test_symbolic_constant_sizes.py)."""
    meta = output.meta
    if meta is not None:
        meta = dataclasses.replace(meta, size=known_ints(meta.size), stride=known_ints(meta.stride),
                                   storage_offset=known_ints(meta.storage_offset))
    return dataclasses.replace(output, meta=meta, base_offset=known_ints(output.base_offset),
                               value=known_ints(output.value))


def _symbolic_output(output: OutputInfo) -> bool:
    """Whether an output's geometry or value (a size the graph returns) is symbolic."""
    meta = output.meta
    return is_symbolic(output.value) or is_symbolic(output.base_offset) or (
        meta is not None and (is_symbolic(meta.size) or is_symbolic(meta.stride)
                              or is_symbolic(meta.storage_offset)))


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


class InferenceVariant:
    """A compiled forward-only graph and its epilogue (calls with no gradient to compute)."""

    def __init__(self, signature: GraphSignature, compiled: Callable,
                 binder: Optional[Binder] = None):
        self.compiled = compiled
        self.run = list_callable(compiled)
        self.epilogue = Epilogue(signature, binder)
        self.output_bumps = output_bumps(signature)

    def __call__(self, arguments: list) -> Any:
        # Nothing computed here needs a backward: library calls must not record autograd
        # history on inputs that require grad (a `no_grad` region inside a grad-mode call).
        with torch.no_grad():
            outputs = run_without_autocast(self.run, list(arguments))
        # A fresh output the generated code returns as a view of another (`d = a.detach()`
        # next to `a`: an `alias` once functionalized) is no view in eager (program fuzzer
        # inductor seed 33251, P37): as in `CompiledNodes`, an alias that is no view.
        outputs = [unviewed(output) for output in outputs]
        bump_versions(outputs, self.output_bumps)
        return self.epilogue(arguments, outputs)


class TrainingVariant:
    """A compiled forward, backwards compiled with it or on first use, and the autograd glue: one
    autograd node per group of outputs (`nodes.CompiledNodes`, `joint.output_groups`)."""

    def __init__(self, signature: GraphSignature, partition, compiled_forward: Callable,
                 compile_inner: Callable, versions: VersionPlan = VersionPlan(()),
                 inputs_reached: Sequence = (), output_groups: Sequence = (),
                 freeing_groups: Sequence = (), binder: Optional[Binder] = None,
                 shape_env: Any = None):
        self.signature = signature
        self.versions = versions
        self.inputs_reached = tuple(inputs_reached)
        self.partition = partition
        self.compiled_forward = compiled_forward
        self.run_forward = list_callable(compiled_forward)
        self.compiled_backward: Optional[Callable] = None   # the first compiled
        self.compiled_backwards: list = []   # all, in the order compiled (tests, logs)
        # (the absent tangents of the group's own backward, the absent ones) -> backward
        self.backwards: dict = {}
        self.compile_inner = compile_inner
        self.shape_env = shape_env   # symbolic sizes: the guards a backward's compile adds
        self.binder = binder         # symbolic sizes: the call's symbols from its inputs
        self.epilogue = Epilogue(signature, binder)
        self.differentiable = [output.differentiable for output in signature.function_outputs]
        self.nodes = CompiledNodes(self, output_groups, freeing_groups)
        self.relaid: dict = {}   # (backward's id, arguments' layout) -> compiled again
        if config.backward_ahead_of_time:
            self.compile_backwards_ahead()

    def __call__(self, arguments: list) -> Any:
        if torch.is_grad_enabled():
            return self.epilogue(arguments, self.nodes(arguments))
        # an `enable_grad` region inside a `no_grad` caller computes differentiably, and the
        # views the epilogue rebuilds of its outputs must record history too (made under
        # no_grad, `linear`'s view of its hidden product required grad with no grad_fn: the
        # parameters got no gradient, program fuzzer seed 300)
        with torch.enable_grad():
            return self.epilogue(arguments, self.nodes(arguments))

    def backward_for(self, absent: frozenset, base: frozenset = frozenset()) -> Backward:
        """The backward for calls where the tangents at positions `absent` do not arrive
        (`partition.absent`), for the node whose outputs' tangents are those not in `base`
        (a subset of `absent`). Where it cannot be built: `base`'s backward, given zeros for
        the others, or for `base` itself the full one, given zeros for all."""
        key = (base, absent)
        backward = self.backwards.get(key)
        if backward is None:
            partition = self.partition
            pruned = without_tangents(partition.backward, len(partition.saved_reads),
                                      absent) if absent else partition.backward
            if pruned is not None:
                backward = Backward(pruned, partition)
            elif absent == base:
                backward = Backward(partition.backward, partition, zeros_for=absent)
            else:
                backward = self.backward_for(base, base).with_zeros(absent - base)
            self.backwards[key] = backward
        return backward

    def compile_backwards_ahead(self) -> None:
        """Compile the backward of each autograd node for calls where all of its outputs'
        gradients arrive (what `loss.backward()` runs), from examples the graph's metadata
        gives (`backward_example`), so no compile runs inside the caller's `backward()`.
        Other backwards (some gradients missing) still compile at their first call."""
        for group in self.nodes.groups:
            backward = self.backward_for(group.absent, group.absent)
            if backward.run is not None:
                continue
            example = backward_example(backward)
            if example is None:
                continue
            try:
                self.backward_callable(backward, example, "ahead_of_time")
            except Exception as error:   # (raised again, if it is, at the first backward)
                _backward_compiles["ahead_of_time_failed"] += 1
                log.warning("backward not compiled ahead of time (%s: %s); it compiles at "
                            "its first call", type(error).__name__, error)
                backward.run = None
                continue
            if self.shape_env is None:
                backward.layout = layout_of(example)
                backward.geometry = geometry_of(example)

    def backward_callable(self, backward: Backward, example: list,
                          how: str = "at_first_call") -> Callable:
        """`backward` compiled as a `list_callable`, compiling it now on its first call."""
        if backward.run is None:
            log.debug("compiling backward graph (%s):\n%s", how, backward.graph.code)
            _backward_compiles[how] += 1
            graph = backward.graph
            guards = len(self.shape_env.guards) if self.shape_env is not None else 0
            compiled = compile_graph(self.compile_inner, graph, list(example),
                                     range(len(output_strides(graph))))
            if self.compiled_backward is None:
                self.compiled_backward = compiled
            self.compiled_backwards.append(compiled)
            backward.run = list_callable(compiled)
            if self.shape_env is not None and len(self.shape_env.guards) > guards:
                backward.run = _guarded_backward(graph, example, backward.run,
                                                 added_guards(self.shape_env, guards))
        return backward.run

    def run_backward(self, backward: Backward, arguments: list) -> list:
        """Run `backward`, compiling it first on its first call.

        The autograd engine calls this from the caller's `loss.backward()`, which may sit in
        a jitted function with frame capture on. Capture is off here by construction, not by
        a wrapper: the front end marks this package's code as a compiler's (dynamo's hook
        runs a compiler's frames, and everything they call, sympy and the code generator
        included, with capture off; docs/architecture.md, "Compilers run with capture
        off"). Backwards are compiled ahead of time where they can be (docs/training.md,
        "Backward ahead of time"); one compiled so whose arguments come laid out otherwise
        than its example is compiled again for that layout (kept beside it)."""
        compiled = self.backward_callable(backward, arguments)
        if backward.layout is not None:
            # the same sizes and strides as arguments seen laid out so: the same layout
            geometry = geometry_of(arguments)
            if geometry != backward.geometry:
                layout = layout_of(arguments)
                if layout != backward.layout:
                    compiled = self._relaid(backward, arguments, layout)
                else:
                    backward.geometry = geometry
        return run_without_autocast(compiled, arguments)

    def _relaid(self, backward: Backward, arguments: list, layout: tuple) -> Callable:
        """`backward` compiled for arguments laid out as `layout` (once per layout)."""
        key = (id(backward), layout)
        compiled = self.relaid.get(key)
        if compiled is None:
            log.info("backward compiled ahead of time met arguments laid out otherwise; "
                     "compiling it for their layout")
            _backward_compiles["relayout"] += 1
            compiled = list_callable(compile_graph(
                self.compile_inner, backward.graph, list(arguments),
                range(len(output_strides(backward.graph)))))
            self.compiled_backwards.append(compiled)
            self.relaid[key] = compiled
        return compiled


def layout_of(arguments: Sequence) -> tuple:
    """The strides of the tensors among `arguments` (what a compiled graph may assume),
    those of dims of size 1 left out (no index reads them)."""
    return tuple(tuple(step if length != 1 else 0
                       for length, step in zip(value.shape, value.stride()))
                 if isinstance(value, torch.Tensor) else None for value in arguments)


def geometry_of(arguments: Sequence) -> list:
    """The sizes and strides of the tensors among `arguments`: equal ones have equal
    `layout_of` (which compares dim by dim in Python: a call's cost, ResNet-50's backward
    takes 263 arguments)."""
    return [(value.shape, value.stride()) if isinstance(value, torch.Tensor) else None
            for value in arguments]


def backward_example(backward: Backward) -> Optional[list]:
    """Example inputs for compiling `backward` before any call: per placeholder, zeros of
    its traced size, dtype and device (sizes at their traced values where symbolic), with its
    traced strides for saved values and contiguous for gradients (the nodes pass every
    arriving gradient as `grad.contiguous()`, and zeros for missing ones); ints for sizes.
    None where a placeholder has no traced value."""
    example = []
    placeholders = [node for node in backward.graph.graph.nodes if node.op == "placeholder"]
    for position, node in enumerate(placeholders):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            size = [hint(length) for length in value.shape]
            stride = ([hint(step) for step in value.stride()] if position < len(backward.kept)
                      else _contiguous_strides(size))
            extent = 1 + sum((length - 1) * step for length, step in zip(size, stride)) \
                if all(size) else 0
            example.append(torch.zeros(extent, dtype=value.dtype, device=value.device)
                           .as_strided(size, stride))
        elif isinstance(value, (int, torch.SymInt)) and not isinstance(value, bool):
            example.append(hint(value))
        else:
            return None
    return example


def _contiguous_strides(size: Sequence[int]) -> list:
    strides, step = [], 1
    for length in reversed(size):
        strides.append(step)
        step *= max(length, 1)
    return strides[::-1]


def _guarded_backward(graph: torch.fx.GraphModule, example: list, run: Callable,
                      guards: list) -> Callable:
    """A backward compiled after the front end read the ShapeEnv's guards, whose compile
    added some (`compile_inner` specialised a size): checked per call, the graph run as is
    (op by op, for every size) where they fail; where the backward's inputs do not bind
    their symbols, always run as is. Either way a counted fallback."""
    binder = Binder([node.meta.get("val") for node in graph.graph.nodes
                     if node.op == "placeholder"])
    as_is = run_graph(graph, example)
    if not binder.covers(guards):
        reason = ("training graph with symbolic sizes: the backward's compile specialised "
                  "sizes the backward's inputs do not give; it runs op by op")
        log.warning("%s", reason)
        fallbacks.record("unsupported", reason)
        return as_is
    return GuardedVariant(run, as_is, guards, binder,
                          "training graph with symbolic sizes: the backward's compile "
                          "specialised sizes; other sizes run op by op")
