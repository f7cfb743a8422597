"""Outputs eager returns as aliases, rebuilt after a compiled graph's call (stage: run).

Input: per output an `aliasing.OutputAlias` or None, and the number of outputs the caller
sees. Output: `alias_rebuilder(aliases, count)`, a function `rebuild(results, arguments,
shapes)` that puts each alias in place from its base (an input, or an output, hidden ones
included, which it then drops; `shapes`: a call's geometry of aliases over symbolic sizes).

Per alias, precomputed once:
- the very base object where eager returns it (`same_object`);
- a tensor of its own over the base's memory (`native.own_tensor`: no view, a version counter
  of its own at 0) where eager's output is no view (`detached`) and its base is a hidden output
  that no other output aliases: nobody can observe that base, so such an output is exactly a
  fresh tensor, as eager's (`torch.stack([x, x])`, whose decomposition views a `cat`). It was
  `as_strided(base, ...).detach()`: about 4.5 us of the 7.7 us a 64x64 stack's graph took;
- else the view `as_strided(base, size, stride, base.storage_offset() + offset)`
  (`native.view_of`: the dispatcher's as_strided, autograd's view tracking included, without
  Python's argument parsing), detached where eager's is no view;
- a view over a detached tensor where eager's `_base` is a `detach()` of an input that the
  graph does not return (`x.detach()[1:]`: `alias.detached_base`): that tensor is made once
  per call (`as_strided(base, ...).detach()`: no history, the input's memory and version
  counter) for all the views eager makes of it, which then have it as `_base`.
Bases that are not plain tensors (subclasses, fake tensors) take torch's Python calls.
"""
from __future__ import annotations

from typing import Callable

import torch

from inductor.runtime import native

SAME, OWN, VIEW, DETACHED_VIEW, VIEW_OF_DETACHED = range(5)


def alias_kinds(aliases: list, count: int) -> dict:
    """Output position -> how it is rebuilt (SAME, OWN, VIEW, DETACHED_VIEW or
    VIEW_OF_DETACHED)."""
    bases: dict = {}
    for alias in aliases:
        if alias is not None:
            key = (alias.base_kind, alias.base_index)
            bases[key] = bases.get(key, 0) + 1
    kinds = {}
    for position, alias in enumerate(aliases):
        if alias is None:
            continue
        if alias.same_object:
            kinds[position] = SAME
        elif alias.detached_base is not None:
            kinds[position] = VIEW_OF_DETACHED
        elif alias.detached and alias.base_kind == "output" and alias.base_index >= count \
                and bases[("output", alias.base_index)] == 1:
            kinds[position] = OWN
        else:
            kinds[position] = DETACHED_VIEW if alias.detached else VIEW
    return kinds


def alias_rebuilder(aliases: list, count: int) -> Callable:
    """`rebuild(results, arguments, shapes) -> results` (a list, changed in place): see the
    module docstring. Input aliases are rebuilt first: an output may view another output
    that aliases an input."""
    kinds = alias_kinds(aliases, count)
    order = sorted(kinds, key=lambda position: aliases[position].base_kind != "input")
    steps = tuple((position, kinds[position], aliases[position].base_kind == "input",
                   aliases[position].base_index, tuple(aliases[position].size),
                   tuple(aliases[position].stride), aliases[position].storage_offset,
                   aliases[position].detached_base)
                  for position in order)
    own_tensor, view_of = native.output_geometry()
    plain = torch.Tensor

    def rebuild(results: list, arguments: tuple, shapes: dict) -> list:
        detached: dict = {}
        for position, kind, from_input, index, size, stride, offset, hidden in steps:
            base = arguments[index] if from_input else results[index]
            if kind == SAME:
                results[position] = base
                continue
            if shapes:
                size, stride, offset = shapes.get(position) or (size, stride, offset)
            if kind == VIEW_OF_DETACHED:
                base, offset = _detached_base(detached, base, hidden, offset)
                kind = VIEW
            if type(base) is not plain:
                value = torch.as_strided(base, size, stride, base.storage_offset() + offset)
                results[position] = value if kind == VIEW else value.detach()
            elif kind == OWN:
                results[position] = own_tensor(base, size, stride,
                                               base.storage_offset() + offset)
            else:
                value = view_of(base, size, stride, offset)
                results[position] = value if kind == VIEW else value.detach()
        if len(results) > count:
            del results[count:]
        return results
    return rebuild


def _detached_base(made: dict, base, hidden: tuple, offset) -> tuple:
    """(the detached tensor `hidden` = (key, geometry) describes over `base`: `base.detach()`,
    or for a geometry (size, stride, offset) that view of it detached; made once per call and
    key in `made`; `offset` made relative to it)."""
    key, geometry = hidden
    start = 0 if geometry is None else geometry[2]
    tensor = made.get(key)
    if tensor is None:
        tensor = base.detach() if geometry is None else torch.as_strided(
            base, geometry[0], geometry[1], base.storage_offset() + start).detach()
        made[key] = tensor
    return tensor, offset - start
