"""Stage "trace", run-time side of a captured optimizer step: what the compiled code calls.

Input: the optimizer (held weakly) and what the trace recorded (`dynamo.variables.optimizers`):
how to make a param's first state, the rules of this step's scalars, the step counters
counted on the host. Output, when the compiled code runs: the state tensors (`StateMaker`,
while the graph's inputs are fetched), the float64 vector of the step's scalars
(`StepScalars.values()`, before the graph runs), and the deferred calls run after it
(`clear_grads`).
"""
from __future__ import annotations

import functools
import struct
import weakref
from typing import Callable

import torch


class StateMaker:
    """Makes a param's optimizer state as eager's step does on its first step (zeros, a
    step counter), installs it in `optimizer.state[param]` and hands out its tensors: called
    by the compiled code while it fetches the graph's inputs (`NewStateSource`), before the
    graph runs, which then updates them in place. Held by the compiled code (no
    `__weakref__`); holds the optimizer weakly."""

    __slots__ = ("optimizer", "make")

    def __init__(self, optimizer, make: Callable):
        self.optimizer = weakref.ref(optimizer)
        self.make = make      # param -> {name: tensor}, in eager's order

    def tensor(self, group: int, index: int, name: str) -> torch.Tensor:
        optimizer = self.optimizer()
        param = optimizer.param_groups[group]["params"][index]
        state = optimizer.state[param]   # eager's `self.state[p]`: a defaultdict entry
        if name not in state:
            for key, value in self.make(param).items():
                state.setdefault(key, value)
        return state[name]


class StepScalars:
    """The run-time scalars of one captured step: `values()` is called by the compiled code
    before the graph runs and returns a float64 vector, one value per rule (one tensor: made
    one by one, 0-d tensors cost 16 us each on the project's VM, a vector 0.6 us a value).
    No `__weakref__`: the compiled code holds it; it holds the optimizer weakly (the identity
    guard on the optimizer drops the entry when it dies)."""

    __slots__ = ("optimizer", "rules", "mark_called", "size", "device", "counted")

    def __init__(self, optimizer, size: int, device: torch.device):
        self.optimizer = weakref.ref(optimizer)
        self.rules: list[Callable] = []
        self.mark_called = False   # set `optimizer._opt_called` (an LR scheduler's flag)
        self.size = size
        self.device = device
        self.counted: list[tuple[int, int]] = []   # (group, index): steps counted on the host

    def add(self, rule: Callable) -> int:
        self.rules.append(rule)
        return len(self.rules) - 1

    def values(self) -> tuple:
        optimizer = self.optimizer()
        if self.mark_called:
            optimizer._opt_called = True
        memo: dict = {}   # values shared by rules (a param's step count)
        values = [rule(optimizer, memo) for rule in self.rules]
        if self.counted:   # after the rules, which read the counters as eager's step finds them
            _count_steps(optimizer, self.counted)
        if self.device.type == "cpu":
            return (torch.tensor(values, dtype=torch.float64),)
        # pinned and non-blocking: a copy from pageable memory would wait for the device
        vector = torch.tensor(values, dtype=torch.float64, pin_memory=True)
        return (vector.to(self.device, non_blocking=True),)


def _count_steps(optimizer, counted: list) -> None:
    """`step_t += 1` on each listed param's step counter, as eager's non-capturable Adam
    does (`_foreach_add_` of the counters, or `step_t += 1` one by one: the same values)."""
    groups = optimizer.param_groups
    steps = [optimizer.state[groups[group]["params"][index]]["step"] for group, index in counted]
    torch._foreach_add_(steps, 1)


def version_before_first_write(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` with its version counter one step before 0, so that the graph's write making
    it eager's new state (a momentum buffer eager makes by `clone`, version 0) leaves it at
    eager's 0. Autograd's version counter is an unsigned 32-bit count that wraps around (an
    in-place op, or the compiled graph's `_version + 1`, gives 0; `_wrapping_counter`)."""
    if _wrapping_counter():
        torch._C._autograd._unsafe_set_version_counter((tensor,), (_COUNTER_WRAP - 1,))
    return tensor


_COUNTER_WRAP = 2 ** 32


@functools.lru_cache(maxsize=1)
def _wrapping_counter() -> bool:
    """Whether this torch's version counters wrap at 2**32 (else new buffers stay at 0, and
    the first write leaves them one ahead of eager)."""
    probe = torch.zeros(1)
    torch._C._autograd._unsafe_set_version_counter((probe,), (_COUNTER_WRAP - 1,))
    if probe._version != _COUNTER_WRAP - 1:
        return False
    probe.add_(1)
    after_op = probe._version
    torch._C._autograd._unsafe_set_version_counter((probe,), (_COUNTER_WRAP,))
    return after_op == 0 and probe._version == 0


def no_scalar(optimizer, memo: dict) -> float:
    return 0.0


def float_step(value: float, steps: int, dtype: torch.dtype) -> float:
    """`step_t += 1` `steps` times on a tensor of `dtype` (float32 or float64) holding
    `value`, read as eager's `_get_value` reads it (`.item()`)."""
    single = dtype is torch.float32
    for _ in range(steps):
        value = value + 1.0
        if single:
            value = _FLOAT32.unpack(_FLOAT32.pack(value))[0]
    return value


_FLOAT32 = struct.Struct("f")


# -- deferred calls (run after the graph, with frame capture off) ---------------------------------


def clear_grads(optimizer) -> None:
    """`zero_grad(set_to_none=True)`'s effect on the params (eager sets `p.grad = None`)."""
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                param.grad = None
