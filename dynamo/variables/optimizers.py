"""Stage "trace": torch.optim's `step()` (SGD, Adam, AdamW) and `zero_grad()` captured into the
graph instead of traced into.

Input: a call met while tracing of an optimizer's `step` (any function of the chain torch.optim
wraps it in: the profiling wrapper, `_use_grad`, the method itself) or of `Optimizer.zero_grad`,
on an optimizer read from the frame (it has a source). Output: graph nodes that do in place
what eager's step does (the update rules are `dynamo.variables.optimizer_updates`), the guards
that make them sound, and a deferred call that clears the gradients after the graph has run
(`zero_grad()`).

Why not trace torch.optim's own Python: under a tracer `torch.compiler.is_compiling()` is true,
and torch.optim then computes its step-dependent scalars (bias corrections, step sizes) as
tensor operations on `state['step']` instead of eager's float64 Python arithmetic, so results
differ from eager in the last bits (and its `_use_grad` calls `torch._dynamo.graph_break()`).
Here the update is a transcription of eager's `_single_tensor_*` / `_multi_tensor_*` code, op
for op, and its scalars are eager's own Python floats.

The learning rate and the step-dependent scalars are graph inputs, not constants: the elements
of a float64 vector (one per step) that `StepScalars.values()` computes when the compiled code
is called (before the graph runs) from the optimizer's current `param_groups` and `state`, with
eager's float64 arithmetic. No guard reads `lr`: a scheduler changing it recompiles nothing.
Every other option of a group is guarded by value (changing `momentum`, `betas`,
`weight_decay`... recompiles).

Guards: the optimizer's identity (its scalar table reads that object); per group, its keys, its
options, its number of params; every param (a tensor input), its grad (None, or a tensor
input), its state's keys and tensors; no step hooks (with a hook, `step()` breaks the graph and
runs eagerly); no `grad_scale`/`found_inf` attributes.

The first step of a param (eager's lazy init: its state is empty, guarded so) is compiled too:
the compiled code makes the state as eager does (`StateMaker`) while it fetches the graph's
inputs, and the graph updates it in place; later steps read the state through guarded sources.

Refused (the call breaks the graph and runs eagerly): a closure, `fused=True`,
`differentiable=True`, tensor `lr` or betas, complex or sparse gradients, gradients that require
grad, a subclass of these optimizers, an optimizer whose groups or state the compiled region
itself changed, a step with hooks.
"""
from __future__ import annotations

import dataclasses
import functools
import operator
import weakref
from typing import Any, Callable, Optional

import torch

from dynamo.breaks import UNSUPPORTED_CALL, UNSUPPORTED_OBJECT, Unsupported
from dynamo.shapes.policy import mark_static
from dynamo.variables.attributes import preexisting_box
from dynamo.variables.base import NotConstant, Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.contexts import set_grad_enabled
from dynamo.variables.optimizer_runtime import StateMaker, StepScalars, clear_grads, no_scalar
from dynamo.variables.tensor import TensorVariable
from guards import (ConstantGuard, DictKeysGuard, HasAttrGuard, IdentityGuard, LengthGuard,
                    TypeGuard, is_constant)
from guards.sources import (AttrSource, ConstantSource, DictItemSource, ItemSource,
                            MethodCallSource, ObjectSource, Source)

# -- recognising the calls ----------------------------------------------------------------------


def _innermost(function: Any) -> Any:
    """The function at the bottom of a `functools.wraps` chain (torch.optim's profiling
    wrapper -> `_use_grad` -> the class's `step`)."""
    for _ in range(8):
        inner = getattr(function, "__wrapped__", None) if callable(function) else None
        if inner is None:
            break
        function = inner
    return function


def _step_classes() -> tuple:
    return (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)


def _kind_of_call(function: Any) -> Optional[str]:
    inner = _innermost(function)
    if inner is _innermost(torch.optim.Optimizer.zero_grad):
        return "zero_grad"
    if any(inner is _innermost(cls.step) for cls in _step_classes()):
        return "step"
    return None


def optimizer_call(tx, function: Any, args: list, kwargs: dict) -> Optional[Variable]:
    """`opt.step()` / `opt.zero_grad()` captured, or None (the call is traced as usual)."""
    kind = _kind_of_call(function)
    if kind is None:
        return None
    scheduled = kind == "step" and getattr(function, "_wrapped_by_lr_sched", False)
    if scheduled:  # an LR scheduler's `opt.step` replacement: the optimizer is in its closure
        optimizer = _scheduled_optimizer(function)
        if optimizer is None:
            return None
        args = [tx.wrap(optimizer, ObjectSource.of(optimizer)), *args]
    if not args:
        return None
    owner = args[0]
    optimizer = tx.real_value(owner)
    if not isinstance(optimizer, torch.optim.Optimizer):
        return None
    if kind == "step" and (type(optimizer) not in _step_classes() or
                           _innermost(type(optimizer).step) is not _innermost(function)):
        return None
    if kind == "zero_grad" and _innermost(type(optimizer).zero_grad) is not \
            _innermost(torch.optim.Optimizer.zero_grad):
        return None
    if owner.source is None:
        raise Unsupported(UNSUPPORTED_CALL, f"{type(optimizer).__name__}.{kind}() of an "
                          "optimizer made inside the compiled region")
    _refuse_changed(tx, optimizer)
    traced = TracedOptimizer(tx, optimizer, owner)
    if kind == "zero_grad":
        return traced.zero_grad(_argument(tx, args, kwargs, "set_to_none", True))
    if _argument(tx, args, kwargs, "closure", None) is not None:
        raise Unsupported(UNSUPPORTED_CALL, "optimizer.step(closure) (the closure runs the "
                          "model again: call it before step() instead)")
    return traced.step(mark_called=scheduled)


def _scheduled_optimizer(function: Any) -> Optional[torch.optim.Optimizer]:
    """The optimizer whose `step` an LR scheduler wrapped (`patch_track_step_called`: the
    wrapper holds it by weak reference, sets `opt._opt_called = True`, calls the step)."""
    for cell in getattr(function, "__closure__", None) or ():
        try:
            contents = cell.cell_contents
        except ValueError:
            continue
        if isinstance(contents, weakref.ref) and \
                isinstance(contents(), torch.optim.Optimizer):
            return contents()
    return None


def _argument(tx, args: list, kwargs: dict, name: str, default: Any) -> Any:
    if len(args) > 2 or set(kwargs) - {name}:
        raise Unsupported(UNSUPPORTED_CALL, "optimizer call with unexpected arguments")
    value = args[1] if len(args) == 2 else kwargs.get(name)
    if value is None:
        return default
    try:
        return value.as_constant()
    except NotConstant:
        raise Unsupported(UNSUPPORTED_CALL, f"optimizer argument {name} not known at trace "
                          "time") from None


def _refuse_changed(tx, optimizer) -> None:
    """The update reads the real groups and state: refuse when the region changed them."""
    values = [optimizer, optimizer.param_groups, optimizer.state, *optimizer.param_groups]
    for value in values:
        box = tx.side_effects.box_for(value)
        if box is not None and box.mutated:
            raise Unsupported(UNSUPPORTED_OBJECT, "optimizer.step() after the compiled region "
                              "changed the optimizer's param_groups or state")


# -- what the graph knows of an optimizer ---------------------------------------------------------


# device types whose compiled steps are checked against eager bit for bit
CHECKED_DEVICES = frozenset({"cpu", "cuda"})

@dataclasses.dataclass
class _GraphRecord:
    """Per graph: gradients and state tensors as the graph has them after earlier steps."""

    grads: dict = dataclasses.field(default_factory=dict)      # id(param) -> Variable
    states: dict = dataclasses.field(default_factory=dict)     # id(param) -> {name: Variable}
    steps: dict = dataclasses.field(default_factory=dict)      # id(param) -> steps taken here
    made: set = dataclasses.field(default_factory=set)         # id(param): state made here
    makers: dict = dataclasses.field(default_factory=dict)     # (id(opt), group) -> StateMaker


_RECORDS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _record(tx) -> _GraphRecord:
    record = _RECORDS.get(tx.graph)
    if record is None:
        record = _RECORDS[tx.graph] = _GraphRecord()
    return record


@dataclasses.dataclass
class ParamEntry:
    """One param with a gradient, as the update rules see it."""

    group: int
    index: int
    real: torch.Tensor   # the param itself
    param: TensorVariable
    grad: TensorVariable
    state: dict          # name -> TensorVariable (graph inputs)
    steps_before: int    # steps of this graph before this one (for the step scalars)
    new: bool            # its state was made for this step (eager's lazy init)


class TracedOptimizer:
    """An optimizer read from the frame, while one of its calls is captured."""

    def __init__(self, tx, optimizer: torch.optim.Optimizer, owner: Variable):
        self.tx = tx
        self.optimizer = optimizer
        self.owner = owner
        self.source: Source = owner.source
        self.record = _record(tx)

    # -- zero_grad ---------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool) -> Variable:
        """`set_to_none=True`: the graph forgets the gradients and a call outside the graph
        clears them (before the graph where nothing recorded earlier may raise: `defer`).
        `False`: `grad.zero_()` in the graph for each gradient present."""
        if set_to_none:
            for group in self.optimizer.param_groups:
                for param in group["params"]:
                    self.record.grads[id(param)] = None
            self.tx.side_effects.defer(clear_grads, [self.owner], len(self.tx.graph.graph.nodes),
                                       idempotent=True)
            return ConstantVariable(None)
        self._guard_structure()
        with _grad_disabled(self.tx):
            for group_index, group in enumerate(self.optimizer.param_groups):
                for index in range(len(group["params"])):
                    grad = self.grad(group_index, index)
                    if grad is not None:
                        self.tx.graph.call("call_method", "zero_", (grad,), {})
        return ConstantVariable(None)

    # -- step --------------------------------------------------------------------------------
    def step(self, mark_called: bool = False) -> Variable:
        """`mark_called`: the call is an LR scheduler's wrapper, which sets
        `opt._opt_called = True` before stepping; the compiled code does it before the graph
        runs (`StepScalars.values`)."""
        from dynamo.variables.optimizer_updates import UPDATES
        self._guard_structure()
        self._guard_no_hooks()
        self._refuse_devices_not_checked()
        update = UPDATES[type(self.optimizer).__name__]
        groups = []
        for group_index, group in enumerate(self.optimizer.param_groups):
            options = self._options(group_index, group)
            groups.append((group_index, options,
                           self._entries(group_index, group, update, options)))
        count = sum(update.scalar_count(self, options, entries) for _, options, entries in groups)
        self._table = None
        if count or mark_called:
            self._new_table(count + mark_called, [entry.real for _, _, entries in groups
                                                  for entry in entries])
            if mark_called:
                self.scalar(no_scalar)
                self._table.mark_called = True
        with _grad_disabled(self.tx):
            for group_index, options, entries in groups:
                if entries:
                    update(self, group_index, options, entries)
        assert self._table is None or len(self._table.rules) == self._table.size
        return ConstantVariable(None)

    def _refuse_devices_not_checked(self) -> None:
        """Compiled steps are checked bit for bit against eager on CPU and CUDA parameters
        (tests/training/test_compiled_optimizers.py; the CUDA forms on an H200,
        benchmarks/experiments/diag_optimizer_rounding.py). On other devices the step runs
        eagerly (a graph break)."""
        devices = {param.device.type for group in self.optimizer.param_groups
                   for param in group["params"] if isinstance(param, torch.Tensor)}
        if devices - CHECKED_DEVICES:
            raise Unsupported(UNSUPPORTED_CALL, "optimizer.step() of parameters on "
                              f"{', '.join(sorted(devices - CHECKED_DEVICES))}: compiled "
                              "optimizer steps are matched with eager on the CPU and CUDA "
                              "only; the step runs eagerly")

    def count_step_on_host(self, entry: "ParamEntry") -> None:
        """`state['step'] += 1` for `entry`, done by this step's `StepScalars.values()` on
        the host before the graph runs, instead of by the graph (a CPU counter beside CUDA
        params: a graph for the GPU takes no CPU tensor)."""
        self._table.counted.append((entry.group, entry.index))

    def _guard_structure(self) -> None:
        tx, source = self.tx, self.source
        tx.guards.add(IdentityGuard(source, self.optimizer))
        groups = AttrSource(source, "param_groups")
        tx.guards.add(TypeGuard(groups, list))
        tx.guards.add(LengthGuard(groups, len(self.optimizer.param_groups)))
        for index, group in enumerate(self.optimizer.param_groups):
            if type(group) is not dict or type(group.get("params")) is not list:
                raise Unsupported(UNSUPPORTED_OBJECT, "a param group that is not a dict "
                                  "holding a list of params")
            tx.guards.add(TypeGuard(ItemSource(groups, index), dict))
            tx.guards.add(DictKeysGuard(ItemSource(groups, index), tuple(group)))
            params = DictItemSource(ItemSource(groups, index), "params")
            tx.guards.add(TypeGuard(params, list))
            tx.guards.add(LengthGuard(params, len(group["params"])))

    def _guard_no_hooks(self) -> None:
        from torch.optim import optimizer as optimizer_module
        tx = self.tx
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks"):
            if getattr(self.optimizer, name, None):
                raise Unsupported(UNSUPPORTED_CALL, "optimizer.step() with step hooks "
                                  "registered (register_step_pre_hook/post_hook)")
            tx.guards.add(LengthGuard(AttrSource(self.source, name), 0))
        for name in ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks"):
            hooks = getattr(optimizer_module, name)
            if hooks:
                raise Unsupported(UNSUPPORTED_CALL, "optimizer.step() with global optimizer "
                                  "hooks registered")
            tx.guards.add(LengthGuard(ConstantSource(f"torch.optim {name}", hooks), 0))
        for name in ("grad_scale", "found_inf"):
            if getattr(self.optimizer, name, None) is not None:
                raise Unsupported(UNSUPPORTED_CALL, f"optimizer.step() with {name} set")
            tx.guards.add(HasAttrGuard(self.source, name, hasattr(self.optimizer, name)))

    def group_source(self, group_index: int) -> Source:
        return ItemSource(AttrSource(self.source, "param_groups"), group_index)

    def _options(self, group_index: int, group: dict) -> dict:
        """The group's options, guarded by value, except `lr` (a run-time input, guarded by
        type only) and `initial_lr` (a scheduler's note, unused by the update)."""
        source = self.group_source(group_index)
        options = {}
        for key, value in group.items():
            if key in ("params", "initial_lr"):
                continue
            if key == "lr":
                if type(value) not in (float, int):
                    raise Unsupported(UNSUPPORTED_OBJECT, f"a {type(value).__name__} "
                                      "learning rate (a Python float is a run-time input)")
                self.tx.guards.add(TypeGuard(DictItemSource(source, key), type(value)))
                continue
            if not is_constant(value):
                raise Unsupported(UNSUPPORTED_OBJECT, f"param group option {key!r} holds a "
                                  f"{type(value).__name__}")
            self.tx.guards.add(ConstantGuard(DictItemSource(source, key), value))
            options[key] = value
        for key in ("fused", "differentiable"):
            if options.get(key):
                raise Unsupported(UNSUPPORTED_CALL, f"optimizer.step() with {key}=True")
        return options

    # -- params, grads, state -------------------------------------------------------------------
    def param_source(self, group_index: int, index: int) -> Source:
        return ItemSource(DictItemSource(self.group_source(group_index), "params"), index)

    def param(self, group_index: int, index: int) -> TensorVariable:
        param = self.optimizer.param_groups[group_index]["params"][index]
        if not isinstance(param, torch.Tensor):
            raise Unsupported(UNSUPPORTED_OBJECT, "a param group holding a non-tensor")
        return self.tx.wrap(param, self.param_source(group_index, index))

    def grad(self, group_index: int, index: int) -> Optional[TensorVariable]:
        """The param's gradient as the graph has it (read from the frame the first time)."""
        param = self.optimizer.param_groups[group_index]["params"][index]
        if id(param) in self.record.grads:
            return self.record.grads[id(param)]
        real = param.grad
        if real is not None and (real.is_sparse or real.is_complex() or real.requires_grad):
            raise Unsupported(UNSUPPORTED_OBJECT, "a sparse or complex gradient, or one that "
                              "requires grad, in optimizer.step()")
        value = self.tx.wrap(real, AttrSource(self.param_source(group_index, index), "grad"))
        grad = None if real is None else value
        self.record.grads[id(param)] = grad
        return grad

    def _entries(self, group_index: int, group: dict, update, options: dict
                 ) -> list[ParamEntry]:
        entries = []
        for index, param in enumerate(group["params"]):
            param_variable = self.param(group_index, index)
            grad = self.grad(group_index, index)
            if grad is None:
                continue
            if param.is_complex():
                raise Unsupported(UNSUPPORTED_OBJECT, "complex params in optimizer.step()")
            state = self._state(group_index, index, param, update, options)
            steps_before = self.record.steps.get(id(param), 0)
            entries.append(ParamEntry(group_index, index, param, param_variable, grad, state,
                                      steps_before,
                                      id(param) in self.record.made and steps_before == 0))
            self.record.steps[id(param)] = steps_before + 1
        return entries

    def _state(self, group_index: int, index: int, param, update, options: dict) -> dict:
        """The param's state tensors, graph inputs: read through guarded sources when they
        exist; else (the first step of the param: eager's lazy init) made by `StateMaker`
        when the compiled code fetches its inputs, as eager's step makes them, before the
        update, and the graph updates them in place."""
        known = self.record.states.get(id(param))
        if known is not None:
            return known
        names = update.state_names(options)
        real = self.optimizer.state.get(param) or {}
        source = ParamStateSource(self.source, group_index, index)
        self.tx.guards.add(DictKeysGuard(source, tuple(real)))
        if not names:
            return {}
        if not any(name in real for name in names):
            state = self._new_state(group_index, index, param, update, options)
        elif any(name not in real or not isinstance(real[name], torch.Tensor)
                 for name in names):
            raise Unsupported(UNSUPPORTED_OBJECT, "optimizer state without tensors for all "
                              f"of {', '.join(names)}")
        else:
            state = {name: self.tx.wrap(real[name], DictItemSource(source, name))
                     for name in names}
        self.record.states[id(param)] = state
        return state

    def _new_state(self, group_index: int, index: int, param, update, options: dict) -> dict:
        key = (id(self.optimizer), group_index)
        maker = self.record.makers.get(key)
        if maker is None:
            maker = StateMaker(self.optimizer, functools.partial(update.new_state, options))
            self.record.makers[key] = maker
        base = ObjectSource.of(maker, f"optimizer state maker {id(maker):#x}")
        examples = maker.make(param)   # what the compiled code will make: for the fakes
        self.record.made.add(id(param))
        # the trace no longer knows `optimizer.state`'s entries: later reads break the graph
        box = preexisting_box(self.tx, self.optimizer, self.source)
        box.contents["state"] = StateMadeAtRunTime()
        return {name: self.tx.graph.add_input(example,
                                              NewStateSource(base, group_index, index, name))
                for name, example in examples.items()}

    # -- run-time scalars -------------------------------------------------------------------------
    def _new_table(self, size: int, params: list) -> None:
        """This step's scalars: one graph input, a float64 vector of `size` values made by
        the compiled code (`StepScalars.values`), on the params' device when they share one
        that is not the CPU (a CPU vector beside CUDA inputs would make inductor give the
        graph up), else on the CPU."""
        devices = {param.device for param in params}
        device = devices.pop() if len(devices) == 1 else torch.device("cpu")
        self._table = table = StepScalars(self.optimizer, size, device)
        # (sources compare by name: one name per table)
        holder = ObjectSource.of(table, f"optimizer scalars {id(table):#x}")
        source = ItemSource(MethodCallSource(holder, "values"), 0)
        example = torch.zeros(size, dtype=torch.float64, device=device)
        # its size is the rule count, never the data's: static under every dynamic setting.
        # Symbolic, the guard read it by calling `values()`, which counts host steps: a
        # second count per call (tests/dynamic/test_symbolic_optimizer_host_steps.py)
        mark_static(example, 0)
        self._vector = self.tx.graph.add_input(example, source)

    def scalar(self, rule: Callable) -> TensorVariable:
        """`rule(optimizer, memo)`, a Python float computed as eager computes it when the
        compiled code is called: a 0-d float64 element of this step's scalar vector."""
        return self._element(self._table.add(rule))

    def adam_scalars(self, entry: "ParamEntry", steps: int, dtype: torch.dtype,
                     betas: tuple) -> tuple:
        """A non-capturable Adam param's negative step size and square root of the second
        bias correction (`StepScalars.add_adam`), as two elements of the vector."""
        position = self._table.add_adam(entry.group, entry.index, steps, dtype, betas)
        return self._element(position), self._element(position + 1)

    def _element(self, position: int) -> TensorVariable:
        return self.tx.graph.call("call_function", operator.getitem,
                                  (self._vector, ConstantVariable(position)), {})


class _grad_disabled:
    """Graph nodes switching grad mode off around the update (eager's step runs under
    `torch.no_grad` through `_use_grad`) and back."""

    def __init__(self, tx):
        self.tx = tx

    def __enter__(self):
        self.previous = torch.is_grad_enabled()
        if self.previous:
            set_grad_enabled(self.tx, False)

    def __exit__(self, *exc_info):
        if self.previous and exc_info[0] is None:
            set_grad_enabled(self.tx, True)


@dataclasses.dataclass(frozen=True, slots=True)
class ParamStateSource(Source):
    """The state dict of param `index` of group `group` of an optimizer, or an empty dict:
    `(opt.state.get(opt.param_groups[g]['params'][i]) or {})`. (`opt.state` is keyed by the
    param tensors, which no literal key can name; `.get` creates no entry.)"""

    base: Source
    group: int
    index: int

    def name(self) -> str:
        return f"{self.base.name()}.state[{self.base.name()}.param_groups[{self.group}]" \
               f"['params'][{self.index}]]"

    def apply(self, base_code: str) -> str:
        return f"({base_code}.state.get({base_code}.param_groups[{self.group}]['params']" \
               f"[{self.index}]) or {{}})"

    def fetch(self, L: dict, G: dict) -> Any:
        optimizer = self.base.fetch(L, G)
        return optimizer.state.get(optimizer.param_groups[self.group]["params"][self.index]) \
            or {}


@variable
class StateMadeAtRunTime(Variable):
    """`optimizer.state` read after a compiled step that makes state when the compiled code
    runs: its entries are not known while tracing, so any use of it breaks the graph (the
    base class refuses every operation)."""

    def describe(self) -> str:
        return "optimizer.state, read after a step() that creates state in the same graph"


@dataclasses.dataclass(frozen=True, slots=True)
class NewStateSource(Source):
    """State tensor `name` of a param, made by a `StateMaker` (the base) if missing:
    `maker.tensor(group, index, name)`."""

    base: Source
    group: int
    index: int
    state_name: str

    def name(self) -> str:
        return f"{self.base.name()}.tensor({self.group}, {self.index}, {self.state_name!r})"

    def apply(self, base_code: str) -> str:
        return f"{base_code}.tensor({self.group}, {self.index}, {self.state_name!r})"

    def fetch(self, L: dict, G: dict) -> Any:
        return self.base.fetch(L, G).tensor(self.group, self.index, self.state_name)
