"""Training compilation: the backward pass captured ahead of time, partitioned and compiled.

Input: a torch-level FX graph (from `dynamo` capture or `torch.compile`), its example inputs, and
`compile_inner(aten_graph, example_inputs) -> callable`, which compiles a functional, decomposed
ATen graph with no autograd. Output: a callable taking the same flat inputs and returning what
the graph returns, with gradients flowing back to every input that requires grad.

Stages, in the order data flows (one module each):

    signature.analyze     graph + inputs -> GraphSignature (mutations, aliases)
    joint.trace_joint     -> JointGraph (functional ATen forward+backward, via make_fx)
    partition.partition   -> Partition (forward + backward graphs, saved values by min cut)
    saved_layout          -> the strides saved values cross in (channels-last activations)
    runtime, nodes        -> the compiled forward, one autograd node per group of outputs
                             (`joint.output_groups`) running their backwards; epilogue

Calls are dispatched on grad mode, autocast state and which inputs require grad: each
combination gets its own compiled variant (compiled when first seen). Without grad mode, or
with nothing to differentiate, a forward-only graph is traced (`joint.trace_inference`).

Symbolic sizes (`symbols`): where the graph's placeholders carry fakes with symbolic sizes,
every stage traces in the graph's fake mode, so the joint, forward and backward graphs are
symbolic and one variant (one backward) serves every size the ShapeEnv's guards admit.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import torch
import torch.fx

from inductor.autograd.boxed import run_graph
from inductor.autograd.decompositions import decomposition_table
from inductor.autograd.functional import data_dependent_errors
from inductor.autograd.global_state import GlobalState
from inductor.autograd.joint import trace_inference, trace_joint
from inductor.autograd.nodes import DoubleBackwardError
from inductor.autograd.partition import PartitionPolicy, partition, policy
from inductor.autograd.runtime import (InferenceVariant, TrainingVariant,
                                       accepts_output_strides, compile_graph,
                                       function_output_strides, output_strides)
from inductor.autograd.saved_layout import forward_strides, relayout_backward, saved_layouts
from inductor.autograd.signature import (OutputKind, SharedInputWrites, UnsupportedGraph,
                                         analyze, lift_attributes)
from inductor.autograd.symbols import GuardedVariant, SymbolicInputs, added_guards
from inductor.aliasing import UnsupportedGraph as InexpressibleWrites
from inductor.decompose import check_state_calls, refuse_inexpressible_writes
from inductor.runtime.compiled_graph import StoragePattern
from inductor.runtime.cudagraphs import COPIED_INTO_INPUTS

__all__ = ["compile_training", "aot_eager", "run_graph", "CompiledTraining", "DoubleBackwardError",
           "UnsupportedGraph", "PartitionPolicy", "policy"]

log = logging.getLogger("framejit.training")


class CompiledTraining:
    """The callable `compile_training` returns: picks (or compiles) the variant for the
    current global state, the inputs' `requires_grad` and, for graphs that write into an
    input, how the inputs share storages; runs it, then leaves grad mode as the graph
    does."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                 compile_inner: Callable, decompositions: dict):
        self.owner = gm
        self.lifted = lift_attributes(gm)
        self.compile_inner = compile_inner
        self.decompositions = decompositions
        self.variants: dict[tuple, Callable] = {}
        self.input_count = len(example_inputs)
        self.writes_inputs = False   # set when a variant finds a write into an input
        self.grad_mode_after = check_state_calls(gm)
        # symbolic sizes (the front end's contract, issue 23): traced in the graph's fake
        # mode, so that one variant serves every size the ShapeEnv's guards admit
        self.symbolic = SymbolicInputs.of(self.lifted.module)
        self.sizes = self.symbolic.symbolic_positions() if self.symbolic else frozenset()
        arguments = list(example_inputs) + self.lifted.fetch(gm)
        self._variant(arguments)

    def _key(self, arguments: Sequence[Any]) -> tuple:
        """Global state, which inputs require grad, the values of non-tensor inputs (they
        are constants in the traced graphs), and for graphs writing into an input, which
        inputs share a storage (functionalization assumed the compile-time sharing)."""
        sizes = self.sizes
        key = (GlobalState.current(),
               tuple(a.requires_grad if isinstance(a, torch.Tensor) else
                     "size" if position in sizes else _constant_key(a)
                     for position, a in enumerate(arguments)))
        if self.writes_inputs:
            key += (StoragePattern.sharing(arguments),)
        return key

    def __call__(self, *arguments):
        arguments = list(arguments)
        if self.lifted.attribute_paths:
            arguments.extend(self.lifted.fetch(self.owner))
        variant = self.variants.get(self._key(arguments))
        if variant is None:
            variant = self._variant(arguments)
        result = variant(arguments)
        if self.grad_mode_after is not None:
            torch._C._set_grad_enabled(self.grad_mode_after)
        return result

    def _variant(self, arguments: list) -> Callable:
        key = self._key(arguments)
        guards = len(self.symbolic.shape_env.guards) if self.symbolic else 0
        try:
            variant = self._compile_variant(key, arguments)
        except SharedInputWrites as reason:
            self.writes_inputs = True
            log.info("training compilation runs this graph eagerly for these inputs: %s",
                     reason)
            variant = EagerVariant(self.lifted.module)
        except (UnsupportedGraph, InexpressibleWrites) as reason:
            log.warning("training compilation runs this graph eagerly: %s", reason)
            variant = EagerVariant(self.lifted.module)
        except data_dependent_errors() as error:
            log.warning("training compilation runs this graph eagerly: its shapes or control "
                        "flow depend on tensor values (%s)", type(error).__name__)
            variant = EagerVariant(self.lifted.module)
        if self.variants and self.symbolic is not None:
            variant = self._guarded(variant, guards)
        # The key again: compiling may have found that the graph writes into an input,
        # which makes the sharing of storages part of the key.
        self.variants[self._key(arguments)] = variant
        return variant

    def _guarded(self, variant: Callable, count: int) -> Callable:
        """A variant compiled after the first call: the guards its trace added to the
        ShapeEnv (the front end installed those it held when the backend returned) are
        checked at each call (`symbols.GuardedVariant`)."""
        added = added_guards(self.symbolic.shape_env, count)
        if not added:
            return variant
        log.info("training variant with symbolic sizes checks %d more guards at run time",
                 len(added))
        return GuardedVariant(variant, EagerVariant(self.lifted.module), added,
                              self.symbolic.binder())

    def _compile_variant(self, key: tuple, arguments: list) -> Callable:
        state, requires_grad = key[:2]
        graph = self.lifted.module
        refuse_inexpressible_writes(graph, arguments)   # as the inference path does (P41)
        symbolic = self.symbolic
        binder = symbolic.binder() if symbolic is not None else None
        signature = analyze(graph, arguments, state.autocast_context, state.grad_enabled,
                            symbolic)
        if signature.mutated_inputs and not self.writes_inputs:
            self.writes_inputs = True
        # Outputs that need a backward exist wherever the graph computes from inputs that
        # require grad with grad mode on: the caller's mode or an `enable_grad` region.
        training = (any(flag is True for flag in requires_grad)
                    and signature.tangent_count > 0 and signature.differentiable_inputs)
        if training:
            joint = trace_joint(graph, signature, arguments, state, self.decompositions,
                                symbolic)
            parts = partition(joint, signature.mutated_inputs)
            log.debug("partitioned: %s", parts.describe())
            saved = range(parts.function_output_count, len(output_strides(parts.forward)))
            strides = function_output_strides(signature)
            if accepts_output_strides(self.compile_inner) and symbolic is None:
                layouts = saved_layouts(parts)   # channels-last activations stay so
                relayout_backward(parts, layouts)
                strides = forward_strides(parts, layouts, strides)
            parts.forward.meta[COPIED_INTO_INPUTS] = copied_into_inputs(signature,
                                                                        joint.versions)
            compiled = compile_graph(self.compile_inner, parts.forward, list(arguments), saved,
                                     strides)
            variant = TrainingVariant(signature, parts, compiled, self.compile_inner,
                                      joint.versions, joint.inputs_reached,
                                      joint.output_groups, joint.freeing_groups, binder,
                                      symbolic.shape_env if symbolic is not None else None)
        else:
            traced = trace_inference(graph, signature, arguments, state, self.decompositions,
                                     symbolic)
            variant = InferenceVariant(signature, compile_graph(
                self.compile_inner, traced, list(arguments), (),
                function_output_strides(signature)), binder)
        return variant


def copied_into_inputs(signature, versions) -> frozenset:
    """The forward's output positions that `Epilogue` copies into inputs and that nothing
    else reads: an input's new value that no user output returns or views, and that no
    version check watches. Nothing holds them after the call (a `reduce-overhead` forward
    hands them out uncopied: `inductor.runtime.cudagraphs.COPIED_INTO_INPUTS`)."""
    read = {output.base for output in signature.outputs
            if output.kind in (OutputKind.COMPUTED, OutputKind.VIEW_OF_OUTPUT)}
    read |= versions.watched_outputs
    return frozenset(position for position, output in enumerate(signature.function_outputs)
                     if output.source == "mutated_input" and position not in read)


def _constant_key(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return ("unhashable", id(value))
    return (type(value), value)


class EagerVariant:
    """Runs the torch-level graph as it is (for graphs training compilation refuses)."""

    def __init__(self, graph: torch.fx.GraphModule):
        self.graph = graph

    def __call__(self, arguments: list) -> Any:
        return self.graph(*arguments)


def compile_training(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                     compile_inner: Callable) -> Callable:
    """Compile `gm` for training: trace forward and backward ahead of time, partition them,
    compile both graphs with `compile_inner` (the backward with the forward, or at its first
    use: `runtime.TrainingVariant`). The result takes the same flat positional inputs as `gm`
    and returns what `gm` returns."""
    return CompiledTraining(gm, example_inputs, compile_inner, decomposition_table())


def aot_eager(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    """Backend: joint trace + partition + run the partitioned ATen graphs without codegen
    (isolates the cost and correctness of this layer from the code generator's)."""
    return compile_training(gm, example_inputs, run_graph)
