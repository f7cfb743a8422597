"""Eager's words for version-counter errors of compiled training graphs (stage "run").

Input: a saved tensor's dtype, device and size, the autograd node that made it, and counters.
Output: the message eager's autograd raises when a saved tensor was changed in place ("one of
the variables needed for gradient computation has been modified by an inplace operation"),
naming nodes as this torch version does; and the metadata notes (`EAGER_NODE`, the names of a
compiled graph's outputs) through which a compiled graph's nodes carry eager's names. Used by
`versions` (the checks) and the runtime that writes inputs back.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Sequence

import torch

_MESSAGE = ("one of the variables needed for gradient computation has been modified by an "
            "inplace operation: [{kind} [{sizes}]]{which} is at version {current}; expected "
            "version {saved} instead. Hint: ")
_HINT = ("enable anomaly detection to find the operation that failed to compute its gradient, "
         "with torch.autograd.set_detect_anomaly(True, check_nan=False).")
_ANOMALY_HINT = ("the backtrace further above shows the operation that failed to compute its "
                 "gradient. The variable in question was changed in there or anywhere later. "
                 "Good luck!")

# metadata keys of autograd nodes: the name eager's own node would have; eager's names of a
# compiled graph's outputs
EAGER_NODE = "framejit_eager_node"
_EAGER_OUTPUTS = "framejit_eager_outputs"


@functools.lru_cache(maxsize=1)
def _messages_name_forward_ops() -> bool:
    """Whether this torch's autograd messages name a node by its forward op ("Sigmoid": torch
    2.13 and 2.14) rather than by the node itself ("SigmoidBackward0": torch 2.11). Asked of
    eager once, outside any tracing, through the message of the same change that runs no
    backward and saves nothing: an in-place write to a view `unbind` returned."""
    with torch.utils._python_dispatch._disable_current_modes(), \
            torch.inference_mode(False), torch.enable_grad():
        view = torch.zeros(2, requires_grad=True).clone().unbind()[0]
        try:
            view.mul_(2)
        except RuntimeError as error:
            return "UnbindBackward0" not in str(error)
    return True


def eager_name(name: str) -> str:
    """A node's name (`Node.name()`) as this torch's messages spell it: on torch 2.13+ without
    a last "Backward" followed only by digits ("Mul" for MulBackward0, "F" for a custom
    Function's FBackward, "torch::autograd::CopySlices" as is); on torch 2.11 as is."""
    if not _messages_name_forward_ops():
        return name
    head, found, tail = name.rpartition("Backward")
    return head if found and re.fullmatch(r"[0-9]*", tail) else name


def node_name(grad_fn: Any) -> str:
    """A backward node's name as eager's version message spells it (`eager_name`); for the
    copy that wrote a compiled graph's update into an input, the name of the node eager's own
    write would have left (`name_node`)."""
    eager = grad_fn.metadata.get(EAGER_NODE) if hasattr(grad_fn, "metadata") else None
    return eager or eager_name(grad_fn.name())


def name_outputs(ctx: Any, plan: Any, positions: Sequence[int]) -> None:
    """Note on a compiled graph's autograd node (`ctx`, the node of the function outputs
    at `positions`) eager's names of its outputs: the check of a later graph saving one of
    them names eager's node ("output 0 of Mm"), not "output 0 of CompiledFunction"
    (program fuzzer inductor seed 17747)."""
    if plan.output_names:
        ctx.metadata[_EAGER_OUTPUTS] = tuple(plan.output_names[p] for p in positions)


def which_output(tensor: torch.Tensor) -> str:
    """The message's part naming the node that made `tensor` (", which is output 0 of Mm,"),
    for a compiled graph's output the name eager's node has; "" for a leaf."""
    grad_fn = tensor.grad_fn
    if grad_fn is None:
        return ""
    if hasattr(grad_fn, "metadata"):   # an output of a compiled graph: eager's name for it
        names = grad_fn.metadata.get(_EAGER_OUTPUTS)
        if names is not None and tensor.output_nr < len(names) and names[tensor.output_nr]:
            return names[tensor.output_nr]
    return f", which is output {tensor.output_nr} of {node_name(grad_fn)},"


def regenerated_view() -> str:
    """The message's part for a view whose base changed after it was made (eager regenerates
    its node as AsStridedBackward0)."""
    return f", which is output 0 of {eager_name('AsStridedBackward0')},"


def is_compiled_node(grad_fn: Any) -> bool:
    return grad_fn is not None and type(grad_fn).__name__ == "CompiledFunctionBackward"


def message(dtype: torch.dtype, device: torch.device, size: Sequence[int], which: str,
            current: int, saved: int) -> str:
    """Eager's message for a saved tensor at version `saved` now at `current`."""
    kind = torch.empty(0, dtype=dtype, device=device).type()
    sizes = ", ".join(str(extent) for extent in size)
    hint = _ANOMALY_HINT if torch.is_anomaly_enabled() else _HINT
    return _MESSAGE.format(kind=kind, sizes=sizes, which=which, current=current,
                           saved=saved) + hint
