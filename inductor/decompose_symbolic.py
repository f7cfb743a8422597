"""Stage "decompose" for graphs with symbolic sizes: one ATen trace for every size.

Input: a torch-level FX graph whose placeholders carry fake tensors with `torch.SymInt` sizes
from one `ShapeEnv` (issue 23's frontend/backend contract), and the call's example inputs.
Output: an `AtenGraph` (as `decompose.trace_aten` makes) traced in the graph's own fake
mode, so that sizes stay the ShapeEnv's symbols through the decomposition and every node's
`meta["val"]` is symbolic; its output strides are eager's, as SymInts.

Outputs that alias inputs or each other are found as for static graphs
(`aliasing.observable_outputs`), their sizes, strides and offsets SymInts the runtime wrapper
evaluates per call. What a symbolic trace does not cover raises `NotSymbolic` (the graph is
then compiled per size, counted): graphs writing into their inputs, SymInt graph inputs,
module state other than static tensors, and anything that specialises a symbol while tracing
(a guard the front end never saw).
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.fx
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                           DynamicOutputShapeException)
from torch.fx.experimental.proxy_tensor import make_fx
import torch.utils._pytree as pytree

from inductor.aliasing import UnsupportedGraph, observable_outputs
from inductor.autograd.symbols import SymbolicInputs
from inductor.decompose import (AtenGraph, _flattened, _module_state, _mutates,
                                _ZeroDimMaskAssignment, _table, check_state_calls,
                                lift_constants)
from inductor.size_variants import NotSymbolic

aten = torch.ops.aten


def trace_aten_symbolic(gm: torch.fx.GraphModule, example_inputs: Sequence) -> AtenGraph:
    """Decompose and check `gm` in its own fake mode (see the module docstring)."""
    symbolic = SymbolicInputs.of(gm)
    if symbolic is None:
        raise NotSymbolic("no placeholder has a symbolic size")
    if symbolic.symbolic_positions():
        raise NotSymbolic("SymInt graph inputs")
    grad_mode_after = check_state_calls(gm)
    state, stateless = _module_state(gm)
    fakes = symbolic.fakes(list(example_inputs))
    if any(not isinstance(value, torch.Tensor) for value in fakes):
        raise NotSymbolic("a non-tensor graph input")
    environment = symbolic.shape_env
    guards_before = len(environment.guards)
    with symbolic.tracing() as mode:
        state_fakes = [mode.from_tensor(value.detach(), static_shapes=True) for value in state]
    flat_function, spec_box = _flattened(stateless)
    grad_before = torch.is_grad_enabled()
    try:
        # torch's Python dispatcher, as the front end's fake runs: C++ composite kernels
        # (constant_pad_nd under F.pad or CUDA attention's mask padding) want concrete ints
        with symbolic.tracing(), enable_python_dispatcher(), _ZeroDimMaskAssignment():
            decomposed = make_fx(flat_function, decomposition_table=_table(),
                                 tracing_mode="real")(*state_fakes, *fakes)
            eager_outputs = pytree.tree_leaves(stateless(*state_fakes, *fakes))
    except (DataDependentOutputException, DynamicOutputShapeException) as error:
        raise UnsupportedGraph(f"the graph's shapes or values depend on tensor values "
                               f"({type(error).__name__})") from error
    finally:
        torch._C._set_grad_enabled(grad_before)
    if len(environment.guards) != guards_before:
        raise NotSymbolic("tracing the decomposition assumed more about the sizes than the "
                          f"front end guards ({environment.guards[-1].expr})")
    if any(node.target is aten._local_scalar_dense.default for node in decomposed.graph.nodes):
        raise NotSymbolic("the graph reads a tensor's value as a Python number")
    constants, lifted = lift_constants(decomposed)
    if constants:
        raise NotSymbolic("tensor constants made while tracing")
    if _mutates(lifted):
        raise NotSymbolic("the graph writes into its inputs")
    aliases, strides, hidden = observable_outputs(lifted, eager_outputs)
    if len(environment.guards) != guards_before:
        raise NotSymbolic("finding which outputs alias inputs or each other assumed more "
                          f"about the sizes than the front end guards "
                          f"({environment.guards[-1].expr})")
    lifted.graph.eliminate_dead_code()
    lifted.recompile()
    placeholder_fakes = [node.meta.get("val") for node in lifted.graph.nodes
                         if node.op == "placeholder"]
    return AtenGraph(lifted, list(state), placeholder_fakes, spec_box[0], aliases, strides,
                     grad_mode_after, hidden, {}, ())
