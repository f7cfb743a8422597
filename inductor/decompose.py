"""Stage "decompose": a torch-level FX graph becomes a functional ATen-level FX graph.

Input: an `fx.GraphModule` as `dynamo` or `torch.compile` hands it to a backend, and example
inputs (real or fake tensors). Output: an `AtenGraph`: a graph of ATen ops with no in-place op
except trailing `aten.copy_` into mutated inputs, every `get_attr` tensor lifted to a leading
placeholder, and the facts about the original outputs that users can observe (aliasing of
inputs and of each other, strides) so the compiled graph can reproduce them.

Two `make_fx` passes run on fake tensors: the first applies `decomposition_table()` (the curated
`torch._decomp` table shared with the training engineer), the second functionalizes the result.
Decomposing first matters: functionalization does not rewrite every mutating composite op (it
leaves `native_batch_norm` writing running statistics in place), but after decomposition every
mutation is a plain in-place ATen op that it understands.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import itertools
import math
import operator
from typing import Any, Callable, Optional

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                           DynamicOutputShapeException, FakeTensor,
                                           FakeTensorMode)
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils.stateless import _reparametrize_module

from inductor import batch_norm, moments, vml
from inductor.aliasing import (SharedInputWrites, UnsupportedGraph, memory_root,
                               observable_outputs, write_targets,
                               reads_written_memory_partly, writes_into_overlapping_memory,
                               writes_into_shared_inputs, written_placeholders)
from inductor.eager_run import eager_run, replayable, version_of
from inductor.fresh_writes import make_fresh_writes_functional
from inductor.graph_calls import hookless
from inductor.view_rewrites import rewrite_views

aten = torch.ops.aten

# Composite ops decomposed on top of torch's core ATen table: they become reductions and
# pointwise math the lowering fuses.
_EXTRA_DECOMPOSITIONS = [
    aten._softmax, aten._log_softmax, aten.native_layer_norm, aten.native_group_norm,
    aten.native_batch_norm, aten._native_batch_norm_legit, aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training, aten._batch_norm_with_update,
    aten._batch_norm_with_update_functional, aten._batch_norm_no_update, aten.gelu, aten.elu,
    aten.leaky_relu, aten.hardtanh, aten.embedding, aten.index_select, aten.unfold,
    aten.native_dropout, aten.addcmul, aten.addcdiv, aten.lerp,
    aten.upsample_bilinear2d, aten.upsample_nearest2d,
    aten.repeat, aten.logical_xor, aten.rsub,
]

# Ops torch's core table would decompose that we keep whole: library calls (attention), and
# pointwise ops whose lowering rounds as eager's kernels do (torch's decompositions of
# addcmul, addcdiv and lerp round each step: one ulp away from eager in optimizer updates).
_KEPT_WHOLE = [
    aten.scaled_dot_product_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_attention_math.default,
    aten.addcmul.default, aten.addcdiv.default, aten.lerp.Scalar, aten.lerp.Tensor,
    aten.addcmul_.default, aten.addcdiv_.default, aten.lerp_.Scalar, aten.lerp_.Tensor,
]

# Calls in a torch-level graph that change global state instead of computing tensors.
GRAD_MODE_CALLS = (torch._C._set_grad_enabled,)
PAIRED_STATE_CALLS = {
    torch.amp._enter_autocast: torch.amp._exit_autocast,
    torch.autograd.grad_mode._enter_inference_mode: torch.autograd.grad_mode._exit_inference_mode,
}


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA_DECOMPOSITIONS))
    for overload in _KEPT_WHOLE:
        table.pop(overload, None)
    general = table[aten.native_batch_norm.default]
    exact_training = batch_norm.updating(general, functional=False)
    # Training-mode batch norm as eager's CPU kernel rounds it, where that is reproducible
    # (`inductor/batch_norm.py`): functionalization turns native_batch_norm into the
    # functional variant, which the training engineer's joint graphs meet.
    for overload, functional in ((aten._native_batch_norm_legit_functional.default, True),
                                 (aten._native_batch_norm_legit.default, False),
                                 (aten._batch_norm_with_update.default, False)):
        if overload in table:
            table[overload] = batch_norm.updating(table[overload], functional)
    # evaluation mode: what symbolic traces (torch's Python dispatcher) meet
    for overload, reserve in ((aten._native_batch_norm_legit_no_training.default, False),
                              (aten._batch_norm_no_update.default, True)):
        if overload in table:
            table[overload] = batch_norm.evaluating(table[overload], reserve)

    def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                          eps):
        if training or running_mean is None or running_var is None:
            return exact_training(input, weight, bias, running_mean, running_var, training,
                                  momentum, eps)
        exact = batch_norm.evaluation(input, weight, bias, running_mean, running_var, eps)
        if exact is not None:
            empty = input.new_zeros((0,))
            return exact, empty, empty
        return _batch_norm_inference(input, weight, bias, running_mean, running_var, eps)
    table[aten.native_batch_norm.default] = native_batch_norm
    for overload in (aten.addcmul.default, aten.addcmul_.default):
        if overload in table:   # kept whole (lowered as eager rounds it): nothing to wrap
            table[overload] = _integer_value_truncated(table[overload])
    for overload in (aten.index_put.default, aten.index_put_.default,
                     aten._index_put_impl_.default):
        table[overload] = functools.partial(_index_put_with_mask, overload)
    for overload in (aten.index_add.default, aten.index_add_.default):
        if overload in table:
            table[overload] = _empty_index_add_unchecked(table[overload], overload)
    if aten._unsafe_masked_index.default in table:
        table[aten._unsafe_masked_index.default] = _negative_indices_wrapped(
            table[aten._unsafe_masked_index.default])
    table[aten.split.Tensor] = _empty_dimension_split(table.get(aten.split.Tensor))
    table[aten.arange.start_step] = _integer_arange_of_non_integers
    table[aten.linspace.default] = _eager_linspace(table.get(aten.linspace.default))
    moments.add_to(table)
    vml.add_to(table)
    return table


def _eager_linspace(decomposition):
    """float32/float64 `linspace(start, end, steps)` as eager's CPU kernel rounds it: the step
    `(end - start) / (steps - 1)` in the dtype, the first `steps // 2` elements
    `start + step * i` and the rest `end - step * (steps - 1 - i)`, each one fused
    multiply-add (the compiler contracts the kernel's expression; `add`/`sub` with `alpha`
    lower to one). torch's reference splits at `i < steps / 2` and rounds twice: the middle
    element of `linspace(-1, 1, 7)` was exactly 0 where eager's is -2**-25, and its `bool()`
    False (graph fuzzer seed 17057). Other dtypes and forms: torch's decomposition."""
    def linspace(start, end, steps, *, dtype=None, layout=None, device=None,
                 pin_memory=False):
        dtype = dtype or torch.get_default_dtype()
        if dtype not in (torch.float32, torch.float64) or steps < 2 or \
                not all(type(value) in (int, float) for value in (start, end)):
            return NotImplemented if decomposition is None else decomposition(
                start, end, steps, dtype=dtype, layout=layout, device=device,
                pin_memory=pin_memory)
        span = _rounded(_rounded(end, dtype) - _rounded(start, dtype), dtype)
        step = _rounded(span / _rounded(steps - 1, dtype), dtype)
        index = aten.arange.start_step(0, steps, 1, dtype=torch.int64, device=device)
        shape = [steps]
        low = aten.add.Tensor(aten.full.default(shape, start, dtype=dtype, device=device),
                              index.to(dtype), alpha=step)
        high = aten.sub.Tensor(aten.full.default(shape, end, dtype=dtype, device=device),
                               (steps - 1 - index).to(dtype), alpha=step)
        return torch.where(index < steps // 2, low, high)
    return linspace


def _rounded(value: float, dtype: torch.dtype) -> float:
    """`value` rounded to `dtype` (a Python float is a double)."""
    return ctypes.c_float(value).value if dtype == torch.float32 else float(value)


def _empty_dimension_split(decomposition):
    """`x.split(n, d)` of a dimension of size 0 is one empty view, `x.narrow(d, 0, 0)`, as
    eager's split returns; torch 2.11's decomposition indexed an empty list of sizes
    (IndexError: graph fuzzer, H100 seeds 1700, 1964, 2092, 2456, 2894, 2925)."""
    def split(self, split_size, dim=0):
        if isinstance(split_size, int) and split_size >= 0 and self.dim() > 0 and \
                self.shape[dim] == 0:
            return (self.narrow(dim, 0, 0),)
        if decomposition is None:
            return NotImplemented
        return decomposition(self, split_size, dim)
    return split


@functools.lru_cache(maxsize=1)
def _int64_arange_truncates_bounds() -> bool:
    """Whether this torch's eager `arange` of dtype int64 takes its length from the bounds
    and step truncated to integers (torch 2.11: arange(0.0, 3.5, 1) has 3 elements) rather
    than from the float range (torch 2.14: 4). Asked of eager itself, outside any tracing."""
    with torch.utils._python_dispatch._disable_current_modes():
        return torch.arange(0.0, 3.5, 1, dtype=torch.int64, device="cpu").numel() == 3


def _integer_arange_of_non_integers(start, end, step=1, *, dtype=None, layout=None,
                                    device=None, pin_memory=False):
    """`arange` of an integer dtype with a float bound or step, as eager computes it: the
    length from the float range (for int64 on torch 2.11, from the truncated numbers), the
    values `int(start) + i * int(step)` (a step below 1 in magnitude gives repeats). torch
    2.11's meta function took both from the truncated numbers: a zero step raised (H100
    seeds 1085, 2662) and the float range gave another length than eager (2426). Other
    forms: NotImplemented (torch's own path)."""
    numbers = (start, end, step)
    if dtype is None or dtype.is_floating_point or dtype.is_complex or dtype == torch.bool \
            or not all(type(value) in (int, float) for value in numbers) \
            or all(type(value) is int for value in numbers):
        return NotImplemented
    torch._check(step != 0, lambda: "step must be nonzero")
    torch._check((step > 0 and end >= start) or (step < 0 and end <= start),
                 lambda: "upper bound and lower bound inconsistent with step sign")
    torch._check(math.isfinite(start) and math.isfinite(end),
                 lambda: f"unsupported range: {start} -> {end}")
    first, stride = int(start), int(step)
    if dtype == torch.int64 and _int64_arange_truncates_bounds():
        # eager divides by the truncated step: a zero one crashes the process there
        torch._check(stride != 0, lambda: "step must be nonzero")
        sign = (stride > 0) - (stride < 0)
        length = (int(end) - first + stride - sign) // stride
    else:
        length = math.ceil((end - start) / step)
    index = aten.arange.start_step(0, max(length, 0), 1, dtype=torch.int64, device=device,
                                   pin_memory=pin_memory)
    return (index * stride + first).to(dtype)


def _integer_value_truncated(decomposition):
    """torch's `addcmul` reference rejects a float `value` for integer tensors; eager
    truncates it to an integer (graph fuzzer: `a.addcmul_(b, c, value=0.5)` on int32)."""
    def addcmul(self, tensor1, tensor2, *, value=1):
        tensors = (self, tensor1, tensor2)
        integral = not any(tensor.is_floating_point() or tensor.is_complex()
                           for tensor in tensors)
        if integral and isinstance(value, float):
            value = int(value)
        return decomposition(self, tensor1, tensor2, value=value)
    return addcmul


def _empty_index_add_unchecked(decomposition, overload):
    """Eager's `index_add` into a tensor of two or more dimensions and no elements returns
    before reading its indices (any index passes); torch's decomposition scatters through
    them, and the compiled kernel's bounds check raised IndexError (graph fuzzer:
    `x.index_add_(1, tensor([0]), s)` on x of shape (5, 0), which wrote out of bounds
    before the check existed)."""
    def index_add(self, dim, index, source, *, alpha=1):
        if self.dim() > 1 and self.numel() == 0:
            return self if overload is aten.index_add_.default else self.clone()
        if self.dtype == torch.bool:    # eager casts alpha to bool; `source * 2` was int64
            alpha = bool(alpha)         # (graph fuzzer class 27)
        return decomposition(self, dim, index, source, alpha=alpha)
    return index_add


class _ZeroDimMaskAssignment(torch.overrides.TorchFunctionMode):
    """While tracing: `x[m] = v` with a 0-d boolean `m` becomes `x.copy_(where(m, v, x))`.
    `Tensor.__setitem__` reads such an index with `.item()` before any ATen op (`x[True] = v`
    writes everything, `x[False] = v` nothing), which no decomposition sees and tracing
    cannot do (graph fuzzer: `x[x > 0] = -1.5` on a 0-d `x`)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.__setitem__ and len(args) == 3 and \
                isinstance(args[1], torch.Tensor) and args[1].dim() == 0 and \
                args[1].dtype == torch.bool:
            target, mask, value = args
            if isinstance(value, torch.Tensor):
                value = value.to(target.dtype)
                while value.dim() > target.dim() and value.shape[0] == 1:
                    value = value[0]   # x[True] = v: v of shape (1, *x.shape) fits too
            target.copy_(torch.where(mask, value, target))
            return None
        return func(*args, **(kwargs or {}))


def _negative_indices_wrapped(decomposition):
    """torch's `_unsafe_masked_index` decomposition clamps indices into range, so a negative
    index under a true mask read element 0; eager counts it from the end (a[-2] is a[6])."""
    def unsafe_masked_index(x, mask, indices, fill):
        wrapped = [None if index is None else
                   torch.where(index < 0, index + x.shape[dim], index)
                   for dim, index in enumerate(indices)]
        return decomposition(x, mask, wrapped, fill)
    return unsafe_masked_index


def _index_put_with_mask(overload, self, indices, values, accumulate=False, *_unsafe):
    """`x[mask] = values` (a boolean or uint8 mask over consecutive dimensions) as a `where`
    over `x`: without this, tracing needs the mask's `nonzero` (a data-dependent shape) and
    the graph could not be compiled (graph fuzzer: `x[x > 0] = -2`). Values broadcast over
    the masked elements or give one row per true element (in order: a cumulative count of
    the mask picks each element's row). Other indices: NotImplemented (torch's own path)."""
    indices = list(indices)
    masks = [position for position, index in enumerate(indices)
             if index is not None and index.dtype in (torch.bool, torch.uint8)]
    if len(masks) != 1 or any(index is not None for position, index in enumerate(indices)
                              if position != masks[0]):
        return NotImplemented
    start, mask = masks[0], indices[masks[0]].bool()
    rest = self.dim() - start - mask.dim()
    if rest < 0 or tuple(self.shape[start:start + mask.dim()]) != tuple(mask.shape):
        return NotImplemented
    spread = mask.reshape([1] * start + list(mask.shape) + [1] * rest)
    values = values.to(self.dtype)
    if values.dim() > rest and not (values.dim() == rest + 1 and values.shape[0] == 1):
        if start != 0 or values.dim() != rest + 1:
            return NotImplemented
        rows = (mask.reshape(-1).to(torch.int64).cumsum(0) - 1).clamp(min=0)
        rows = rows.clamp(max=max(values.shape[0] - 1, 0)).reshape(mask.shape)
        values = values[rows] if values.shape[0] > 0 else values.new_zeros(
            tuple(mask.shape) + tuple(values.shape[1:]))
    elif values.dim() == rest + 1:
        values = values[0]
    if accumulate:
        result = self + torch.where(spread, values, torch.zeros_like(values))
    else:
        result = torch.where(spread, values, self)
    if overload is aten.index_put.default:
        return result.to(self.dtype)
    return self.copy_(result)


def _batch_norm_inference(input, weight, bias, running_mean, running_var, eps):
    """BatchNorm with running statistics as four pointwise ops (torch's general decomposition
    traces about twenty ops per call, which dominated tracing time on CNNs)."""
    shape = [1, -1] + [1] * (input.dim() - 2)
    scale = torch.rsqrt(running_var + eps)
    if weight is not None:
        scale = scale * weight
    result = (input - running_mean.view(shape)) * scale.view(shape)
    if bias is not None:
        result = result + bias.view(shape)
    empty = input.new_zeros((0,))
    return result.to(input.dtype), empty, empty


def decomposition_table() -> dict:
    """The curated `torch._decomp` table (an `OpOverload -> function` dict) used by `make_fx`.

    torch's core ATen decompositions, plus softmax, the norms, GELU and friends as math, minus
    scaled-dot-product attention (kept as a library call). A fresh dict: callers may edit it.
    """
    return dict(_table())


@dataclasses.dataclass
class AtenGraph:
    """The decomposed, functional graph and what the runtime wrapper must reproduce."""

    module: torch.fx.GraphModule      # placeholders: lifted constants, then the user inputs
    constants: list                   # live tensors (parameters, buffers, constants) to pass first
    fake_inputs: list                 # fake tensors for every placeholder of `module`
    output_spec: Any                  # pytree spec of what the original graph returns
    output_aliases: list              # per flat output: Optional[OutputAlias]
    output_strides: list              # per flat output: eager strides (None for non-tensors)
    grad_mode_after: Optional[bool]   # set grad mode to this after each call (None: unchanged)
    hidden_outputs: int = 0           # trailing outputs that are only bases of aliasing outputs
    version_steps: dict = dataclasses.field(default_factory=dict)  # placeholder position ->
    #                                   how far eager's in-place ops move that input's version
    output_versions: tuple = ()       # (flat output position, eager's version counter) for
    #                                   outputs the graph makes and writes (`y = x * 2; y.add_(1)`)

    def mutated_inputs(self) -> list:
        """Placeholder positions the graph writes into (a trailing `aten.copy_` into them)."""
        placeholders = [node for node in self.module.graph.nodes if node.op == "placeholder"]
        copy = aten.copy_.default
        return [position for position, node in enumerate(placeholders)
                if any(user.target is copy and user.args[0] is node for user in node.users)]


def fake_inputs_for(example_inputs, fake_mode: FakeTensorMode) -> list:
    """Fake copies of `example_inputs` in `fake_mode` (real or other-mode fake tensors)."""
    converted = []
    seen: set = set()
    for value in example_inputs:
        if not isinstance(value, torch.Tensor):
            raise UnsupportedGraph(f"non-tensor graph input of type {type(value).__name__}")
        if isinstance(value, FakeTensor) and value.fake_mode is not fake_mode:
            with fake_mode:
                fake = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype,
                                           device=value.device)
        else:
            fake = fake_mode.from_tensor(value, static_shapes=True)
        if id(fake) in seen:
            # The same tensor passed twice: one fake object would bind both uses to one
            # placeholder, and a later call with distinct tensors would read the wrong one.
            # An alias keeps the memory shared and the placeholders apart.
            with fake_mode:
                fake = torch.ops.aten.alias.default(fake)
        seen.add(id(fake))
        converted.append(fake)
    return converted


def check_state_calls(gm: torch.fx.GraphModule) -> Optional[bool]:
    """The grad mode the graph leaves behind (None if it sets none); refuse unpaired contexts."""
    grad_mode = None
    open_calls: dict = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target in GRAD_MODE_CALLS:
            grad_mode = bool(node.args[0])
        elif node.target in PAIRED_STATE_CALLS:
            open_calls[node.target] = open_calls.get(node.target, 0) + 1
        else:
            for enter, exit_ in PAIRED_STATE_CALLS.items():
                if node.target is exit_:
                    open_calls[enter] = open_calls.get(enter, 0) - 1
    if any(count != 0 for count in open_calls.values()):
        raise UnsupportedGraph("the graph enters a context (autocast or inference mode) it does "
                               "not leave, or the reverse")
    return grad_mode


_READS_A_NUMBER = ("the graph reads a tensor's value as a Python number (`.item()`, or a 0-d "
                   "tensor passed where a number is expected): compiled, the value seen while "
                   "tracing would be fixed")


def _detached(value):
    return value.detach() if isinstance(value, torch.Tensor) and value.requires_grad else value


def trace_aten(gm: torch.fx.GraphModule, example_inputs) -> AtenGraph:
    """Decompose and functionalize `gm` (see the module docstring)."""
    grad_mode_after = check_state_calls(gm)
    state, stateless = _module_state(gm)
    example_inputs = state + list(example_inputs)
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = fake_inputs_for(example_inputs, fake_mode)
    flat_function, spec_box = _flattened(stateless)
    grad_before = torch.is_grad_enabled()
    try:
        with fake_mode, _ZeroDimMaskAssignment():
            decomposed = make_fx(flat_function, decomposition_table=_table(),
                                 tracing_mode="real")(*fakes)
    except DataDependentOutputException as error:
        # a fake tensor without a constant cannot answer `.item()` (a float 0-d tensor
        # passed as clamp's bound, torch.compile's `capture_scalar_outputs` graphs)
        raise UnsupportedGraph(_READS_A_NUMBER) from error
    except DynamicOutputShapeException as error:
        raise UnsupportedGraph("the graph makes a tensor whose shape depends on tensor values "
                               f"({error.func}): compiled shapes are fixed") from error
    finally:
        torch._C._set_grad_enabled(grad_before)
    if any(node.target is aten._local_scalar_dense.default for node in decomposed.graph.nodes):
        raise UnsupportedGraph(_READS_A_NUMBER)
    constants, lifted = lift_constants(decomposed)
    make_fresh_writes_functional(lifted)    # often all the writes: no second trace
    eager_outputs, eager_inputs, steps = _run_on_fakes(stateless, example_inputs)
    if replayable(gm):  # eager's kernels' own layouts (also where a fake kernel fails)
        real = eager_run(stateless, example_inputs,
                         {position - len(constants) for position in written_placeholders(lifted)})
        if real is not None:
            eager_outputs, eager_inputs, steps = real
    aliases, strides, hidden = observable_outputs(
        lifted, eager_outputs,
        None if eager_inputs is None else [None] * len(constants) + list(eager_inputs))
    fake_constants = fake_inputs_for(constants, fake_mode)
    all_fakes = fake_constants + fakes
    if _mutates(lifted):
        _refuse_inexpressible_writes(lifted)
        if writes_into_shared_inputs(lifted, list(constants) + list(example_inputs)):
            raise SharedInputWrites("the graph writes into inputs that share memory with other "
                                    "inputs (views of one tensor passed separately)")
        # views whose functional form reads other memory than eager
        rewrite_views(lifted, frozenset(position for position, alias in enumerate(aliases)
                                        if alias is not None))
        # Detached: functionalize copies each write back into its input outside the graph's
        # grad-mode regions, and a leaf requiring grad written under `no_grad` (an inference
        # graph's only kind of write into it) raised "a leaf Variable that requires grad is
        # being used in an in-place operation" (program fuzzer P16, seed 7784)
        with fake_mode:
            functional = make_fx(torch.func.functionalize(lifted, remove="mutations_and_views"),
                                 tracing_mode="real")(*[_detached(fake) for fake in all_fakes])
        # Functionalization may record new tensor constants (e.g. from `lift_fresh_copy`).
        extra, functional = lift_constants(functional)
        if extra:
            constants = extra + constants
            all_fakes = fake_inputs_for(extra, fake_mode) + all_fakes
            for alias in aliases:
                if alias is not None and alias.base_kind == "input":
                    alias.base_index += len(extra)
    else:
        functional = lifted
    functional.graph.eliminate_dead_code()
    functional.recompile()
    functional, constants, all_fakes = _scalars_on_graph_device(
        functional, constants, all_fakes, example_inputs, lambda: fake_mode)
    # the module's tensors lead the inputs: passed with the lifted constants on every call
    offset = len(constants)
    return AtenGraph(functional, list(constants) + state, all_fakes, spec_box[0], aliases,
                     strides, grad_mode_after, hidden,
                     {position + offset: step for position, step in steps.items()},
                     _output_versions(eager_outputs, aliases))


def _output_versions(eager_outputs: Optional[list], aliases: list) -> tuple:
    """(flat output position, version) for outputs eager made and then wrote in place: its
    counter reads the writes (`y = x * 2; y.add_(1)`: 1), where the compiled graph's fresh
    result reads 0. One position per counter: views of another output share its counter.
    Inference tensors (made under `torch.inference_mode`) have no counter: nothing to keep."""
    found, counters = [], set()
    for position, (value, alias) in enumerate(zip(eager_outputs or (), aliases)):
        if not isinstance(value, torch.Tensor) or value.is_inference() or \
                value._version == 0 or (alias is not None and alias.base_kind != "output"):
            continue
        counter = position if alias is None else alias.base_index
        if counter not in counters:
            counters.add(counter)
            found.append((position, value._version))
    return tuple(found)


def _module_state(gm: torch.fx.GraphModule):
    """(the tensors `gm` holds: `get_attr` tensors, and the parameters and buffers of modules
    its `call_module` nodes call; a function of (those tensors, inputs) running `gm`). Traced
    as constants, a write into one (`self.buf.add_(1)`, BatchNorm's `num_batches_tracked`)
    was lost from the graph or made for real at trace time; as inputs, it is an input's
    write, functionalized and reapplied on every call."""
    try:
        lifted_attributes, lifted = lift_constants(gm)
    except UnsupportedGraph:    # a non-tensor attribute: traced as before
        return [], gm
    called = tuple(node.target + "." for node in lifted.graph.nodes if node.op == "call_module")
    held = {name: value for name, value in
            itertools.chain(lifted.named_parameters(remove_duplicate=False),
                            lifted.named_buffers(remove_duplicate=False))
            if name.startswith(called)}
    names, tensors = list(held), list(held.values())
    if not names:
        return list(lifted_attributes), lifted
    count, end = len(lifted_attributes), len(lifted_attributes) + len(names)

    def stateless(*values):     # (get_attr tensors, held tensors, inputs)
        # `functional_call` without calling the module (its hooks: `inductor/graph_calls.py`)
        with _reparametrize_module(lifted, dict(zip(names, values[count:end])),
                                   tie_weights=False, strict=False):
            return lifted.forward(*(values[:count] + values[end:]))

    return list(lifted_attributes) + tensors, stateless


def _scalars_on_graph_device(functional, constants: list, fakes: list, example_inputs,
                             tracing: Callable):
    """Lifted 0-d CPU constants of a graph whose inputs live on one GPU, moved there once
    (eager mixes such a scalar with CUDA tensors; `x[...] = 0` makes one). Left where they
    are, the graph counted as spanning two devices and ran as is. Constants the graph writes
    into stay; the graph is traced again over the moved ones so every node's example value
    says where it lives. `tracing()`: a context entering the graph's fake mode, giving it."""
    devices = {value.device for value in example_inputs if isinstance(value, torch.Tensor)}
    if len(devices) != 1 or next(iter(devices)).type == "cpu":
        return functional, constants, fakes
    device = next(iter(devices))
    placeholders = [node for node in functional.graph.nodes if node.op == "placeholder"]
    written = {memory_root(target)[0] for target in write_targets(functional)
               if isinstance(target, torch.fx.Node)}
    moved = [index for index, value in enumerate(constants)
             if value.device.type == "cpu" and value.dim() == 0
             and placeholders[index] not in written]
    if not moved:
        return functional, constants, fakes
    constants, fakes = list(constants), list(fakes)
    for index in moved:     # (real tensors: outside the fake mode)
        constants[index] = constants[index].to(device)
    with tracing() as fake_mode:
        for index in moved:
            fakes[index] = fake_mode.from_tensor(constants[index], static_shapes=True)
        retraced = make_fx(functional, tracing_mode="real")(*fakes)
    retraced.graph.eliminate_dead_code()
    retraced.recompile()
    return retraced, constants, fakes


def _run_on_fakes(function, example_inputs) -> tuple:
    """The torch-level graph run once on fake copies of its inputs: (its flat outputs, whose
    strides and views are eager's own: a decomposition may lay a result out otherwise (torch's
    `repeat` keeps a transposed input's layout where eager's returns a contiguous tensor);
    input position -> how far eager's in-place ops move that input's version counter (the
    compiled kernels write without moving it, and autograd would miss that a tensor saved
    for a backward outside the graph was overwritten)). (None, {}) where an op has no fake
    kernel: the traced strides are kept and every written input moves once. The fake inputs
    come between (outputs, fakes, steps): an output's `_base` is one of them or not."""
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    grad_before = torch.is_grad_enabled()
    try:
        fakes = fake_inputs_for(example_inputs, fake_mode)
        before = [version_of(fake) for fake in fakes]
        with fake_mode:
            outputs = pytree.tree_leaves(function(*fakes))
        return outputs, fakes, {position: version_of(fake) - first
                                for position, (fake, first) in enumerate(zip(fakes, before))}
    except Exception:   # noqa: BLE001  (an op without a fake kernel)
        return None, None, {}
    finally:
        torch._C._set_grad_enabled(grad_before)


def _refuse_inexpressible_writes(lifted: torch.fx.GraphModule) -> None:
    """Raise `UnsupportedGraph` for writes the functional form cannot express (a custom
    operator writing its arguments, writes through memory overlapping itself, an in-place op
    reading memory it writes laid out otherwise): the graph then runs as is."""
    writer = _custom_writer(lifted)
    if writer is not None:
        raise UnsupportedGraph(f"the graph calls a custom operator that writes its "
                               f"arguments ({writer}): functionalization refuses it")
    if writes_into_overlapping_memory(lifted):
        raise UnsupportedGraph("the graph writes through a view whose elements overlap in "
                               "memory (an expanded tensor, overlapping unfold windows)")
    if reads_written_memory_partly(lifted):
        raise UnsupportedGraph("an in-place op reads memory it writes through a view laid "
                               "out otherwise (`y += y.t()`: eager refuses the partial "
                               "overlap or reads elements already written)")


_IN_PLACE_OPERATORS = {operator.setitem, operator.iadd, operator.isub, operator.imul,
                       operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow,
                       operator.iand, operator.ior, operator.ixor, operator.ilshift,
                       operator.irshift, operator.imatmul}


def _may_write(gm: torch.fx.GraphModule) -> bool:
    """Whether a torch-level graph may write into a tensor: an in-place method or function
    (`x.add_`, `torch.relu_`), an augmented assignment or `setitem`, an `out=` argument."""
    for node in gm.graph.nodes:
        if node.op not in ("call_method", "call_function"):
            continue
        name = node.target if isinstance(node.target, str) else \
            getattr(node.target, "__name__", "")
        if node.target in _IN_PLACE_OPERATORS or "out" in node.kwargs or \
                (name.endswith("_") and not name.startswith("_")):
            return True
        schema = getattr(node.target, "_schema", None)
        if schema is not None and schema.is_mutable:
            return True
    return False


def refuse_inexpressible_writes(gm: torch.fx.GraphModule, example_inputs) -> None:
    """`trace_aten`'s refusals of writes the functional form cannot express, for a graph
    another path compiles: inductor.autograd's training compile functionalizes without
    building the mutating ATen graph these checks read (program fuzzer P41: `w.t().sub_(w)`
    in a graph with an input requiring grad did not raise eager's partial-overlap error).
    Raises `UnsupportedGraph`; a graph that fails to trace here is left to its compile."""
    if not _may_write(gm):
        return
    state, stateless = _module_state(gm)
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    flat_function, _ = _flattened(stateless)
    grad_before = torch.is_grad_enabled()
    try:
        with fake_mode, _ZeroDimMaskAssignment():
            fakes = [value.detach() if isinstance(value, torch.Tensor) else value
                     for value in fake_inputs_for(state + list(example_inputs), fake_mode)]
            torch._C._set_grad_enabled(False)
            traced = make_fx(flat_function, decomposition_table=_table(),
                             tracing_mode="real")(*fakes)
    except Exception:   # noqa: BLE001 - the compile that follows reports its own errors
        return
    finally:
        torch._C._set_grad_enabled(grad_before)
    _, lifted = lift_constants(traced)
    if _mutates(lifted):
        _refuse_inexpressible_writes(lifted)


def _mutates(gm: torch.fx.GraphModule) -> bool:
    """Whether any node writes into a tensor (then the graph needs functionalizing)."""
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op == "call_function" and schema is not None and schema.is_mutable:
            return True
    return False


def _custom_writer(gm: torch.fx.GraphModule) -> Optional[str]:
    """The name of an operator outside ATen and prims that writes an argument (`mylib::copy_
    (Tensor(a!) dst, Tensor src)`), if the graph calls one (peer finding I9)."""
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op == "call_function" and schema is not None and schema.is_mutable and \
                node.target.namespace not in ("aten", "prims"):
            return schema.name
    return None


def _flattened(gm):
    """A function of the flat inputs returning flat outputs, and a box for the output spec."""
    spec_box = [None]

    def flat_function(*inputs):
        result = hookless(gm)(*inputs)
        leaves, spec_box[0] = pytree.tree_flatten(result)
        return leaves

    return flat_function, spec_box


def lift_constants(gm: torch.fx.GraphModule):
    """Turn each `get_attr` tensor into a leading placeholder; return (tensors, new module)."""
    graph = torch.fx.Graph()
    environment: dict = {}
    constants = []
    first_placeholder = None
    attributes = [node for node in gm.graph.nodes if node.op == "get_attr"]
    for node in attributes:
        value = operator.attrgetter(node.target)(gm)
        if not isinstance(value, torch.Tensor):
            raise UnsupportedGraph(f"attribute {node.target} is not a tensor")
        constants.append(value)
        placeholder = graph.placeholder(f"constant{len(constants) - 1}")
        placeholder.meta = dict(node.meta)
        environment[node] = placeholder
        first_placeholder = first_placeholder or placeholder
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            continue
        environment[node] = graph.node_copy(node, lambda arg: environment[arg])
    return constants, torch.fx.GraphModule(gm, graph)
