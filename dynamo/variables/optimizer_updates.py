"""Stage "trace": the update rules of torch.optim's SGD, Adam and AdamW, as graph nodes.

Input: a `TracedOptimizer` (`dynamo.variables.optimizers`), a group's options (guarded
constants) and its params with gradients (`ParamEntry`: param, grad and state as tensor
variables). Output: nodes that do what eager's step does, op for op and in eager's order, in
place on the params and state.

Each rule transcribes torch.optim's code (torch 2.14; the arithmetic of 2.11 is the same):
`_single_tensor_sgd` / `_multi_tensor_sgd` and `_single_tensor_adam` / `_multi_tensor_adam`.
On these per-param paths the foreach functions run the per-tensor kernels eager's single-tensor
path runs (one difference is observable and kept: foreach SGD with nesterov adds the momentum
into the gradient tensors themselves). Scalars eager passes as Python numbers stay constants
when they are options; those that change between calls (`-lr`, `1 - lr * weight_decay`, Adam's
step size and bias correction) are run-time inputs (0-d float64 elements of one vector per
step), and the op taking them is the one whose
rounding is eager's: `p.add_(g, alpha=s)` is `p.addcmul_(g, s)` (one fused multiply-add) and
`p.addcdiv_(a, d, value=s)` is `p.add_(a * s / d)` on CPU, where the kernel computes
`p + s * a / d`; on CUDA the kernel computes `p + s * (a / d)`, written `p.addcmul_(a / d, s)`.
On CUDA, where the foreach functions have kernels of their own, two of them round otherwise
than the per-tensor ops (`_Ops.divide`, `_Ops.add_square_scaled_`). The CPU forms are tested
bit for bit here; the CUDA forms follow the kernels' source and await a GPU run.
"""
from __future__ import annotations

import functools
from typing import Any

import torch

from dynamo.breaks import UNSUPPORTED_CALL, Unsupported
from dynamo.variables.base import Variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.optimizer_runtime import version_before_first_write
from dynamo.variables.optimizers import ParamEntry


class _Ops:
    """Shorthand for recording tensor operations; plain Python values become constants."""

    def __init__(self, tx):
        self.tx = tx

    @staticmethod
    def _variables(values):
        return tuple(value if isinstance(value, Variable) else ConstantVariable(value)
                     for value in values)

    def method(self, tensor, name: str, *args, **kwargs):
        keywords = dict(zip(kwargs, self._variables(kwargs.values())))
        return self.tx.graph.call("call_method", name, (tensor, *self._variables(args)),
                                  keywords)

    def function(self, target, *args, **kwargs):
        keywords = dict(zip(kwargs, self._variables(kwargs.values())))
        return self.tx.graph.call("call_function", target, self._variables(args), keywords)

    # eager's kernels taking a run-time Python scalar, with the same rounding ----------------
    def near(self, scalar, tensor):
        """A run-time scalar (0-d float64) on the tensor's device."""
        if scalar.example.device == tensor.example.device:
            return scalar
        return self.method(scalar, "to", tensor.example.device)

    def add_scaled_(self, target, tensor, scalar):
        """`target.add_(tensor, alpha=scalar)`: one fused multiply-add, as addcmul's."""
        return self.method(target, "addcmul_", tensor, self.near(scalar, target))

    def divide(self, tensor, scalar, foreach: bool):
        """`tensor / scalar` (a Python float in eager). CUDA's kernel multiplies by the
        scalar's reciprocal (computed in the op's math type) when the divisor is a CPU scalar;
        the CUDA foreach kernel divides."""
        if tensor.example.device.type == "cpu":
            return self.method(tensor, "div", scalar)
        if foreach:
            return self.method(tensor, "div", self.near(scalar, tensor))
        math = torch.float64 if tensor.example.dtype == torch.float64 else torch.float32
        reciprocal = self.method(self.method(scalar, "to", math), "reciprocal")
        return self.method(tensor, "mul", self.near(reciprocal, tensor))

    def add_square_scaled_(self, target, tensor, value: float, foreach: bool):
        """`target.addcmul_(tensor, tensor, value=value)`: the kernel computes
        `target + value * tensor * tensor`; CUDA's foreach kernel `target + value * (tensor *
        tensor)`, written `target.add_(tensor * tensor, alpha=value)`."""
        if foreach and target.example.device.type != "cpu":
            square = self.method(tensor, "mul", tensor)
            return self.method(target, "add_", square, alpha=value)
        return self.method(target, "addcmul_", tensor, tensor, value=value)

    def add_quotient_scaled_(self, target, numerator, denominator, scalar):
        """`target.addcdiv_(numerator, denominator, value=scalar)`."""
        if target.example.device.type == "cpu":   # p + (s * a) / d
            quotient = self.method(self.method(numerator, "mul", scalar), "div", denominator)
            return self.method(target, "add_", quotient)
        quotient = self.method(numerator, "div", denominator)   # p + s * (a / d)
        return self.method(target, "addcmul_", quotient, self.near(scalar, target))


def _resolve_foreach(options: dict, entries: list[ParamEntry]) -> bool:
    """`foreach=None` resolves as torch.optim resolves it (by the params' devices and types,
    which their tensor guards cover)."""
    foreach = options.get("foreach")
    if foreach is None and not options.get("fused"):
        from torch.optim.optimizer import _default_to_fused_or_foreach
        _, foreach = _default_to_fused_or_foreach([entry.real for entry in entries], False,
                                                  use_fused=False)
    return bool(foreach)


# -- SGD ---------------------------------------------------------------------------------------


def _negative_lr(group: int, optimizer, memo: dict) -> float:
    return -optimizer.param_groups[group]["lr"]


class SgdUpdate:
    """`_single_tensor_sgd` / `_multi_tensor_sgd` (torch/optim/sgd.py)."""

    @staticmethod
    def state_names(options: dict) -> tuple:
        return ("momentum_buffer",) if options["momentum"] != 0 else ()

    @staticmethod
    def scalar_count(traced, options: dict, entries: list) -> int:
        return 1 if entries else 0

    @staticmethod
    def new_state(options: dict, param: torch.Tensor) -> dict:
        """Storage for eager's first `buf = torch.clone(grad).detach()` (the graph copies it),
        one version behind: the graph's `copy_` moves the counter to eager's 0."""
        buffer = torch.empty_like(param.grad, memory_format=torch.preserve_format)
        return {"momentum_buffer": version_before_first_write(buffer)}

    def __call__(self, traced, group: int, options: dict, entries: list[ParamEntry]) -> None:
        ops = _Ops(traced.tx)
        foreach = _resolve_foreach(options, entries)
        momentum, dampening = options["momentum"], options["dampening"]
        weight_decay, nesterov = options["weight_decay"], options["nesterov"]
        negative_lr = traced.scalar(functools.partial(_negative_lr, group))
        for entry in entries:
            grad = entry.grad if not options["maximize"] else ops.function(torch.neg, entry.grad)
            if weight_decay != 0:
                grad = ops.method(grad, "add", entry.param, alpha=weight_decay)
            if momentum != 0:
                buffer = entry.state["momentum_buffer"]
                if entry.new:
                    ops.method(buffer, "copy_", grad)
                else:
                    ops.method(ops.method(buffer, "mul_", momentum), "add_", grad,
                               alpha=1 - dampening)
                if nesterov:  # foreach: `_foreach_add_(device_grads, bufs, ...)`, in place
                    grad = ops.method(grad, "add_" if foreach else "add", buffer,
                                      alpha=momentum)
                else:
                    grad = buffer
            ops.add_scaled_(entry.param, grad, negative_lr)


# -- Adam, AdamW -------------------------------------------------------------------------------


def _decay_factor(group: int, weight_decay: float, optimizer, memo: dict) -> float:
    return 1 - optimizer.param_groups[group]["lr"] * weight_decay


def _lr(group: int, optimizer, memo: dict) -> float:
    return optimizer.param_groups[group]["lr"]


class AdamUpdate:
    """`_single_tensor_adam` / `_multi_tensor_adam` (torch/optim/adam.py; AdamW is Adam with
    `decoupled_weight_decay=True`)."""

    @staticmethod
    def state_names(options: dict) -> tuple:
        return ("step", "exp_avg", "exp_avg_sq") + \
            (("max_exp_avg_sq",) if options["amsgrad"] else ())

    @staticmethod
    def scalar_count(traced, options: dict, entries: list) -> int:
        if not entries:
            return 0
        count = 1 if options["weight_decay"] != 0 and _decoupled(traced, options) else 0
        if options.get("capturable"):
            return count + 1
        return count + 2 * len(entries)

    @staticmethod
    def new_state(options: dict, param: torch.Tensor) -> dict:
        """Adam's `_init_group` for a param without state."""
        from torch.optim.optimizer import _get_scalar_dtype
        if options.get("capturable") or options.get("fused"):
            step = torch.zeros((), dtype=_get_scalar_dtype(is_fused=options.get("fused")),
                               device=param.device)
        else:
            step = torch.tensor(0.0, dtype=_get_scalar_dtype(), device="cpu")
        state = {"step": step}
        for name in ("exp_avg", "exp_avg_sq") + \
                (("max_exp_avg_sq",) if options["amsgrad"] else ()):
            state[name] = torch.zeros_like(param, memory_format=torch.preserve_format)
        return state

    def __call__(self, traced, group: int, options: dict, entries: list[ParamEntry]) -> None:
        ops = _Ops(traced.tx)
        beta1, beta2 = options["betas"]
        if not all(type(beta) in (float, int) for beta in (beta1, beta2)):
            raise Unsupported(UNSUPPORTED_CALL, "Adam with tensor betas")
        capturable = options.get("capturable", False)
        if capturable and any(entry.real.device.type != "cpu" for entry in entries):
            raise Unsupported(UNSUPPORTED_CALL, "Adam(capturable=True) on CUDA params: its "
                              "compiled form differs from eager's kernels in the last bits "
                              "(an H200 run); the step runs eagerly")
        decoupled = _decoupled(traced, options)
        foreach = _resolve_foreach(options, entries)
        for entry in entries:
            _check_capturable(entry, capturable)
        decay = None
        if options["weight_decay"] != 0 and decoupled:
            decay = traced.scalar(functools.partial(_decay_factor, group,
                                                    options["weight_decay"]))
        lr = traced.scalar(functools.partial(_lr, group)) if capturable else None
        for entry in entries:
            if not capturable and step_counted_on_host(entry):
                traced.count_step_on_host(entry)
            else:
                ops.method(entry.state["step"], "add_", 1)
            _adam_moments(ops, entry, options, decay, decoupled, foreach)
            if capturable and foreach:
                _capturable_foreach_update(ops, entry, options, lr)
            elif capturable:
                _capturable_update(ops, entry, options, lr)
            else:
                _update(ops, traced, group, entry, options, foreach)


def _decoupled(traced, options: dict) -> bool:
    """AdamW's weight decay (torch 2.14 keeps it as the group's `decoupled_weight_decay`;
    older AdamW classes have their own step and no such key)."""
    return options.get("decoupled_weight_decay", type(traced.optimizer).__name__ == "AdamW")


def step_counted_on_host(entry: ParamEntry) -> bool:
    """Whether a non-capturable Adam's `step_t += 1` is done on the host before the graph
    runs (`TracedOptimizer.count_step_on_host`) rather than by the graph: its counter is a
    CPU tensor beside params on another device (a CUDA graph takes no CPU tensor; eager's
    step increments it on the CPU too). Tests on CPU-only machines replace this predicate
    to run that path."""
    return entry.state["step"].example.device.type == "cpu" and \
        entry.real.device.type != "cpu"


def _check_capturable(entry: ParamEntry, capturable: bool) -> None:
    """Eager asserts capturable params and steps live on a supported device (CUDA...)."""
    if not capturable:
        return
    from torch.optim.optimizer import _get_capturable_supported_devices
    step = entry.state["step"].example
    if not (entry.real.device.type == step.device.type and
            entry.real.device.type in _get_capturable_supported_devices()):
        raise Unsupported(UNSUPPORTED_CALL, "Adam(capturable=True) with params or steps on "
                          "a device eager refuses (it raises there)")


def _adam_moments(ops: _Ops, entry: ParamEntry, options: dict, decay, decoupled: bool,
                  foreach: bool) -> None:
    """Weight decay, then the first and second moments (after `step_t += 1`)."""
    beta1, beta2 = options["betas"]
    grad = entry.grad if not options["maximize"] else ops.function(torch.neg, entry.grad)
    if options["weight_decay"] != 0:
        if decoupled:
            ops.method(entry.param, "mul_", decay)
        else:
            grad = ops.method(grad, "add", entry.param, alpha=options["weight_decay"])
    ops.method(entry.state["exp_avg"], "lerp_", grad, 1 - beta1)
    squares = ops.method(entry.state["exp_avg_sq"], "mul_", beta2)
    ops.add_square_scaled_(squares, grad, 1 - beta2, foreach)


def _second_moment(ops: _Ops, entry: ParamEntry, options: dict):
    """The tensor whose square root is the denominator (amsgrad: the running maximum)."""
    if not options["amsgrad"]:
        return entry.state["exp_avg_sq"]
    maximum = entry.state["max_exp_avg_sq"]
    ops.method(maximum, "copy_", ops.function(torch.maximum, maximum,
                                              entry.state["exp_avg_sq"]))
    return maximum


def _update(ops: _Ops, traced, group: int, entry: ParamEntry, options: dict,
            foreach: bool) -> None:
    """Not capturable: eager's float64 Python scalars, per param (its own step count)."""
    beta1, beta2 = options["betas"]
    dtype = entry.state["step"].example.dtype
    # a counter counted on the host holds this graph's earlier steps when the rule reads it
    steps = 1 if step_counted_on_host(entry) else entry.steps_before + 1
    negative_step_size, correction2_sqrt = traced.adam_scalars(entry, steps, dtype,
                                                               (beta1, beta2))
    root = ops.method(_second_moment(ops, entry, options), "sqrt")
    quotient = ops.divide(root, correction2_sqrt, foreach)
    denominator = ops.method(quotient, "add_", options["eps"])
    ops.add_quotient_scaled_(entry.param, entry.state["exp_avg"], denominator,
                             negative_step_size)


def _capturable_update(ops: _Ops, entry: ParamEntry, options: dict, lr) -> None:
    """`_single_tensor_adam` with capturable=True: the corrections are tensor operations on
    the step tensor (`beta ** step` is `torch.pow(beta, step)`, `1 - x` is `rsub`, `lr / x`
    is `reciprocal(x) * lr`)."""
    beta1, beta2 = options["betas"]
    step = entry.state["step"]
    correction1 = ops.function(torch.rsub, ops.function(torch.pow, beta1, step), 1)
    correction2 = ops.function(torch.rsub, ops.function(torch.pow, beta2, step), 1)
    step_lr = ops.method(lr, "to", step.example.dtype)
    step_size = ops.function(torch.mul, ops.function(torch.reciprocal, correction1), step_lr)
    negative = ops.method(step_size, "neg")
    correction2_sqrt = ops.method(correction2, "sqrt")
    root = ops.method(_second_moment(ops, entry, options), "sqrt")
    scale = ops.function(torch.mul, correction2_sqrt, negative)
    offset = ops.function(torch.mul, ops.function(torch.reciprocal, negative), options["eps"])
    denominator = ops.method(ops.method(root, "div", scale), "add_", offset)
    ops.method(entry.param, "addcdiv_", entry.state["exp_avg"], denominator)


def _capturable_foreach_update(ops: _Ops, entry: ParamEntry, options: dict, lr) -> None:
    """`_multi_tensor_adam` with capturable=True, for one param of the lists."""
    beta1, beta2 = options["betas"]
    step = entry.state["step"]
    correction1 = ops.function(torch.pow, beta1, step)
    correction2 = ops.function(torch.pow, beta2, step)
    ops.method(correction1, "sub_", 1)
    ops.method(correction2, "sub_", 1)
    ops.method(correction2, "neg_")
    ops.method(correction1, "div_", ops.method(lr, "to", step.example.dtype))
    ops.method(correction1, "reciprocal_")
    ops.method(correction2, "sqrt_")
    root = ops.method(_second_moment(ops, entry, options), "sqrt")
    ops.method(root, "div_", correction2)
    ops.method(root, "add_", options["eps"])
    ops.method(root, "div_", correction1)
    ops.method(entry.param, "addcdiv_", entry.state["exp_avg"], root)


UPDATES: dict[str, Any] = {"SGD": SgdUpdate(), "Adam": AdamUpdate(), "AdamW": AdamUpdate()}
