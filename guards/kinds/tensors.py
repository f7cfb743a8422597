"""Tensor match (stage: guard; input: a source and a tensor seen at capture; output: one grouped
condition per tensor and the first differing property on failure).

`TensorProperties` is what a compiled entry may rely on about a tensor: exact type (so subclasses
and `nn.Parameter` are told apart), dtype, device, requires_grad, layout, dim, sizes, strides, and
the inference / negative / conjugate flags. Any size or stride entry may be `None`, meaning "any
value": dynamic shapes relax entries without changing the guard's shape.

Cheap facts the check relies on (pinned by the `test_fact_*` tests in
tests/guards/test_guard_tensors.py):
- the conjugate bit can only be set on complex tensors, so it is tested only for complex dtypes;
- `x.shape == (4, 3)` compares a `torch.Size` with a tuple, which also checks the dim.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Hashable, Iterable

import torch

from guards import messages
from guards.kinds.base import RANK_TENSOR, Guard
from guards.sources import Source

_FLAGS = (("inference", "is_inference"), ("neg", "is_neg"), ("conj", "is_conj"))


def _show_entries(entries: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("*" if entry is None else str(entry) for entry in entries) + "]"


@dataclasses.dataclass(frozen=True)
class TensorProperties:
    """Every tensor property a compiled entry may be specialised on."""

    tensor_type: type
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    layout: torch.layout
    sizes: tuple[int | None, ...]
    strides: tuple[int | None, ...] | None
    inference: bool = False
    neg: bool = False
    conj: bool = False

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorProperties:
        """The properties of `tensor`, every size and stride exact."""
        strided = tensor.layout is torch.strided
        return cls(
            tensor_type=type(tensor), dtype=tensor.dtype, device=tensor.device,
            requires_grad=tensor.requires_grad, layout=tensor.layout,
            sizes=tuple(tensor.shape), strides=tuple(tensor.stride()) if strided else None,
            inference=tensor.is_inference(), neg=tensor.is_neg(), conj=tensor.is_conj())

    @property
    def dim(self) -> int:
        return len(self.sizes)

    def relax(self, size_dims: Iterable[int] = (), stride_dims: Iterable[int] = ()
              ) -> TensorProperties:
        """A copy where the sizes of `size_dims` and strides of `stride_dims` may be anything."""
        sizes = list(self.sizes)
        for dim in size_dims:
            sizes[dim] = None
        strides = None if self.strides is None else list(self.strides)
        for dim in stride_dims:
            if strides is not None:
                strides[dim] = None
        return dataclasses.replace(self, sizes=tuple(sizes),
                                   strides=None if strides is None else tuple(strides))

    def first_difference(self, tensor: Any) -> tuple[str, str, str] | None:
        """(property, expected, got) for the first property of `tensor` that differs, else None.

        `property` is written as an expression suffix (`.dtype`, `.size()[0]`), or `type` for the
        exact type.
        """
        if type(tensor) is not self.tensor_type:
            return ("type", *messages.type_names(self.tensor_type, type(tensor)))
        pairs = (
            (".dtype", self.dtype, tensor.dtype),
            (".device", self.device, tensor.device),
            (".requires_grad", self.requires_grad, tensor.requires_grad),
            (".layout", self.layout, tensor.layout),
            (".dim()", self.dim, tensor.dim()),
        )
        for suffix, expected, got in pairs:
            if expected != got:
                return suffix, messages.show(expected), messages.show(got)
        return self._entry_difference(tensor) or self._flag_difference(tensor)

    def _entry_difference(self, tensor: torch.Tensor) -> tuple[str, str, str] | None:
        entry_lists = [(".size()", self.sizes, tuple(tensor.shape))]
        if self.strides is not None:
            entry_lists.append((".stride()", self.strides, tuple(tensor.stride())))
        for suffix, expected_entries, got_entries in entry_lists:
            for index, (expected, got) in enumerate(zip(expected_entries, got_entries)):
                if expected is not None and expected != got:
                    return f"{suffix}[{index}]", str(expected), str(got)
        return None

    def _flag_difference(self, tensor: torch.Tensor) -> tuple[str, str, str] | None:
        for field, method in _FLAGS:
            expected, got = getattr(self, field), getattr(tensor, method)()
            if expected != got:
                return f".{method}()", str(expected), str(got)
        return None

    def describe(self) -> str:
        """`Tensor(torch.float32, cpu, size=[4, 3], stride=[3, 1])` plus any unusual property."""
        parts = [str(self.dtype), str(self.device), f"size={_show_entries(self.sizes)}"]
        if self.strides is not None:
            parts.append(f"stride={_show_entries(self.strides)}")
        if self.layout is not torch.strided:
            parts.append(f"layout={self.layout}")
        if self.requires_grad:
            parts.append("requires_grad=True")
        parts += [f"{method}()=True" for field, method in _FLAGS if getattr(self, field)]
        return f"{messages.type_name(self.tensor_type)}({', '.join(parts)})"


def _entry_conditions(variable: str, method: str, entries: tuple, writer: Any) -> list[str]:
    """Conditions on `variable.shape` / `variable.stride()` for exact or partly-any entries."""
    call = ".shape" if method == "size" else ".stride()"
    if all(entry is not None for entry in entries):
        return [f"{variable}{call} == {entries!r}"]
    name = writer.fresh(f"{variable}_{method}")
    conditions = [f"len({name} := {variable}{call}) == {len(entries)}"]
    conditions += [f"{name}[{index}] == {entry}"
                   for index, entry in enumerate(entries) if entry is not None]
    return conditions


def tensor_conditions(variable: str, properties: TensorProperties, writer: Any) -> list[str]:
    """The conditions, cheapest first, that hold exactly when `variable` matches `properties`."""
    kind = writer.bind(properties.tensor_type, properties.tensor_type.__name__)
    dtype = writer.bind(properties.dtype, str(properties.dtype).replace("torch.", ""))
    conditions = [f"type({variable}) is {kind}", f"{variable}.dtype is {dtype}"]
    if properties.device.type == "cpu":
        conditions.append(f"{variable}.is_cpu")
    else:
        device = writer.bind(properties.device, "device_" + str(properties.device))
        conditions.append(f"{variable}.device == {device}")
    conditions.append(f"{'' if properties.requires_grad else 'not '}{variable}.requires_grad")
    layout = writer.bind(properties.layout, str(properties.layout).replace("torch.", ""))
    conditions.append(f"{variable}.layout is {layout}")
    conditions += _entry_conditions(variable, "size", properties.sizes, writer)
    if properties.strides is not None:
        conditions += _entry_conditions(variable, "stride", properties.strides, writer)
    for field, method in _FLAGS:
        if field == "conj" and not properties.dtype.is_complex:
            continue
        expected = getattr(properties, field)
        conditions.append(f"{'' if expected else 'not '}{variable}.{method}()")
    return conditions


def emit_together(guards: list, writer: Any) -> bool:
    """Write one native check of every guard's tensor (see `guards.native`); returns False,
    writing nothing, when the native matcher is off or unavailable."""
    from guards import native

    properties = [guard.properties for guard in guards]
    matcher = native.tensor_matcher(properties)
    if matcher is None:
        return False
    variables = [writer.value(guard.source) for guard in guards]
    call = f"tensors_match({', '.join(variables)})"
    if writer.check_tensors(variables, [native.tensor_spec(item) for item in properties],
                            "\n".join([f"# {guard.describe()}" for guard in guards] + [call])):
        return True
    for guard in guards:
        writer.export(writer.value(guard.source))
        writer.comment(guard.describe())
    name = writer.bind(matcher, "tensors_match")
    writer.require([f"{name}({', '.join(variables)})"])
    return True


class TensorMatchGuard(Guard):
    """The value is a tensor with exactly the captured `TensorProperties`."""

    rank = RANK_TENSOR

    def __init__(self, source: Source, properties: TensorProperties) -> None:
        self.source = source
        self.properties = properties

    @classmethod
    def of(cls, source: Source, tensor: torch.Tensor) -> TensorMatchGuard:
        """The guard a tracer installs for `tensor` read from `source`."""
        return cls(source, TensorProperties.of(tensor))

    def relaxed(self, size_dims: Iterable[int] = (), stride_dims: Iterable[int] = ()
                ) -> TensorMatchGuard:
        """The same guard with the given size and stride entries accepting any value."""
        return TensorMatchGuard(self.source, self.properties.relax(size_dims, stride_dims))

    def key(self) -> Hashable:
        return self.properties

    def emit(self, writer: Any) -> None:
        variable = writer.fetch(self.source)
        writer.comment(self.describe())
        writer.require(tensor_conditions(variable, self.properties, writer))

    def reason(self, value: Any) -> str | None:
        difference = self.properties.first_difference(value)
        if difference is None:
            return None
        suffix, expected, got = difference
        if suffix == "type":
            return messages.mismatch(f"type({self.source.name()})", expected, got)
        return messages.mismatch(self.source.name() + suffix, expected, got)

    def describe(self) -> str:
        return f"{self.source.name()}: {self.properties.describe()}"
