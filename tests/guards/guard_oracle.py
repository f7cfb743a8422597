"""An independent oracle for guard soundness: do two values agree on every guarded property?

Written directly from the specification in docs/guards.md, without using the guards package, so
that property tests compare two implementations of the same rules.
"""
from __future__ import annotations

import math

import torch


def tensor_facts(tensor: torch.Tensor) -> tuple:
    """Every property a tensor guard compares, as a plain tuple."""
    strides = tuple(tensor.stride()) if tensor.layout == torch.strided else None
    return (type(tensor), tensor.dtype, tensor.device, tensor.requires_grad, tensor.layout,
            tuple(tensor.shape), strides, tensor.is_inference(), tensor.is_neg(),
            tensor.is_conj())


def _same_float(first: float, second: float) -> bool:
    if math.isnan(first) or math.isnan(second):
        return math.isnan(first) and math.isnan(second)
    return first == second and math.copysign(1.0, first) == math.copysign(1.0, second)


def same_guarded(first, second) -> bool:
    """Whether `second` matches `first` on everything a full specialisation relies on."""
    if type(first) is not type(second):
        return False
    if isinstance(first, torch.Tensor):
        return tensor_facts(first) == tensor_facts(second)
    if type(first) is float:
        return _same_float(first, second)
    if type(first) is complex:
        return _same_float(first.real, second.real) and _same_float(first.imag, second.imag)
    if type(first) in (list, tuple):
        return len(first) == len(second) and all(map(same_guarded, first, second))
    if type(first) is dict:
        first_keys, second_keys = list(first), list(second)
        if first_keys != second_keys:
            return False
        if [type(key) for key in first_keys] != [type(key) for key in second_keys]:
            if not all(type(key) is str for key in first_keys):
                return False
        return all(same_guarded(first[key], second[key]) for key in first_keys)
    if first is None:
        return True
    return first == second
