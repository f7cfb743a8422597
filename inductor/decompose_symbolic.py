"""Stage "decompose" for graphs with symbolic sizes: one ATen trace for every size.

Input: a torch-level FX graph whose placeholders carry fake tensors with `torch.SymInt` sizes
from one `ShapeEnv` (issue 23's frontend/backend contract), and the call's example inputs.
Output: an `AtenGraph` (as `decompose.trace_aten` makes) traced in the graph's own fake
mode, so that sizes stay the ShapeEnv's symbols through the decomposition and every node's
`meta["val"]` is symbolic; its output strides are eager's, as SymInts.

Outputs that alias inputs or each other are found as for static graphs
(`aliasing.observable_outputs`), their sizes, strides and offsets SymInts the runtime wrapper
evaluates per call. Writes into inputs (`x.add_(1)`, `cache[:, pos] = k`, BatchNorm's running
statistics) are functionalized as `decompose.trace_aten` does, in the graph's fake mode: the
functional graph ends with `aten.copy_` into each written input, which the lowering turns
into a loop over the input's memory (lower/graph.py `_mutate_input`); how far eager's
in-place ops move each input's version counter is measured on the symbolic fakes
(`AtenGraph.version_steps`). Inputs written while sharing memory with another input are
refused here (`SharedInputWrites`: the caller runs the graph as is for calls sharing
storages, as the static path does); the caller compiles for the example's storage pattern
(`StoragePattern`). What a symbolic trace does not cover raises
`NotSymbolic` (the graph is then compiled per size, counted): module state other than
static tensors, and anything that specialises a symbol while tracing (a guard the front end
never saw). SymInt placeholders (an int carried across a graph break) trace as SymInts;
tensor constants the trace makes become leading placeholders, as in the static path.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.fx
from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                           DynamicOutputShapeException)
from torch.fx.experimental.proxy_tensor import make_fx
import torch.utils._pytree as pytree

from inductor.aliasing import (SharedInputWrites, UnsupportedGraph, observable_outputs,
                               writes_into_shared_inputs)
from inductor.autograd.symbols import SymbolicInputs
from inductor.eager_run import version_of
from inductor.decompose import (AtenGraph, _detached, _flattened, _module_state, _mutates,
                                _scalars_on_graph_device,
                                _output_versions, _refuse_inexpressible_writes,
                                _ZeroDimMaskAssignment, _table, check_state_calls,
                                lift_constants)
from inductor.fresh_writes import make_fresh_writes_functional
from inductor.python_dispatcher import aten_python_dispatcher
from inductor.size_variants import NotSymbolic, int_sizes_not_symbolic
from inductor.view_rewrites import rewrite_views

aten = torch.ops.aten


def trace_aten_symbolic(gm: torch.fx.GraphModule, example_inputs: Sequence) -> AtenGraph:
    """Decompose and check `gm` in its own fake mode (see the module docstring)."""
    symbolic = SymbolicInputs.of(gm)
    if symbolic is None:
        raise NotSymbolic("no placeholder has a symbolic size")
    grad_mode_after = check_state_calls(gm)
    state, stateless = _module_state(gm)
    fakes = symbolic.fakes(list(example_inputs))
    if any(not isinstance(value, (torch.Tensor, torch.SymInt)) for value in fakes):
        raise NotSymbolic("a non-tensor graph input")
    environment = symbolic.shape_env
    guards_before = len(environment.guards)
    with symbolic.tracing() as mode:
        state_fakes = [mode.from_tensor(value.detach(), static_shapes=True) for value in state]
    flat_function, spec_box = _flattened(stateless)
    decomposed, eager_outputs, versions_moved = _traced(symbolic, flat_function, stateless,
                                                        [*state_fakes, *fakes])
    _refuse_new_guards(environment, guards_before, "tracing the decomposition")
    if any(node.target is aten._local_scalar_dense.default for node in decomposed.graph.nodes):
        raise NotSymbolic("the graph reads a tensor's value as a Python number")
    # tensors the trace made from Python values (`torch.tensor(1.5)`, a mask's fill value):
    # leading placeholders, passed with every call, as the static path's
    constants, lifted = lift_constants(decomposed)
    make_fresh_writes_functional(lifted)    # often all the writes: no second trace
    _fake_constants(lifted, constants, symbolic)
    aliases, strides, hidden = observable_outputs(
        lifted, eager_outputs, [None] * len(constants) + [*state_fakes, *fakes])
    _refuse_new_guards(environment, guards_before,
                       "finding which outputs alias inputs or each other")
    steps = {}
    if _mutates(lifted):
        inputs = constants + list(state) + list(example_inputs)
        with int_sizes_not_symbolic():
            lifted, extra = _functionalized(lifted, inputs, aliases, symbolic)
        _refuse_new_guards(environment, guards_before, "functionalizing the graph's writes")
        constants = extra + constants
        steps = {position + len(constants): step
                 for position, step in versions_moved.items()}
    lifted.graph.eliminate_dead_code()
    lifted.recompile()
    placeholder_fakes = [node.meta.get("val") for node in lifted.graph.nodes
                         if node.op == "placeholder"]
    lifted, constants, placeholder_fakes = _scalars_on_graph_device(
        lifted, constants, placeholder_fakes, example_inputs, symbolic.tracing)
    _refuse_new_guards(environment, guards_before,
                       "moving the graph's scalar constants to its device")
    return AtenGraph(lifted, constants + list(state), placeholder_fakes, spec_box[0], aliases,
                     strides, grad_mode_after, hidden, steps,
                     _output_versions(eager_outputs, aliases))


def _refuse_new_guards(environment, before: int, what: str) -> None:
    """`NotSymbolic` where `what` added a guard to the ShapeEnv since it held `before`: it
    assumed more about the sizes than the front end guards (the first new guard and the torch
    code that made it, as the reason: `Eq(2, s0)` from a decomposition's branch)."""
    if len(environment.guards) == before:
        return
    guard = environment.guards[before]
    where = getattr(getattr(guard, "sloc", None), "framework_loc", None)
    where = f" at {where.filename.split('site-packages/')[-1]}:{where.lineno} {where.name}" \
        if hasattr(where, "filename") else ""
    raise NotSymbolic(f"{what} assumed more about the sizes than the front end guards "
                      f"({guard.expr}{where})")


def _fake_constants(lifted: torch.fx.GraphModule, constants: list,
                    symbolic: SymbolicInputs) -> None:
    """Give the leading placeholders `lift_constants` made for `constants` the graph's fake
    mode's fakes of them as example values (what every other placeholder carries)."""
    placeholders = [node for node in lifted.graph.nodes if node.op == "placeholder"]
    with symbolic.tracing() as mode:
        for node, value in zip(placeholders, constants):
            node.meta["val"] = mode.from_tensor(value, static_shapes=True)


def _traced(symbolic: SymbolicInputs, flat_function, stateless, fakes: list) -> tuple:
    """(the decomposed ATen graph of `flat_function` traced on `fakes` in the graph's fake
    mode, the outputs of the torch-level `stateless` run on them, position -> how far that
    run moved each input's version counter: eager's in-place ops)."""
    grad_before = torch.is_grad_enabled()
    try:
        # torch's Python dispatcher, as the front end's fake runs: C++ composite kernels
        # (constant_pad_nd under F.pad or CUDA attention's mask padding) want concrete ints;
        # with ATen's aliasing for matmul (inductor/python_dispatcher.py)
        with symbolic.tracing(), aten_python_dispatcher(aten_composites=True), \
                _ZeroDimMaskAssignment():
            decomposed = make_fx(flat_function, decomposition_table=_table(),
                                 tracing_mode="real")(*fakes)
            versions = [version_of(value) for value in fakes]
            eager_outputs = pytree.tree_leaves(stateless(*fakes))
    except (DataDependentOutputException, DynamicOutputShapeException) as error:
        raise UnsupportedGraph(f"the graph's shapes or values depend on tensor values "
                               f"({type(error).__name__})") from error
    finally:
        torch._C._set_grad_enabled(grad_before)
    moved = {position: version_of(value) - version
             for position, (value, version) in enumerate(zip(fakes, versions))}
    return decomposed, eager_outputs, moved


def _functionalized(lifted: torch.fx.GraphModule, inputs: list, aliases: list,
                    symbolic: SymbolicInputs) -> tuple:
    """(`lifted`, a graph writing into its placeholders, made functional in the graph's fake
    mode with a trailing `aten.copy_` into each written input; tensor constants the
    functionalization made, to pass before the placeholders), as `decompose.trace_aten` does
    for static graphs. `inputs`: a value per placeholder (module state, then the call's
    inputs) telling which share memory. Writes the functional form cannot express raise
    `UnsupportedGraph`; writes into inputs sharing memory with another `SharedInputWrites` (the
    caller runs the graph as is for that sharing of storages, every size)."""
    _refuse_inexpressible_writes(lifted)
    if writes_into_shared_inputs(lifted, inputs):
        raise SharedInputWrites("the graph writes into inputs that share memory with other "
                                "inputs (views of one tensor passed separately)")
    rewrite_views(lifted, frozenset(position for position, alias in enumerate(aliases)
                                    if alias is not None))
    fakes = [_detached(node.meta.get("val")) for node in lifted.graph.nodes
             if node.op == "placeholder"]
    grad_before = torch.is_grad_enabled()
    try:
        with symbolic.tracing(), aten_python_dispatcher():
            functional = make_fx(torch.func.functionalize(lifted, remove="mutations_and_views"),
                                 tracing_mode="real")(*fakes)
    finally:
        torch._C._set_grad_enabled(grad_before)
    constants, functional = lift_constants(functional)
    for alias in aliases if constants else ():
        if alias is not None and alias.base_kind == "input":
            alias.base_index += len(constants)
    return functional, constants
