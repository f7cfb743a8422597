"""Stage "codegen", device placement: every buffer a graph's kernels take lives on the graph's
device.

Input: an ATen graph about to be lowered for one device, then its `GraphPlan` printed for it
(C++ for the CPU; Triton for a GPU or Triton's CPU interpreter) with the buffers each kernel
takes. Output: the graph with its traced constants on that device (`place_traced_constants`),
and a `DeviceMismatch` raised at compile time (`check_kernel_arguments`) instead of a kernel
handed another device's memory, which on an H100 failed at launch with `Pointer argument
(at 0) cannot be accessed from Triton (cpu tensor?)`, and in C++ would read garbage.

How a CPU tensor reaches a GPU graph: `torch.tensor(data, device="cuda")` (transformers'
DynamicCache makes empty ones, Mistral's sliding window a 0-d one) traces through make_fx as
a CPU constant `_tensor_constant<n>` and a `_to_copy` to the GPU; graphs that `compile_aten`
receives hold such constants as `get_attr` tensors, read in place (a `ConstantBuffer`), and the
`_to_copy` lowering keeps a value where it is, so a Triton kernel got the CPU pointer. Traced
constants are tensors the program built from Python values, which nothing outside the graph
holds, so a copy on the graph's device made once, at compile time, never goes stale. Other
tensors the graph holds by reference (a module's buffer) may change between calls: on another
device they stay where they are, and a kernel reading them is a `DeviceMismatch`, which the
pipeline reports as a fallback (`inductor.fallbacks()`), never a crash at launch.
"""
from __future__ import annotations

from typing import Iterable

import torch

from inductor.ir.nodes import ConstantBuffer, InputBuffer
from inductor.schedule.plans import GraphPlan

TRACED_CONSTANT = "_tensor_constant"    # make_fx's names for constants created while tracing


class DeviceMismatch(RuntimeError):
    """A kernel of a graph compiled for one device would take a buffer on another (a constant
    held by reference, or a value computed on the other device). This is a gap in inductor's
    lowering or placement, caught at compile time; the graph runs through eager kernels (with
    `config.fallback_on_error`) and is counted in `inductor.fallbacks()`. Work around it by
    creating the tensor on the device the model runs on."""


def same_device(first, second) -> bool:
    """Whether two devices are one (`cuda` means the current CUDA device)."""
    return _normal(first) == _normal(second)


def _normal(device) -> tuple:
    device = torch.device(device)
    if device.type == "cpu":
        return ("cpu", None)
    if device.index is None:
        current = torch.cuda.current_device() if device.type == "cuda" and \
            torch.cuda.is_available() else 0
        return (device.type, current)
    return (device.type, device.index)


def copy_to(value: torch.Tensor, device: torch.device) -> torch.Tensor:
    """The copy of a traced constant on `device` (tests without a GPU replace this with a
    fake tensor's copy)."""
    return value.to(device)


def place_traced_constants(gm: torch.fx.GraphModule, device: torch.device) -> list:
    """Before lowering: put make_fx's traced constants (`get_attr` of `_tensor_constant<n>`)
    that live on another device than `device` on it, where that changes nothing eager would
    show: constants whose every reader copies them to `device` (`torch.tensor(data,
    device="cuda")` traces as a CPU constant and a `_to_copy` to the GPU), and 0-d constants
    read by computations (eager reads a 0-d CPU tensor mixed with CUDA ones as a scalar) that
    are not themselves outputs or written into. Returns the attribute names moved."""
    moved = []
    for node in gm.graph.nodes:
        if node.op != "get_attr" or not node.target.startswith(TRACED_CONSTANT):
            continue
        value = getattr(gm, node.target, None)
        if not isinstance(value, torch.Tensor) or same_device(value.device, device):
            continue
        if not (_all_copied_to(node, device) or
                (value.dim() == 0 and _read_only(node) and _meets_only(node, device))):
            continue
        setattr(gm, node.target, copy_to(value, device))
        if isinstance(node.meta.get("val"), torch.Tensor):
            node.meta["val"] = copy_to(node.meta["val"], device)
        moved.append(node.target)
    return moved


def _all_copied_to(node: torch.fx.Node, device: torch.device) -> bool:
    """Whether every use of `node` is `_to_copy(node, device=device)`, possibly through
    `lift_fresh_copy`."""
    aten = torch.ops.aten
    for user in node.users:
        if user.target is aten.lift_fresh_copy.default:
            if not _all_copied_to(user, device):
                return False
        elif user.target is not aten._to_copy.default or \
                user.kwargs.get("device") is None or \
                not same_device(user.kwargs["device"], device):
            return False
    return bool(node.users)


def _meets_only(node: torch.fx.Node, device: torch.device) -> bool:
    """Whether every reader of `node` computes on `device` (the constant only meets tensors
    there). `torch.tensor(64.).sqrt()` computes on the CPU in eager: moved, the square root
    (and an output or saved tensor made of it) would have lived on the GPU."""
    for user in node.users:
        value = user.meta.get("val")     # none recorded: unknown, placed as before
        if isinstance(value, torch.Tensor) and not same_device(value.device, device):
            return False
    return True


def _read_only(node: torch.fx.Node) -> bool:
    """Whether `node`'s value is only read by computations (no output, no in-place op)."""
    for user in node.users:
        schema = getattr(user.target, "_schema", None)
        if user.op == "output" or (schema is not None and schema.is_mutable):
            return False
    return bool(node.users)


def host_scalar_argument(layout, device: torch.device) -> bool:
    """Whether a kernel of a GPU graph takes a 0-d CPU buffer (an input, or a value eager
    computes on the CPU): the wrapper copies it to the GPU before the launch, as eager reads
    one beside GPU tensors as a scalar."""
    return layout.device.type == "cpu" and torch.device(device).type != "cpu" and \
        len(layout.size) == 0


def check_kernel_arguments(plan: GraphPlan, device: torch.device,
                           kernels: Iterable[tuple], written: frozenset = frozenset()) -> None:
    """Raise `DeviceMismatch` if a kernel takes a buffer on another device than `device`
    (but a 0-d CPU buffer no kernel writes: `host_scalar_argument`). `kernels`: (kernel
    name, buffer names it takes) pairs; `written`: the buffers kernels store into."""
    for kernel, names in kernels:
        for name in names:
            buffer = plan.buffers.get(name)
            layout = getattr(buffer, "layout", None)
            if layout is None or same_device(layout.device, device) or \
                    (host_scalar_argument(layout, device) and name not in written):
                continue
            kind = "constant held by the graph" if isinstance(buffer, ConstantBuffer) else \
                "graph input" if isinstance(buffer, InputBuffer) else "computed buffer"
            origin = f" (from {buffer.origin})" if buffer.origin else ""
            raise DeviceMismatch(
                f"kernel {kernel} of a graph on {device} would take {name}{origin}, a {kind} "
                f"on {layout.device}")
