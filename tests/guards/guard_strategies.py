"""Hypothesis strategies for guard properties: values described by small readable specs.

Tensors are drawn as `TensorSpec`s (shape, dtype, view, flags) and built on demand, so a
shrunk counterexample prints as `TensorSpec(shape=(2, 1), dtype=torch.float32, view='expand')`
rather than as tensor data. Other values are plain Python data with specs at the tensor leaves.
"""
from __future__ import annotations

import dataclasses
import math

import torch
from hypothesis import strategies as st

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.bool, torch.complex64)
VIEWS = ("contiguous", "transpose", "slice", "expand", "neg", "conj")
WRAPPERS = ("tensor", "parameter", "inference")


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """How to build one tensor: a base shape, a view applied to it, and flags."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    view: str = "contiguous"
    requires_grad: bool = False
    wrapper: str = "tensor"

    def build(self) -> torch.Tensor:
        """A fresh tensor with exactly the properties the spec describes."""
        if self.wrapper == "inference":
            with torch.inference_mode():
                return self._build_view()
        tensor = self._build_view()
        if self.wrapper == "parameter":
            return torch.nn.Parameter(tensor.detach(), requires_grad=self.requires_grad)
        if self.requires_grad:
            tensor = tensor.detach().requires_grad_(True)
        return tensor

    def _build_view(self) -> torch.Tensor:
        shape = self.shape
        if self.view == "transpose":
            return torch.zeros(shape[::-1], dtype=self.dtype).t()
        if self.view == "slice":
            wide = torch.zeros(*shape[:-1], shape[-1] * 2, dtype=self.dtype)
            return wide[..., ::2]
        if self.view == "expand":
            squeezed = tuple(1 if index == 0 else size for index, size in enumerate(shape))
            return torch.zeros(squeezed, dtype=self.dtype).expand(shape)
        if self.view == "neg":
            return torch._neg_view(torch.zeros(shape, dtype=self.dtype))
        if self.view == "conj":
            return torch.zeros(shape, dtype=self.dtype).conj()
        return torch.zeros(shape, dtype=self.dtype)


def _view_allowed(shape: tuple[int, ...], dtype: torch.dtype, view: str) -> bool:
    if view == "transpose":
        return len(shape) == 2
    if view in ("slice", "expand"):
        return len(shape) >= 1
    if view == "neg":
        return dtype.is_floating_point or dtype.is_complex
    if view == "conj":
        return dtype.is_complex
    return True


@st.composite
def tensor_specs(draw, max_dims: int = 3) -> TensorSpec:
    """A tensor spec: 0..max_dims dims of size 0..4, any listed dtype, view and wrapper."""
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=max_dims)))
    dtype = draw(st.sampled_from(DTYPES))
    view = draw(st.sampled_from([view for view in VIEWS if _view_allowed(shape, dtype, view)]))
    wrapper = draw(st.sampled_from(WRAPPERS))
    differentiable = (dtype.is_floating_point or dtype.is_complex) and wrapper != "inference"
    requires_grad = draw(st.booleans()) if differentiable and view != "neg" else False
    return TensorSpec(shape, dtype, view, requires_grad, wrapper)


FLOATS = st.one_of(st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1.5]),
                   st.floats(allow_nan=True, allow_infinity=True))
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.integers(), FLOATS,
    st.text(max_size=4), st.sampled_from([torch.float32, torch.int64]),
    st.sampled_from([torch.device("cpu"), torch.device("meta")]),
)


def _containers(children):
    keys = st.one_of(st.text(max_size=3), st.integers(-2, 2))
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(keys, children, max_size=3),
    )


VALUES = st.recursive(st.one_of(SCALARS, tensor_specs()), _containers, max_leaves=6)
"""Frame values as specs: scalars, tensor specs, and lists/tuples/dicts of them."""


def build(spec):
    """The real value for a spec: tensor specs become fresh tensors, containers are rebuilt."""
    if isinstance(spec, TensorSpec):
        return spec.build()
    if type(spec) is list:
        return [build(item) for item in spec]
    if type(spec) is tuple:
        return tuple(build(item) for item in spec)
    if type(spec) is dict:
        return {key: build(item) for key, item in spec.items()}
    return spec


def tensor_leaves(spec, path=()):
    """(path, TensorSpec) for every tensor leaf of a value spec, in insertion order."""
    if isinstance(spec, TensorSpec):
        return [(path, spec)]
    if type(spec) in (list, tuple):
        items = enumerate(spec)
    elif type(spec) is dict:
        items = spec.items()
    else:
        return []
    return [leaf for key, item in items for leaf in tensor_leaves(item, path + (key,))]


def replace_at(spec, path, new):
    """A copy of `spec` with the leaf at `path` replaced by `new`."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if type(spec) is dict:
        return {key: replace_at(item, rest, new) if key == head else item
                for key, item in spec.items()}
    items = [replace_at(item, rest, new) if index == head else item
             for index, item in enumerate(spec)]
    return tuple(items) if type(spec) is tuple else items


TENSOR_VALUES = st.one_of(
    tensor_specs(),
    st.tuples(tensor_specs(), st.lists(VALUES, max_size=2)).map(lambda pair: [pair[0], *pair[1]]),
    st.tuples(st.lists(VALUES, max_size=2), tensor_specs()).map(lambda pair: (*pair[0], pair[1])),
    st.dictionaries(st.text(max_size=3), tensor_specs(), min_size=1, max_size=3),
)
"""Frame values with at least one tensor leaf."""
