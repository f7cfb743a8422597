"""Eager's own layouts: the torch-level graph run once by eager's kernels, on CPU.

Input: a callable over the torch-level graph (its flat outputs are what is read), its real
example inputs, and which of them the graph writes (from a run on fake tensors). Output: the
graph's flat outputs and the inputs that run read (copies for the written ones), or None where
no such run is made; the caller then keeps the fake run's.

Why: the outputs' strides, the tensors their views view, and how far in-place ops move version
counters are eager's observable behaviour, and torch's fake tensors predict them with meta
kernels that are not eager's. On CPU they differ for a few dozen ops (swept over torch's
OpInfo samples with transposed inputs): `batch_norm` returns a contiguous tensor for a
transposed input where its meta kernel keeps the input's layout (graph fuzzer seed 1181: a view
of it came back over a base laid out otherwise than eager's), `floor_divide`, `copysign` and
`div(rounding_mode="floor")` by a 0-d tensor keep a transposed input's layout where theirs is
contiguous (seed 6930), broadcasting `logaddexp`, `ldexp`, `heaviside` and `logical_*` order
dimensions otherwise, and `max_pool1d`, `normal`, `native_dropout_backward` too.

The run computes real values once, at compile time, with nothing a user could see: written
inputs are copied first (with every input sharing their memory, keeping which views which), the
random generators' states are restored after it, and it is made only where every op is torch's
own (a custom operator or a user's function could print or write elsewhere), every tensor is on
the CPU (a second run on an accelerator would cost its memory and time) and
`config.eager_layout_run` is on. Its cost is one eager call of the graph: for CPU graphs a small
part of compiling them. An error in it (a kernel eager refuses on these values) leaves the fake
run's layouts.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils import _pytree as pytree

from inductor import config

_OWN_MODULES = ("torch", "operator", "_operator", "math", "builtins")


def replayable(gm: torch.fx.GraphModule) -> bool:
    """Whether every call in `gm` is torch's own (ATen and prims operators, functions of
    torch's modules, tensor methods, torch.nn modules, operator, math and builtins)."""
    for node in gm.graph.nodes:
        device = node.kwargs.get("device") if node.op in ("call_function", "call_method") \
            else None
        if isinstance(device, (str, int, torch.device)) and torch.device(device).type != "cpu":
            return False        # a tensor made on an accelerator: its random state too
        # (a device read from a tensor, `device=x.device`, is a node: an input's, the CPU)
        if node.op == "call_function":
            target = node.target
            if isinstance(target, torch._ops.OpOverload):
                if target.namespace not in ("aten", "prims"):
                    return False
            elif isinstance(target, torch._ops.OpOverloadPacket):
                if target._qualified_op_name.split("::")[0] not in ("aten", "prims"):
                    return False
            elif isinstance(target, torch._ops.HigherOrderOperator):
                return False
            elif (getattr(target, "__module__", None) or "").split(".")[0] \
                    not in _OWN_MODULES:
                return False
        elif node.op == "call_module":
            module = gm.get_submodule(node.target)
            if not type(module).__module__.startswith("torch.nn.") or \
                    isinstance(module, torch.fx.GraphModule):
                return False
    return True


def eager_run(function: Callable, inputs: Sequence[Any], written: set) -> Optional[tuple]:
    """(flat outputs, inputs as run, input position -> how far the run moved its version
    counter) of `function` on `inputs` by eager's kernels, or None (module docstring).
    `written`: positions of the inputs the graph writes into."""
    tensors = [value for value in inputs if isinstance(value, torch.Tensor)]
    if not config.eager_layout_run or any(
            isinstance(value, FakeTensor) or value.device.type != "cpu" or
            value.layout != torch.strided for value in tensors):
        return None
    grad_before = torch.is_grad_enabled()
    try:
        run_inputs = _copies(inputs, written)
        before = [version_of(value) for value in run_inputs]
        with torch.random.fork_rng(devices=[]):
            outputs = pytree.tree_leaves(function(*run_inputs))
    except Exception:   # noqa: BLE001  (eager refuses these values: the fake run's layouts)
        return None
    finally:
        torch._C._set_grad_enabled(grad_before)
    if any(isinstance(value, torch.Tensor) and value.device.type != "cpu"
           for value in outputs):
        return None
    return outputs, run_inputs, {
        position: version_of(value) - first for position, (value, first)
        in enumerate(zip(run_inputs, before)) if isinstance(value, torch.Tensor)}


def version_of(value: Any) -> int:
    """A tensor's version counter; 0 for other values and for inference tensors (made under
    `torch.inference_mode`), which have none."""
    if not isinstance(value, torch.Tensor) or value.is_inference():
        return 0
    return value._version


def _copies(inputs: Sequence[Any], written: set) -> list:
    """`inputs` with every tensor sharing memory with a written one replaced by a copy over
    one copied storage per storage: tensors viewing one base view one copied base (sharing its
    version counter as eager's views do), others are tensors of their own over that memory."""
    storages = {value.untyped_storage()._cdata for position, value in enumerate(inputs)
                if position in written and isinstance(value, torch.Tensor)}
    copied: dict = {}    # storage -> its copy
    made: dict = {}      # id of an input or of its base -> its copy (one object, one copy)

    def copy(value):
        if id(value) not in made:
            key = value.untyped_storage()._cdata
            if key not in copied:
                copied[key] = value.untyped_storage().clone()
            base = value._base
            made[id(value)] = _over(copied[key], value) if base is None else \
                copy(base).as_strided(value.shape, value.stride(), value.storage_offset())
        return made[id(value)]

    return [copy(value) if isinstance(value, torch.Tensor)
            and value.untyped_storage()._cdata in storages else value for value in inputs]


def _over(storage: torch.UntypedStorage, like: torch.Tensor) -> torch.Tensor:
    """A tensor of its own with `like`'s dtype and geometry over `storage`."""
    with torch.no_grad():
        tensor = torch.empty(0, dtype=like.dtype, device=like.device)
        tensor.set_(storage, like.storage_offset(), like.shape, like.stride())
    return tensor.requires_grad_(like.requires_grad) if like.is_leaf else tensor
