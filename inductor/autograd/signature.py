"""Stage "analyze" of training compilation (the first stage).

Input: a torch-level FX graph and its example inputs. Output: a `GraphSignature` saying, for
every input, whether the graph mutates it, and for every output, whether it is a fresh tensor
or an alias of an input or of another output (and how to rebuild that alias from its base).

It is found by running the graph twice: once functionalized with autograd on, on fake tensors,
so nothing is computed and no random number is drawn (mutations, aliasing, autograd state);
once as is (eager's layouts of outputs and views: a functional wrapper's is its current
value's), by eager's kernels on CPU (`inductor/eager_run.py`: invisible, written inputs copied)
and on fake tensors elsewhere. Tensors that the graph module holds (`get_attr` nodes, and the
parameters and buffers of modules called by `call_module` nodes, as `torch.fx.symbolic_trace`
leaves them) are first lifted to trailing inputs, so that their gradients are computed and
their updates recorded like those of any other input.

The signature fixes the layout of the compiled function's outputs ("function outputs"):
new values of data-mutated inputs, then fresh user outputs, then hidden bases (intermediates
that several outputs view but the graph does not return). Aliases are rebuilt outside it.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import enum
from typing import Any, Callable, Optional, Sequence

import torch
import torch.fx
from torch.nn.utils.stateless import _reparametrize_module
from torch.utils import _pytree as pytree

from inductor.autograd.functional import (fake_mode, functionalization, has_data_mutation,
                                          has_metadata_mutation,
                                          mutations_hidden_from_autograd, to_functional)
from inductor.autograd.symbols import SymbolicInputs
from inductor.autograd.version_messages import node_name
from inductor.eager_run import eager_run, replayable, version_of
from inductor.graph_calls import hookless
from inductor.python_dispatcher import aten_python_dispatcher


class UnsupportedGraph(Exception):
    """The graph does something training compilation does not handle (for example it changes
    an input's shape or strides in place). Cause: named in the message. Fix: none needed; the
    caller runs that graph eagerly."""


class SharedInputWrites(UnsupportedGraph):
    """The graph writes into an input that shares its storage with another input (views of
    one tensor passed separately): the traced functional graph would treat them as
    independent. The caller runs the graph eagerly for that sharing of storages."""


@dataclasses.dataclass(frozen=True)
class TensorMeta:
    """What the runtime needs to rebuild a view or make a tangent: layout, dtype, device."""

    size: tuple
    stride: tuple
    storage_offset: int
    dtype: torch.dtype
    device: torch.device

    @staticmethod
    def of(tensor: torch.Tensor) -> "TensorMeta":
        """The metadata of `tensor` (a real or fake tensor)."""
        offset = tensor.storage_offset()   # (a SymInt stays one: int() would guard on it)
        return TensorMeta(tuple(tensor.size()), tuple(tensor.stride()),
                          offset if isinstance(offset, torch.SymInt) else int(offset),
                          tensor.dtype, tensor.device)


@dataclasses.dataclass(frozen=True)
class InputInfo:
    """One graph input: whether it is a tensor, needs a gradient, and is mutated (and if so,
    whether only under `no_grad`, so that autograd must not see the update)."""

    is_tensor: bool
    requires_grad: bool
    mutates_data: bool
    mutation_hidden: bool = False
    version_bumps: int = 0   # how far eager moves its version counter (one per write)
    written_through_view: bool = False   # eager's last recorded write went through a view
    eager_node: str = ""   # the name of the node eager's last recorded write leaves ("Sub")


class OutputKind(enum.Enum):
    """How a graph output is produced at run time."""

    COMPUTED = "computed"            # a fresh tensor returned by the compiled function
    INPUT = "input"                  # the very object passed as input `base`
    VIEW_OF_INPUT = "view_of_input"  # a view of input `base`, rebuilt from its metadata
    VIEW_OF_OUTPUT = "view_of_output"  # a view of function output `base`, rebuilt likewise
    VIEW_OF_RESULT = "view_of_result"  # a view of user output `base` (or of a detached base)
    CONSTANT = "constant"            # a non-tensor value, returned as traced


class ViewHistory(enum.Enum):
    """What autograd knows of an output that is a view (of an input or of an output) when the
    graph returns, as eager leaves it; the view is rebuilt so."""

    RECORDED = "recorded"   # made with grad mode on: a node over its base's history
    NO_GRAD = "no_grad"     # made with grad mode off: requires grad as its base does, no node
    STALE = "stale"         # made with grad mode off, then its base written: grad_fn raises
    DETACHED = "detached"   # `x.detach()` (`.data`): no gradient whatever x's, and no view
    NO_GRADIENT = "no_gradient"   # a view without one (of a `detach()`, or of a base with none)


@dataclasses.dataclass(frozen=True)
class OutputInfo:
    """One graph output. `base` indexes inputs (INPUT, VIEW_OF_INPUT) or function outputs
    (COMPUTED, VIEW_OF_OUTPUT); `meta` is the view's metadata; `value` a CONSTANT's value."""

    kind: OutputKind
    base: int = -1
    meta: Optional[TensorMeta] = None
    value: Any = None
    base_offset: int = 0   # the base's storage offset when traced (views are rebuilt relative)
    history: ViewHistory = ViewHistory.RECORDED   # a view's autograd state (rebuilt so)


@dataclasses.dataclass(frozen=True)
class FunctionOutput:
    """One output of the compiled function: where it comes from and whether it is
    differentiable (requires grad and has a floating or complex dtype)."""

    source: str          # "mutated_input" | "output" | "hidden_base"
    index: int           # input index, user output index, or user output index whose _base it is
    differentiable: bool
    meta: TensorMeta
    version_bumps: int = 0   # writes eager made into it (or its views) inside the graph


@dataclasses.dataclass(frozen=True)
class GraphSignature:
    """Everything later stages need to know about inputs, outputs and aliasing."""

    inputs: tuple[InputInfo, ...]
    outputs: tuple[OutputInfo, ...]
    function_outputs: tuple[FunctionOutput, ...]
    output_spec: Any  # pytree spec of the graph's return value
    # `detach()`s of inputs that eager's output views have as `_base` and the graph does not
    # return (VIEW_OF_INPUT, DETACHED): VIEW_OF_RESULT indexes them after the user outputs
    detached_bases: tuple = ()

    @property
    def mutated_inputs(self) -> list[int]:
        """Indices of inputs whose data the graph changes."""
        return [i for i, info in enumerate(self.inputs) if info.mutates_data]

    @property
    def differentiable_inputs(self) -> list[int]:
        """Indices of tensor inputs that require grad."""
        return [i for i, info in enumerate(self.inputs) if info.requires_grad]

    @property
    def tangent_count(self) -> int:
        """How many gradients the backward takes: one per differentiable function output."""
        return sum(output.differentiable for output in self.function_outputs)

    def describe(self) -> str:
        """A readable summary, for logs and error messages."""
        lines = [f"inputs: {len(self.inputs)}, mutated: {self.mutated_inputs}, "
                 f"requiring grad: {self.differentiable_inputs}"]
        for index, output in enumerate(self.outputs):
            lines.append(f"output {index}: {output.kind.value} base={output.base}")
        for index, output in enumerate(self.function_outputs):
            lines.append(f"function output {index}: {output.source} {output.index} "
                         f"differentiable={output.differentiable}")
        return "\n".join(lines)


def is_differentiable_dtype(dtype: torch.dtype) -> bool:
    """Floating and complex dtypes carry gradients; integers and bool never do."""
    return dtype.is_floating_point or dtype.is_complex


# ---------------------------------------------------------------------------------------------
# Lifting attribute tensors to inputs


@dataclasses.dataclass
class LiftedGraph:
    """A graph whose tensor attributes became trailing placeholders, and how to fetch them."""

    module: torch.fx.GraphModule
    attribute_paths: list[str]   # dotted paths on the original module, one per lifted input

    def fetch(self, owner: torch.nn.Module) -> list[torch.Tensor]:
        """The current values of the lifted attributes (parameters may have been replaced)."""
        return [_resolve(owner, path) for path in self.attribute_paths]


def _resolve(owner: Any, path: str) -> Any:
    for part in path.split("."):
        owner = getattr(owner, part)
    return owner


class ModuleCall:
    """Calls a submodule with its parameters and buffers passed in as arguments (through
    `torch.func.functional_call`), so that they are graph inputs like any other tensor."""

    def __init__(self, module: torch.nn.Module, names: list[str]):
        self.module = module
        self.names = names
        self.__name__ = f"call_{type(module).__name__}"

    def __call__(self, *arguments, **keywords):
        count = len(self.names)
        state = dict(zip(self.names, arguments[:count]))
        twin = _twin(self.module)   # swapped in, called by `forward` (no module hooks)
        with _reparametrize_module(twin, state, tie_weights=False, strict=False):
            return twin.forward(*arguments[count:], **keywords)


def _twin(module: torch.nn.Module) -> torch.nn.Module:
    """A shallow copy of `module` and its submodules with dictionaries of parameters, buffers
    and submodules of their own, for `functional_call` to swap tensors in. Swapped in the
    module itself, the fake tensors of a trace were what another thread calling the same
    module eagerly saw (wrong values, `in_kernel_invocation` assertions, a segmentation fault:
    tests/inductor/test_threads.py::test_threads_train_one_graph)."""
    twin = copy.copy(module)
    twin._parameters = dict(module._parameters)
    twin._buffers = dict(module._buffers)
    twin._modules = {name: None if child is None else _twin(child)
                     for name, child in module._modules.items()}
    return twin


def _module_state(module: torch.nn.Module) -> list[str]:
    names = [name for name, _ in module.named_parameters(remove_duplicate=False)]
    return names + [name for name, _ in module.named_buffers(remove_duplicate=False)]


def lift_attributes(gm: torch.fx.GraphModule) -> LiftedGraph:
    """Turn every `get_attr` node that yields a tensor into a placeholder after the existing
    ones, and every `call_module` node whose module holds tensors into a call that takes them
    as arguments. Returns the original module unchanged when there is nothing to lift."""
    attributes = [node for node in gm.graph.nodes if node.op == "get_attr"
                  and isinstance(_resolve(gm, node.target), torch.Tensor)]
    module_calls = {node: _module_state(gm.get_submodule(node.target))
                    for node in gm.graph.nodes if node.op == "call_module"}
    module_calls = {node: names for node, names in module_calls.items() if names}
    if not attributes and not module_calls:
        return LiftedGraph(gm, [])
    paths: list[str] = []
    for node in attributes:
        paths.append(node.target)
    for node, names in module_calls.items():
        paths.extend(f"{node.target}.{name}" for name in names)
    paths = list(dict.fromkeys(paths))
    graph = torch.fx.Graph()
    environment: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            environment[node] = graph.node_copy(node, lambda n: environment[n])
    lifted = {path: graph.placeholder("lifted_" + path.replace(".", "_")) for path in paths}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if node in attributes:
            environment[node] = lifted[node.target]
        elif node in module_calls:
            names = module_calls[node]
            call = ModuleCall(gm.get_submodule(node.target), names)
            state = tuple(lifted[f"{node.target}.{name}"] for name in names)
            arguments = torch.fx.map_arg(node.args, lambda n: environment[n])
            keywords = torch.fx.map_arg(node.kwargs, lambda n: environment[n])
            environment[node] = graph.call_function(call, state + tuple(arguments), keywords)
        else:
            environment[node] = graph.node_copy(node, lambda n: environment[n])
    return LiftedGraph(torch.fx.GraphModule(gm, graph), paths)


# ---------------------------------------------------------------------------------------------
# The fake run


def _storage_key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


def analyze(gm: torch.fx.GraphModule, inputs: Sequence[Any],
            autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
            grad_enabled: bool = True, symbolic: Optional[SymbolicInputs] = None
            ) -> GraphSignature:
    """Run `gm` on functional wrappers of fake copies of `inputs` (entering with grad mode
    `grad_enabled`, which the graph's own `no_grad`/`enable_grad` regions switch; inside
    `autocast()`), and describe its mutations and outputs. Raises `UnsupportedGraph` when the
    graph changes an input's sizes, strides or storage in place. With `symbolic` (a graph
    with symbolic sizes), the fakes are its placeholders' and the metas symbolic."""
    mode = fake_mode() if symbolic is None else None
    # Detached outside the fake mode: inside it, `detach()` of a real input returns a fake
    # tensor sharing the input's version counter, and each write traced below bumped the
    # caller's tensor (`x._version` 2 higher after a first call writing into `x` twice).
    fakes = symbolic.fakes(inputs) if symbolic is not None else [
        mode.from_tensor(value.detach()) if isinstance(value, torch.Tensor) else value
        for value in inputs]
    with _tracing(mode, symbolic), functionalization():
        arguments = []
        for value, fake in zip(inputs, fakes):
            wrapped = to_functional(fake)
            if isinstance(value, torch.Tensor) and value.requires_grad:
                # A non-leaf, so that in-place updates are legal here as they are in eager.
                with torch.enable_grad():
                    wrapped = wrapped.requires_grad_(True).clone()
            arguments.append(wrapped)
        starts = [version_of(argument) for argument in arguments]
        nodes = [argument.grad_fn if isinstance(argument, torch.Tensor) else None
                 for argument in arguments]
        with torch.set_grad_enabled(grad_enabled), autocast():
            result = hookless(gm)(*arguments)
        flat, spec = pytree.tree_flatten(result)
        input_infos = [_input_info(value, argument, start, node) for value, argument, start,
                       node in zip(inputs, arguments, starts, nodes)]
        _refuse_writes_into_shared_inputs(inputs, input_infos)
        function_outputs = [
            FunctionOutput("mutated_input", index,
                           bool(argument.requires_grad) and not info.mutation_hidden
                           and is_differentiable_dtype(argument.dtype), TensorMeta.of(argument))
            for index, (argument, info) in enumerate(zip(arguments, input_infos))
            if info.mutates_data]
    # after the functional run, whose refusals (`UnsupportedGraph`) come first
    eager_flat, eager_inputs = _eager_layouts(
        gm, inputs, autocast, grad_enabled,
        {index for index, info in enumerate(input_infos) if info.mutates_data}, symbolic)
    with _tracing(mode, symbolic), functionalization():
        outputs = _classify_outputs(flat, arguments, eager_flat, eager_inputs, function_outputs)
    detached_bases = _views_of_detached(outputs, eager_flat, eager_inputs)
    return GraphSignature(tuple(input_infos), tuple(outputs), tuple(function_outputs), spec,
                          tuple(detached_bases))


def _tracing(mode: Any, symbolic: Optional[SymbolicInputs]):
    """The fake mode to run in: `mode`, or the graph's own for symbolic sizes."""
    return mode if symbolic is None else symbolic.tracing()


def _refuse_writes_into_shared_inputs(inputs: Sequence[Any], infos: list) -> None:
    """Raise `UnsupportedGraph` when the graph writes into an input that shares its storage
    with another input (views of one tensor passed separately): the traced functional graph
    would treat them as independent, and a write through one would not show in the other."""
    storages: dict = {}
    for value in inputs:
        if isinstance(value, torch.Tensor):
            key = _storage_key(value)
            storages[key] = storages.get(key, 0) + 1
    for value, info in zip(inputs, infos):
        if info.mutates_data and storages[_storage_key(value)] > 1:
            raise SharedInputWrites("the graph writes into an input that shares its memory "
                                    "with another input (views of one tensor passed "
                                    "separately)")


def _input_info(value: Any, argument: Any, start: int, node_before: Any) -> InputInfo:
    """`node_before`: the argument's `grad_fn` before the run. Writes that leave it in place
    are hidden from autograd (under `no_grad`, or through a `detach()` alias: eager's
    `w.detach().mul_(2)` into a parameter records nothing and is legal; a recorded copy into
    the leaf raised 'a leaf Variable that requires grad is being used in an in-place
    operation')."""
    if not isinstance(value, torch.Tensor):
        return InputInfo(False, False, False)
    if has_metadata_mutation(argument):
        raise UnsupportedGraph("the graph changes the sizes, strides or storage of an input "
                               "in place (resize_, set_, t_, ...)")
    mutated = has_data_mutation(argument)
    hidden = mutated and (mutations_hidden_from_autograd(argument)
                          or argument.grad_fn is node_before)
    node = argument.grad_fn if mutated else None
    through_view = node is not None and node.name() == "torch::autograd::CopySlices"
    return InputInfo(True, bool(value.requires_grad), mutated, hidden,
                     version_of(argument) - start, through_view,
                     "" if node is None else node_name(node))


def _eager_layouts(gm: torch.fx.GraphModule, inputs: Sequence[Any], autocast: Callable,
                   grad_enabled: bool, written: set,
                   symbolic: Optional[SymbolicInputs] = None) -> tuple[list, list]:
    """(the graph's flat outputs, its inputs) from a run by eager's kernels on CPU
    (`inductor/eager_run.py`; `written`: the positions of inputs the graph writes) or else on
    plain fake copies of `inputs`, as eager lays them out: the layouts of outputs, hidden bases
    and views are read from them.
    A functional wrapper's layout is that of its current value, not eager's: a write
    replaces a tensor's value by a fresh one (offset 0), which some functional ops lay out
    anew (`masked_fill_`, `index_add_`, `scatter_`, `zero_` on torch 2.11: dense strides),
    and values computed from it follow; an input requiring grad is traced through a clone; a view
    keeps the layout of the value it was made of (P30, seed 11550: a view at offset 7 of an
    input at 4, measured against the written input read at 0, was rebuilt at 11; seed 10825:
    `t1 = x.T + y @ x.T; t1.zero_()` came back with strides (2, 1), eager's (1, 2)). Nothing
    requires grad in this run (eager would refuse writes into leaves the other run clones).
    It runs after the functional run, which passed: an error here is an internal one.
    With symbolic sizes it runs on the graph's fakes (a run on the real inputs would give
    layouts of one size only)."""
    def run(*values):
        with torch.set_grad_enabled(grad_enabled), autocast():
            return hookless(gm)(*values)

    detached = [value.detach() if isinstance(value, torch.Tensor) else value
                for value in inputs]
    if symbolic is not None:
        fakes = symbolic.fakes(inputs)
        # torch's Python dispatcher, as the front end's fake runs: without it torch 2.11
        # answered `q.size(-1)` through FakeTensor's `aten.size` handler, which made every
        # dim of q an int (guards `s0 == 4`: a graph per size)
        with symbolic.tracing(), aten_python_dispatcher(), \
                torch.set_grad_enabled(grad_enabled), autocast():
            return pytree.tree_leaves(hookless(gm)(*fakes)), fakes
    real = eager_run(run, detached, written) if replayable(gm) else None
    if real is not None:
        return real[0], real[1]
    mode = fake_mode()
    fakes = [mode.from_tensor(value) if isinstance(value, torch.Tensor) else value
             for value in detached]
    with mode, torch.set_grad_enabled(grad_enabled), autocast():
        return pytree.tree_leaves(hookless(gm)(*fakes)), fakes


def _check_same_outputs(flat: list, eager_flat: list) -> None:
    """Refuses a graph whose outputs differ in number, tensor-ness or shape between the
    functional run and the run without functionalization."""
    if len(eager_flat) != len(flat) or any(
            isinstance(value, torch.Tensor) != isinstance(eager, torch.Tensor)
            or isinstance(value, torch.Tensor) and value.shape != eager.shape
            for value, eager in zip(flat, eager_flat)):
        raise UnsupportedGraph("the graph's outputs on fake tensors differ with and without "
                               "functionalization")


def _classify_outputs(flat: list, arguments: list, eager_flat: list, eager_inputs: list,
                      function_outputs: list) -> list[OutputInfo]:
    """Sort each output into a kind (see `OutputKind`), appending fresh outputs and then hidden
    bases to `function_outputs`. Kinds are read from `flat` (the functional run), layouts from
    `eager_flat` and `eager_inputs` (`_eager_layouts`)."""
    _check_same_outputs(flat, eager_flat)
    input_storages = {}
    for index, argument in enumerate(arguments):
        if isinstance(argument, torch.Tensor):
            input_storages.setdefault(_storage_key(argument), index)
    outputs: list[Optional[OutputInfo]] = [None] * len(flat)
    position_of: dict[int, int] = {}   # id(tensor) -> function output index
    pending_views = []
    aliased = _detached_aliases(flat, eager_flat, input_storages)
    for index, value in enumerate(flat):
        if not isinstance(value, torch.Tensor):
            outputs[index] = OutputInfo(OutputKind.CONSTANT, value=value)
            continue
        if index in aliased:
            continue
        identical = next((i for i, argument in enumerate(arguments) if argument is value), None)
        if identical is not None:
            outputs[index] = OutputInfo(OutputKind.INPUT, identical)
        elif _storage_key(value) in input_storages:
            base = input_storages[_storage_key(value)]
            eager = eager_flat[index]
            if _storage_key(eager) != _storage_key(eager_inputs[base]):
                raise UnsupportedGraph("an output views an input with functionalization and "
                                       "not without")
            outputs[index] = OutputInfo(OutputKind.VIEW_OF_INPUT, base, TensorMeta.of(eager),
                                        base_offset=eager_inputs[base].storage_offset(),
                                        history=_view_history(value))
        elif value._base is None:
            if id(value) not in position_of:   # the same tensor returned twice: one position
                position_of[id(value)] = len(function_outputs)
                function_outputs.append(_function_output("output", index, value,
                                                         eager_flat[index]))
            outputs[index] = OutputInfo(OutputKind.COMPUTED, position_of[id(value)])
        else:
            pending_views.append(index)
    for index in pending_views:
        value, eager = flat[index], eager_flat[index]
        base = value if value._base is None else value._base
        eager_base = eager if eager._base is None else eager._base
        if _storage_key(eager) != _storage_key(eager_base) or eager_base.shape != base.shape:
            raise UnsupportedGraph("an output views an intermediate with functionalization "
                                   "and not without")
        if id(base) not in position_of:
            position_of[id(base)] = len(function_outputs)
            function_outputs.append(_function_output("hidden_base", index, base, eager_base))
        outputs[index] = OutputInfo(OutputKind.VIEW_OF_OUTPUT, position_of[id(base)],
                                    TensorMeta.of(eager),
                                    base_offset=eager_base.storage_offset(),
                                    history=_view_history(value))
    for index, owner in aliased.items():
        eager, eager_owner = eager_flat[index], eager_flat[owner]
        outputs[index] = OutputInfo(OutputKind.VIEW_OF_OUTPUT, outputs[owner].base,
                                    TensorMeta.of(eager),
                                    base_offset=eager_owner.storage_offset(),
                                    history=ViewHistory.DETACHED)
    return outputs


def _views_of_detached(outputs: list, eager_flat: list, eager_inputs: list) -> list:
    """Views of an input whose `_base` in eager is no input but a `detach()` of one: an
    output (`t = x.detach(); return t, t[1:]`, program fuzzer seed 92052) or a tensor the
    graph does not return (`x.detach()[1:]`). Rebuilt over the input, their `_base` was the
    input (or a `detach()` of it per output, not eager's one tensor): they become views of
    that output (VIEW_OF_RESULT), or of a detached base made once per call; returns those
    bases (`GraphSignature.detached_bases`). `outputs` is changed in place."""
    bases: list = []
    keys: dict = {}   # id(eager's hidden base) -> index among the results
    for index, output in enumerate(outputs):
        if output.kind is not OutputKind.VIEW_OF_INPUT or \
                output.history is ViewHistory.DETACHED:
            continue
        base, source = eager_flat[index]._base, eager_inputs[output.base]
        if base is None or base is source or base is source._base:
            continue    # (an input that is a view: eager's views of it have its base)
        owner = next((position for position, value in enumerate(eager_flat)
                      if value is base), None)
        if owner is None:
            owner = keys.get(id(base))
        if owner is None:
            owner = keys[id(base)] = len(outputs) + len(bases)
            bases.append(OutputInfo(OutputKind.VIEW_OF_INPUT, output.base,
                                    TensorMeta.of(base), base_offset=output.base_offset,
                                    history=ViewHistory.DETACHED))
        outputs[index] = dataclasses.replace(output, kind=OutputKind.VIEW_OF_RESULT,
                                             base=owner, base_offset=base.storage_offset())
    return bases


def _detached_aliases(flat: list, eager_flat: list, input_storages: dict) -> dict[int, int]:
    """Output index -> the index of the output owning its memory, for outputs that are no
    views but share an output's memory in eager (`t[1:].detach()` next to `t`): functionalized,
    they are fresh values, and computed alone they would not share it (P37). The owner is a
    fresh output (no view in either run) covering its whole storage, so the alias can be
    rebuilt over it."""
    owners: dict = {}
    for index, (value, eager) in enumerate(zip(flat, eager_flat)):
        if (isinstance(value, torch.Tensor) and value._base is None and eager._base is None
                and _storage_key(value) not in input_storages and eager.storage_offset() == 0
                and eager.is_contiguous() and eager.untyped_storage().nbytes()
                == eager.numel() * eager.element_size()):
            owners.setdefault(_storage_key(eager), index)
    aliased = {}
    for index, (value, eager) in enumerate(zip(flat, eager_flat)):
        if not isinstance(value, torch.Tensor) or value._base is not None or \
                _storage_key(value) in input_storages:
            continue
        owner = owners.get(_storage_key(eager) if eager._base is None else None)
        if owner is not None and owner != index and flat[owner] is not value:
            aliased[index] = owner
    return aliased


def _view_history(view: torch.Tensor) -> ViewHistory:
    """The autograd state of an output view (`ViewHistory`). A view's `requires_grad` alone
    does not tell them apart: a view made with grad mode off of a base that requires grad
    requires grad with no `grad_fn`, and reading `grad_fn` raises once its base was written
    in place after it was made (eager raises only when the program reads it)."""
    if not view.requires_grad:
        return ViewHistory.DETACHED if view._base is None else ViewHistory.NO_GRADIENT
    try:
        node = view.grad_fn
    except RuntimeError:   # "A view was created in no_grad mode and its base ... modified"
        return ViewHistory.STALE
    return ViewHistory.NO_GRAD if node is None else ViewHistory.RECORDED


def _function_output(source: str, index: int, value: torch.Tensor,
                     eager: torch.Tensor) -> FunctionOutput:
    """`value` from the functional run, `eager` the same tensor laid out as eager's."""
    differentiable = bool(value.requires_grad) and is_differentiable_dtype(value.dtype)
    return FunctionOutput(source, index, differentiable, TensorMeta.of(eager), version_of(value))
