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
    guard on the optimizer drops the entry when it dies).

    Rules: `add(rule)`, any `rule(optimizer, memo) -> float`; `add_adam(...)`, the two
    scalars of a non-capturable Adam param (`-lr / (1 - beta1 ** step)` and
    `(1 - beta2 ** step) ** 0.5`), computed in bulk, once per distinct (group, step), from
    the param's step counter (`_counter_start`): one loop over the params instead of two
    rule calls each (GPT-2's 148 params: 297 calls, each with its own memo look-ups)."""

    __slots__ = ("optimizer", "rules", "mark_called", "size", "device", "counted", "generic",
                 "adam")

    def __init__(self, optimizer, size: int, device: torch.device):
        self.optimizer = weakref.ref(optimizer)
        self.rules: list = []   # per position: its rule, or its Adam param (two positions)
        self.generic: list[tuple[int, Callable]] = []
        self.adam: list[tuple] = []
        self.mark_called = False   # set `optimizer._opt_called` (an LR scheduler's flag)
        self.size = size
        self.device = device
        self.counted: list[tuple[int, int]] = []   # (group, index): steps counted on the host

    def add(self, rule: Callable) -> int:
        self.rules.append(rule)
        self.generic.append((len(self.rules) - 1, rule))
        return len(self.rules) - 1

    def add_adam(self, group: int, index: int, steps: int, dtype: torch.dtype,
                 betas: tuple) -> int:
        """Positions p and p + 1 (returned: p): the param's negative step size and square
        root of the second bias correction, at this step's count (its counter as the graph
        finds it, plus `steps`)."""
        position = len(self.rules)
        rule = (position, group, index, steps, dtype, betas[0], betas[1])
        self.rules += [rule, rule]
        self.adam.append(rule)
        return position

    def values(self) -> tuple:
        optimizer = self.optimizer()
        if self.mark_called:
            optimizer._opt_called = True
        memo: dict = {}   # values shared by rules
        values = [0.0] * self.size
        for position, rule in self.generic:
            values[position] = rule(optimizer, memo)
        if self.adam:
            self._adam_values(optimizer, values)
        if self.counted:   # after the rules, which read the counters as eager's step finds them
            _count_steps(optimizer, self.counted)
        if self.device.type == "cpu":
            return (torch.tensor(values, dtype=torch.float64),)
        # pinned and non-blocking: a copy from pageable memory would wait for the device
        vector = torch.tensor(values, dtype=torch.float64, pin_memory=True)
        return (vector.to(self.device, non_blocking=True),)

    def _adam_values(self, optimizer, values: list) -> None:
        """Eager's Python float arithmetic of `_single_tensor_adam` (`_get_value(step_t)`,
        `bias_correction1 = 1 - beta1 ** step`, `step_size = lr / bias_correction1`,
        `bias_correction2_sqrt = bias_correction2 ** 0.5`), once per distinct value."""
        groups, states = optimizer.param_groups, optimizer.state
        computed: dict = {}
        for position, group, index, steps, dtype, beta1, beta2 in self.adam:
            start = self._counter_start(states, groups[group]["params"][index])
            key = (group, start, steps, dtype, beta1, beta2)
            pair = computed.get(key)
            if pair is None:
                step = float_step(start, steps, dtype)
                pair = computed[key] = (-(groups[group]["lr"] / (1 - beta1 ** step)),
                                        (1 - beta2 ** step) ** 0.5)
            values[position], values[position + 1] = pair

    @staticmethod
    def _counter_start(states, param) -> float:
        """The param's step counter as the graph finds it (0 before its maker ran: eager's
        new counter). Read every call: trusting a value kept on the host while the counter's
        version is unchanged cost more than `.item()` (0.4 us) and misses writes through
        `.data`."""
        state = states.get(param)
        counter = state.get("step") if state else None
        return 0.0 if counter is None else counter.item()


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
