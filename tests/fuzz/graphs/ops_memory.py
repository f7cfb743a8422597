"""The graph fuzzer's memory op families: views, in-place writes, concatenation, indexing,
constants and reshuffles (pad, flip, roll, repeat, triangles).

Input: the `Generator`. Output: per family, a function returning `(code, defined names)` for
one candidate statement, or None (see `ops_compute.py`). In-place candidates pick any live
value as target: inputs, intermediates, and views of either (written through the view).
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from tests.fuzz.graphs.generator import fmt


def _shape_of(g, name: str) -> tuple:
    return tuple(g.tensor(name).shape)


def _dtype_text(g, name: str) -> str:
    return str(g.tensor(name).dtype).replace("torch.", "")


def reshaped(g, shape: tuple) -> tuple:
    """Another shape with the same element count: merged, split or padded with ones."""
    shape = list(shape)
    roll = g.rng.random()
    if roll < 0.2 or not shape:
        return (math.prod(shape),) if g.chance(0.7) else tuple(shape) + (1,)
    if roll < 0.5 and len(shape) >= 2:
        position = g.rng.randrange(len(shape) - 1)
        return tuple(shape[:position] + [shape[position] * shape[position + 1]]
                     + shape[position + 2:])
    if roll < 0.8:
        position = g.rng.randrange(len(shape))
        extent = shape[position]
        factors = [factor for factor in range(2, extent) if extent % factor == 0]
        if factors:
            factor = g.choice(factors)
            return tuple(shape[:position] + [factor, extent // factor] + shape[position + 1:])
    position = g.rng.randrange(len(shape) + 1)
    return tuple(shape[:position] + [1] + shape[position:])


def _slice_text(g, extent: int) -> str:
    kind = g.choice([":", "a:b", "::s", "a:", ":b", "a:b:s", "-a:", "int", "None"])
    start = g.rng.randrange(0, max(extent, 1) + 1)
    stop = g.rng.randrange(start, max(extent, 1) + 2)
    step = g.choice([2, 3])
    return {":": ":", "a:b": f"{start}:{stop}", "::s": f"::{step}", "a:": f"{start}:",
            ":b": f":{stop}", "a:b:s": f"{start}:{stop}:{step}", "-a:": f"-{start + 1}:",
            "int": str(g.rng.randrange(-extent, extent)) if extent else ":",
            "None": "None"}[kind]


def index_text(g, shape: tuple) -> str:
    """A basic-indexing subscript for a tensor of `shape` (slices, steps, ints, None, ...)."""
    pieces = [_slice_text(g, extent) for extent in shape]
    while len(pieces) > 1 and pieces[-1] == ":" and g.chance(0.6):
        pieces.pop()
    if pieces and g.chance(0.15):
        pieces = ["..."] + pieces[g.rng.randrange(1, len(pieces) + 1):]
    return ", ".join(pieces) if pieces else "..."


def view(g):
    x = g.operand(None, lambda: (g.shape(), g.dtype()))
    if x is None:
        return None
    shape = _shape_of(g, x)
    rank = len(shape)
    out = g.fresh()
    kind = g.choice(["view", "reshape", "permute", "transpose", "t", "expand", "getitem",
                     "getitem", "select", "unsqueeze", "squeeze", "as_strided", "narrow",
                     "chunk", "split", "unbind", "diagonal", "flatten", "unflatten",
                     "movedim", "view_flat", "mT", "unfold", "expand_as"])
    dim = g.rng.randrange(rank) if rank else 0
    if kind in _RESHAPING:
        return _reshaping_view(g, x, out, kind, shape, dim)
    return _slicing_view(g, x, out, kind, shape, dim)


_RESHAPING = ("view", "reshape", "view_flat", "permute", "transpose", "t", "mT", "expand",
              "expand_as", "getitem", "select", "unsqueeze", "squeeze", "as_strided")


def _reshaping_view(g, x: str, out: str, kind: str, shape: tuple, dim: int):
    """A `view` candidate of a kind in `_RESHAPING`, or None."""
    rank = len(shape)
    if kind in ("view", "reshape"):
        return f"{out} = {x}.{kind}({fmt(reshaped(g, shape))})", [out]
    if kind == "view_flat":
        return f"{out} = {x}.view(-1)", [out]
    if kind == "permute" and rank >= 2:
        order = list(range(rank))
        g.rng.shuffle(order)
        return f"{out} = {x}.permute({fmt(order)})", [out]
    if kind == "transpose" and rank >= 1:
        return f"{out} = {x}.transpose({dim}, {g.rng.randrange(-rank, rank)})", [out]
    if kind == "t" and rank <= 2:
        return f"{out} = {x}.t()", [out]
    if kind == "mT" and rank >= 2:
        return f"{out} = {x}.mT", [out]
    if kind == "expand":
        new = [g.choice([2, 3]) if extent == 1 and g.chance(0.7) else
               (-1 if g.chance(0.3) else extent) for extent in shape]
        if g.chance(0.3):
            new = [g.choice([1, 2, 3])] + new
        return f"{out} = {x}.expand({fmt(new)})", [out]
    if kind == "expand_as":
        return _expand_as(g, x, out)
    if kind == "getitem":
        return f"{out} = {x}[{index_text(g, shape)}]", [out]
    if kind == "select" and rank and shape[dim]:
        return f"{out} = {x}.select({dim}, {g.rng.randrange(-shape[dim], shape[dim])})", [out]
    if kind == "unsqueeze":
        return f"{out} = {x}.unsqueeze({g.rng.randrange(-rank - 1, rank + 1)})", [out]
    if kind == "squeeze":
        text = "" if g.chance(0.4) or not rank else str(dim)
        return f"{out} = {x}.squeeze({text})", [out]
    if kind == "as_strided":
        return _as_strided(g, x, out)
    return None


def _slicing_view(g, x: str, out: str, kind: str, shape: tuple, dim: int):
    """A `view` candidate of any other kind (narrowing, splitting, diagonals, ...), or None."""
    rank = len(shape)
    if kind == "narrow" and rank:
        start = g.rng.randrange(shape[dim] + 1)
        length = g.rng.randrange(shape[dim] - start + 1)
        return f"{out} = {x}.narrow({dim}, {start}, {length})", [out]
    if kind in ("chunk", "split", "unbind") and rank:
        pieces = g.fresh()
        parts = g.choice([1, 2, 3])
        call = {"chunk": f"chunk({parts}, {dim})", "split": f"split({parts}, {dim})",
                "unbind": f"unbind({dim})"}[kind]
        count = len(g.tensor(x).unbind(dim) if kind == "unbind" else
                    getattr(g.tensor(x), kind)(parts, dim))
        if count == 0:
            return None
        second = g.fresh()
        first_index, second_index = g.rng.randrange(count), g.rng.randrange(count)
        return (f"{pieces} = {x}.{call}\n{out} = {pieces}[{first_index}]\n"
                f"{second} = {pieces}[{second_index}]"), [pieces, out, second]
    if kind == "diagonal" and rank >= 2:
        first, second = g.rng.sample(range(rank), 2)
        return f"{out} = {x}.diagonal({g.choice([0, 1, -1])}, {first}, {second})", [out]
    if kind == "flatten" and rank:
        start = g.rng.randrange(rank)
        return f"{out} = {x}.flatten({start}, {g.rng.randrange(start, rank)})", [out]
    if kind == "unflatten" and rank:
        extent = shape[dim]
        factors = [factor for factor in range(1, extent + 1) if extent and extent % factor == 0]
        if factors:
            factor = g.choice(factors)
            return f"{out} = {x}.unflatten({dim}, ({factor}, {extent // factor}))", [out]
    if kind == "movedim" and rank >= 2:
        return f"{out} = torch.movedim({x}, {dim}, {g.rng.randrange(rank)})", [out]
    if kind == "unfold" and rank and shape[dim]:
        size = g.rng.randint(1, shape[dim])
        return f"{out} = {x}.unfold({dim}, {size}, {g.choice([1, 2])})", [out]
    return None


def _expand_as(g, x: str, out: str):
    shape = _shape_of(g, x)
    target_shape = tuple(g.choice([2, 3]) if extent == 1 else extent for extent in shape)
    other = g.operand(lambda t: tuple(t.shape) == target_shape,
                      lambda: (target_shape, g.dtype()))
    return f"{out} = {x}.expand_as({other})", [out]


def _as_strided(g, x: str, out: str):
    tensor = g.tensor(x)
    storage = tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1)
    if storage == 0:
        return None
    rank = g.choice([1, 2, 3])
    size = [g.choice([1, 2, 3, 4]) for _ in range(rank)]
    stride = [g.choice([0, 1, 2, 3, 5]) for _ in range(rank)]
    span = sum((extent - 1) * step for extent, step in zip(size, stride))
    if span >= storage:
        return None
    offset = g.rng.randrange(storage - span)
    if g.chance(0.4):
        return f"{out} = {x}.as_strided({fmt(size)}, {fmt(stride)})", [out]
    return f"{out} = torch.as_strided({x}, {fmt(size)}, {fmt(stride)}, {offset})", [out]


def _partner_into(g, target: str):
    """A value that broadcasts to `target`'s shape: a scalar, a live value, a new input."""
    shape = _shape_of(g, target)
    if g.chance(0.25):
        return fmt(g.scalar(g.tensor(target).dtype))
    name = g.pick(lambda t: t.dim() <= len(shape) and all(
        a == 1 or a == b for a, b in zip(reversed(t.shape), reversed(shape))))
    if name is not None and g.chance(0.5):
        return name
    partner = [1 if g.chance(0.25) else extent for extent in shape]
    if partner and g.chance(0.2):
        partner = partner[g.rng.randrange(len(partner) + 1):]
    dtype = g.dtype() if g.chance(0.25) else _dtype_text(g, target)
    return g.new_input(tuple(partner), dtype)


def index_input(g, high: int, shape: tuple, negative: bool = False,
                unique_dim: Optional[int] = None) -> str:
    """Indices in [0, high) (or [-high, 0)): a new input, or computed from a live one.
    `unique_dim`: on GPUs, no value repeats along that dimension (writes to one position
    from several threads land in any order there, in eager as in compiled code)."""
    if unique_dim is not None and g.device != "cpu":
        return g.new_input(shape, "int64", kind="unique", high=high, dim=unique_dim)
    integer = g.pick(lambda t: tuple(t.shape) == shape and t.dtype in (
        torch.int64, torch.int32) and high > 0)
    if integer is not None and g.chance(0.3):
        return f"({integer}.abs() % {high})"
    name = g.new_input(shape, "int64", kind="index", high=high)
    if negative and high:
        arg = g.program.args[-1]
        arg.derive = f"r - {high}"
        g.env[name] = g.env[name] - high
    return name


def _unique_count(g, count: int, high: int) -> int:
    """`count` positions, at most `high` where they must not repeat (GPUs)."""
    return min(count, high) if g.device != "cpu" else count


def inplace(g):
    target = g.pick()
    if target is None:
        return None
    shape = _shape_of(g, target)
    rank = len(shape)
    out = g.fresh()
    prefix = f"{out} = " if g.chance(0.2) else ""
    defines = [out] if prefix else []
    kind = g.choice(["add_", "mul_", "sub_", "div_", "clamp_", "fill_", "zero_", "copy_",
                     "relu_", "neg_", "masked_fill_", "index_put_", "setitem", "setitem",
                     "setitem_mask", "index_fill_", "scatter_", "scatter_add_", "addcmul_",
                     "lerp_", "exp_", "abs_", "through_view", "through_view", "index_add_"])
    if kind in ("add_", "mul_", "sub_", "div_", "copy_", "lerp_"):
        value = _partner_into(g, target)
        extra = ", 0.25" if kind == "lerp_" else ""
        return f"{prefix}{target}.{kind}({value}{extra})", defines
    if kind == "addcmul_":
        return f"{prefix}{target}.addcmul_({_partner_into(g, target)}, " \
            f"{_partner_into(g, target)}, value=0.5)", defines
    if kind == "clamp_":
        low = g.scalar(g.tensor(target).dtype)
        return f"{prefix}{target}.clamp_({fmt(low)}, {fmt(low + 2)})", defines
    if kind == "fill_":
        return f"{prefix}{target}.fill_({fmt(g.scalar(g.tensor(target).dtype))})", defines
    if kind in ("zero_", "relu_", "neg_", "exp_", "abs_"):
        return f"{prefix}{target}.{kind}()", defines
    if kind == "masked_fill_":
        mask = g.operand(lambda t: t.dtype == torch.bool and t.dim() <= rank, None) or \
            f"({target} > 0)"
        return f"{prefix}{target}.masked_fill_({mask}, {fmt(g.scalar())})", defines
    if kind == "through_view":
        view_name = g.fresh()
        subscript = index_text(g, shape)
        write = g.choice(["mul_(2)", "add_(1)", "fill_(3)", "zero_()", "neg_()"])
        return f"{view_name} = {target}[{subscript}]\n{view_name}.{write}", [view_name]
    if kind == "setitem":
        subscript = index_text(g, shape)
        region = eval(f"subscript[{subscript}]", {"subscript": _Subscript()})
        try:
            region_shape = tuple(torch.empty(shape, device="meta")[region].shape)
        except IndexError:
            return None
        value = fmt(g.scalar()) if g.chance(0.4) else g.new_input(
            tuple(1 if g.chance(0.3) else extent for extent in region_shape),
            _dtype_text(g, target) if g.chance(0.8) else g.dtype())
        return f"setitem({target}, {_subscript_literal(region)}, {value})", []
    if kind == "setitem_mask":
        mask = g.operand(lambda t: t.dtype == torch.bool and tuple(t.shape) == shape, None) \
            or f"({target} > 0)"
        return f"setitem({target}, {mask}, {fmt(g.scalar(g.tensor(target).dtype))})", []
    return _indexed_inplace(g, kind, target, shape, prefix, defines)


def _indexed_inplace(g, kind: str, target: str, shape: tuple, prefix: str, defines: list):
    """An `inplace` candidate writing at indices (index_put_, index_fill_, index_add_,
    the scatters), or None."""
    rank = len(shape)
    if rank == 0 or shape[0] == 0:
        return None
    dim = g.rng.randrange(rank)
    if kind == "index_put_":
        accumulate = g.chance(0.4)
        count = g.choice([1, 2, 3, 5]) if accumulate else \
            _unique_count(g, g.choice([1, 2, 3, 5]), shape[0])
        indices = index_input(g, shape[0], (count,), unique_dim=None if accumulate else 0)
        values = g.new_input((count,) + shape[1:] if g.chance(0.7) else shape[1:],
                             _dtype_text(g, target))
        return f"{prefix}{target}.index_put_(({indices},), {values}, " \
            f"accumulate={fmt(accumulate)})", defines
    if kind == "index_fill_":
        indices = index_input(g, shape[dim], (g.choice([1, 2, 3]),))
        return f"{prefix}{target}.index_fill_({dim}, {indices}, " \
            f"{fmt(g.scalar(g.tensor(target).dtype))})", defines
    if kind == "index_add_":
        count = g.choice([1, 2, 3])
        indices = index_input(g, shape[dim], (count,))
        source_shape = shape[:dim] + (count,) + shape[dim + 1:]
        source = g.new_input(source_shape, _dtype_text(g, target))
        return f"{prefix}{target}.index_add_({dim}, {indices}, {source})", defines
    index_shape = tuple(g.rng.randint(1, extent) if extent else 0 for extent in shape)
    indices = index_input(g, shape[dim], index_shape,
                          unique_dim=dim if kind == "scatter_" else None)
    source = g.new_input(index_shape, _dtype_text(g, target))
    return f"{prefix}{target}.{kind}({dim}, {indices}, {source})", defines


class _Subscript:
    """`_Subscript()[...]` returns the subscript object itself (slices, ints, None)."""

    def __getitem__(self, item):
        return item


def _subscript_literal(region) -> str:
    items = region if isinstance(region, tuple) else (region,)
    texts = []
    for item in items:
        if isinstance(item, slice):
            texts.append(f"slice({item.start}, {item.stop}, {item.step})")
        elif item is Ellipsis:
            texts.append("Ellipsis")
        else:
            texts.append(repr(item))
    return "(" + "".join(text + ", " for text in texts) + ")"


def concat(g):
    x = g.operand(lambda t: t.dim() >= 1, lambda: (g.shape(g.choice([1, 2, 3])), g.dtype()))
    if x is None:
        return None
    shape = _shape_of(g, x)
    rank = len(shape)
    dim = g.rng.randrange(-rank, rank)
    stack = g.chance(0.3)
    pieces = [x]
    for _ in range(g.choice([1, 1, 2, 3, 4])):
        wanted = list(shape)
        if not stack:
            wanted[dim] = g.choice([0, 1, 2, 3, shape[dim]])
        found = g.pick(lambda t: tuple(t.shape) == tuple(wanted)) if g.chance(0.5) else None
        pieces.append(found or g.new_input(tuple(wanted), _dtype_text(g, x)
                                           if g.chance(0.8) else g.dtype()))
    out = g.fresh()
    function = "stack" if stack else g.choice(["cat", "cat", "concat"])
    return f"{out} = torch.{function}([{', '.join(pieces)}], {dim})", [out]


def indexing(g):
    x = g.operand(lambda t: t.dim() >= 1 and t.shape[0] > 0,
                  lambda: (g.shape(g.choice([1, 2, 3])), g.dtype()))
    if x is None:
        return None
    shape = _shape_of(g, x)
    rank = len(shape)
    dim = g.rng.randrange(rank)
    out = g.fresh()
    kind = g.choice(["index_select", "gather", "getitem", "getitem2", "masked_fill",
                     "embedding", "scatter", "scatter_add", "scatter_reduce", "index_put",
                     "index_add", "take_along_dim", "one_hot"])
    if shape[dim] == 0:
        return None
    if kind == "index_select":
        indices = index_input(g, shape[dim], (g.choice([0, 1, 2, 4, 6]),))
        return f"{out} = torch.index_select({x}, {dim}, {indices})", [out]
    if kind in ("gather", "take_along_dim"):
        return _gather(g, x, out, kind, shape, dim)
    if kind == "getitem":
        indices = index_input(g, shape[0], g.shape(g.choice([1, 1, 2])), negative=g.chance(0.3))
        return f"{out} = {x}[{indices}]", [out]
    if kind == "getitem2" and rank >= 2:
        form = g.choice(["{x}[{a}, {b}]", "{x}[:, {b}]", "{x}[{a}, 1:]", "{x}[..., {b}, None]"])
        count = (g.choice([1, 2, 3]),)
        first = index_input(g, shape[0], count)
        second_extent = shape[-1] if "..." in form else shape[1]   # `...` indexes the last dim
        if second_extent == 0:
            return None
        second = index_input(g, second_extent, count if g.chance(0.7) else (1,))
        return f"{out} = " + form.format(x=x, a=first, b=second), [out]
    if kind == "masked_fill":
        mask = g.operand(lambda t: t.dtype == torch.bool and t.dim() <= rank, None) or \
            f"({x} > 0)"
        return f"{out} = {x}.masked_fill({mask}, {fmt(g.scalar())})", [out]
    if kind == "embedding" and rank == 2 and g.tensor(x).is_floating_point():
        indices = index_input(g, shape[0], g.shape(g.choice([1, 2])))
        return f"{out} = F.embedding({indices}, {x})", [out]
    if kind == "one_hot":
        indices = index_input(g, 5, g.shape(g.choice([1, 2])))
        return f"{out} = F.one_hot({indices}, 5)", [out]
    if kind in ("scatter", "scatter_add", "scatter_reduce"):
        return _scatter(g, x, out, kind, shape, dim)
    if kind == "index_put":
        accumulate = g.chance(0.5)
        count = g.choice([1, 2, 4]) if accumulate else \
            _unique_count(g, g.choice([1, 2, 4]), shape[0])
        indices = index_input(g, shape[0], (count,), unique_dim=None if accumulate else 0)
        values = g.new_input((count,) + shape[1:], _dtype_text(g, x))
        return f"{out} = torch.index_put({x}, ({indices},), {values}, " \
            f"{fmt(accumulate)})", [out]
    if kind == "index_add":
        count = g.choice([1, 2, 3])
        indices = index_input(g, shape[dim], (count,))
        source = g.new_input(shape[:dim] + (count,) + shape[dim + 1:], _dtype_text(g, x))
        return f"{out} = {x}.index_add({dim}, {indices}, {source}, alpha=2)", [out]
    return None



def _gather(g, x: str, out: str, kind: str, shape: tuple, dim: int):
    """An `indexing` candidate of kind gather or take_along_dim."""
    index_shape = tuple(g.rng.randint(1, extent) if extent else 0 for extent in shape)
    if kind == "take_along_dim":
        index_shape = shape[:dim] + (g.rng.randint(1, 4),) + shape[dim + 1:]
    indices = index_input(g, shape[dim], index_shape)
    call = "torch.gather" if kind == "gather" else "torch.take_along_dim"
    return f"{out} = {call}({x}, {indices}, {dim})" if kind != "gather" else \
        f"{out} = torch.gather({x}, {dim}, {indices})", [out]


def _scatter(g, x: str, out: str, kind: str, shape: tuple, dim: int):
    """An `indexing` candidate of kind scatter, scatter_add or scatter_reduce."""
    index_shape = tuple(g.rng.randint(1, extent) if extent else 0 for extent in shape)
    indices = index_input(g, shape[dim], index_shape,
                          unique_dim=dim if kind == "scatter" else None)
    source = g.new_input(index_shape, _dtype_text(g, x))
    if kind == "scatter_reduce":
        reduce = g.choice(["sum", "prod", "amax", "amin", "mean"])
        return f"{out} = {x}.scatter_reduce({dim}, {indices}, {source}, '{reduce}', " \
            f"include_self={fmt(g.chance(0.5))})", [out]
    return f"{out} = torch.{kind}({x}, {dim}, {indices}, {source})", [out]

def constant(g):
    out = g.fresh()
    dtype = g.dtype()
    shape = g.shape()
    kind = g.choice(["arange", "arange3", "zeros", "ones", "full", "zeros_like", "ones_like",
                     "full_like", "new_zeros", "new_full", "eye", "linspace", "tensor",
                     "arange_add"])
    device = "device=DEVICE"
    if kind == "arange":
        return f"{out} = torch.arange({g.choice([0, 1, 3, 5, 8])}, {device})", [out]
    if kind == "arange3":
        start, step = g.choice([0, 1, -2, 0.5, 0.1, -1.5]), g.choice([1, 2, 0.25, -1, 1.5])
        end = start + step * g.choice([0, 3, 5]) + g.choice([0, 0.0001])
        kind = g.choice(['float32', 'int64', 'float64', 'int32'])
        if kind == "int64" and abs(step) < 1:  # torch 2.11-2.13 eager divides by int(step):
            kind = "int32"                      # SIGFPE, the worker dies (graphs FINDINGS)
        return f"{out} = torch.arange({fmt(start)}, {fmt(end)}, {fmt(step)}, " \
            f"dtype=torch.{kind}, {device})", [out]
    if kind == "arange_add":
        x = g.operand(lambda t: t.dim() >= 1, None)
        if x is None:
            return None
        extent = g.tensor(x).shape[-1]
        return f"{out} = {x} + torch.arange({extent}, {device})", [out]
    if kind in ("zeros", "ones"):
        return f"{out} = torch.{kind}({fmt(shape)}, dtype=torch.{dtype}, {device})", [out]
    if kind == "full":
        return f"{out} = torch.full({fmt(shape)}, {fmt(g.scalar())}, dtype=torch.{dtype}, " \
            f"{device})", [out]
    if kind == "eye":
        return f"{out} = torch.eye({g.choice([1, 3, 4])}, {device})", [out]
    if kind == "linspace":
        return f"{out} = torch.linspace(-1, 1, {g.choice([1, 4, 7])}, {device})", [out]
    if kind == "tensor":
        values = [g.choice([0, 1, 2, -3]) for _ in range(g.choice([1, 3, 4]))]
        return f"{out} = torch.tensor({fmt(values)}, dtype=torch.{dtype}, {device})", [out]
    x = g.operand(None, lambda: (shape, dtype))
    if kind in ("zeros_like", "ones_like"):
        return f"{out} = torch.{kind}({x})", [out]
    if kind == "full_like":
        return f"{out} = torch.full_like({x}, {fmt(g.scalar())})", [out]
    if kind == "new_zeros":
        return f"{out} = {x}.new_zeros({fmt(shape)})", [out]
    return f"{out} = {x}.new_full({fmt(shape)}, {fmt(g.scalar())})", [out]


def reshuffle(g):
    x = g.operand(lambda t: t.dim() >= 1, lambda: (g.shape(g.choice([1, 2, 3])), g.dtype()))
    if x is None:
        return None
    shape = _shape_of(g, x)
    rank = len(shape)
    dim = g.rng.randrange(rank)
    out = g.fresh()
    kind = g.choice(["pad", "pad", "pad_mode", "flip", "roll", "repeat", "tril", "triu",
                     "repeat_interleave", "diff", "outer", "channels_last", "clone_t"])
    if kind == "pad":
        pads = [g.choice([0, 1, 2, -1]) for _ in range(2 * g.rng.randint(1, rank))]
        return f"{out} = F.pad({x}, {fmt(pads)}, value={fmt(g.scalar())})", [out]
    if kind == "pad_mode" and rank >= 2 and g.tensor(x).is_floating_point():
        mode = g.choice(["reflect", "replicate", "circular"])
        pads = [g.choice([0, 1]) for _ in range(2)]
        return f"{out} = F.pad({x}, {fmt(pads)}, mode='{mode}')", [out]
    if kind == "flip":
        dims = g.rng.sample(range(rank), g.rng.randint(1, rank))
        return f"{out} = torch.flip({x}, {fmt(dims)})", [out]
    if kind == "roll":
        return f"{out} = torch.roll({x}, {g.choice([1, -2, 3])}, {dim})", [out]
    if kind == "repeat":
        reps = [g.choice([1, 1, 2, 3]) for _ in range(rank + g.choice([0, 0, 1]))]
        return f"{out} = {x}.repeat({fmt(reps)})", [out]
    if kind in ("tril", "triu") and rank >= 2:
        return f"{out} = torch.{kind}({x}, {g.choice([0, 1, -1])})", [out]
    if kind == "repeat_interleave":
        return f"{out} = {x}.repeat_interleave({g.choice([1, 2, 3])}, {dim})", [out]
    if kind == "diff":
        return f"{out} = torch.diff({x}, dim={dim})", [out]
    if kind == "outer" and rank == 1:
        other = g.operand(lambda t: t.dim() == 1, lambda: ((g.choice([1, 3, 4]),), g.dtype()))
        return f"{out} = torch.outer({x}, {other})", [out]
    if kind == "channels_last" and rank == 4:
        return f"{out} = {x}.contiguous(memory_format=torch.channels_last)", [out]
    if kind == "clone_t" and rank >= 2:
        return f"{out} = {x}.transpose(0, 1).clone()", [out]
    return None


MEMORY_FAMILIES = {
    "view": (16, view),
    "inplace": (14, inplace),
    "concat": (4, concat),
    "indexing": (7, indexing),
    "constant": (3, constant),
    "reshuffle": (4, reshuffle),
}
