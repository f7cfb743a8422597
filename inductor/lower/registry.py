"""The table of lowerings: ATen op -> function building loop IR.

Input: `@register_lowering(aten.add, aten.add_)` on functions taking lowered arguments
(`TensorBox`es, Python scalars, lists) and returning a `TensorBox` (or a tuple of them).
Output: `lowering_for(target)`, consulted by the lowering driver for each ATen node; ops
without an entry run through their eager kernel (`lower/extern.py`).
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

_lowerings: dict = {}


def register_lowering(*targets, overloads_only: bool = False):
    """Register the decorated function for each target (an overload or a whole packet)."""
    def register(function: Callable) -> Callable:
        for target in targets:
            _lowerings[target] = function
            if isinstance(target, torch._ops.OpOverloadPacket) and not overloads_only:
                for name in target.overloads():
                    _lowerings.setdefault(getattr(target, name), function)
        return function
    return register


def lowering_for(target) -> Optional[Callable]:
    """The lowering of an FX call target, or None."""
    function = _lowerings.get(target)
    if function is None and isinstance(target, torch._ops.OpOverload):
        function = _lowerings.get(target.overloadpacket)
    return function
