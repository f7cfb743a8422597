"""Stage "decompose": writes into tensors the graph made itself, made functional in place.

Input: a decomposed ATen graph (make_fx's), possibly with in-place ops. Output: the same graph
where each write into a fresh intermediate that nothing else sees is its functional op
(`copy_(t, v)` -> `copy(t, v)`, `relu_(t)` -> `relu(t)`); the caller functionalizes only what
is left (`_mutates`), often nothing.

Why: torchvision's MobileNetV3 writes only into its own intermediates (`Hardswish(inplace=
True)`, `ReLU(inplace=True)`), yet any write sent the whole decomposed graph through a second
make_fx trace under `torch.func.functionalize`: about 40% of a symbolic compile of LR-ASPP
(193 ops), and over symbolic sizes that second trace asked size questions of its own
(`_affine`'s layout), so the compile fell back to one per size.

A write qualifies when it rewrites what functionalization would make of it, and nothing can
tell the difference: its target `t` is the sole result of an ATen op that returns a fresh
tensor (no placeholder, constant, view, or result of a write left in place), no op takes a
view of `t` or writes into it otherwise, and no node after the write reads `t` (make_fx's
graph reads the write's result from then on). `copy_` becomes `aten.copy` (the target's
dtype and layout, the source's values); another in-place op `op_` becomes `op` where `op`
returns a fresh tensor (not `squeeze_`/`unsqueeze_`/`t_`, whose functional forms are views:
matmul's 1-D @ 2-D decomposition squeezes its product in place), the target is floating
point and every other argument a real number, None, or a tensor of the target's dtype,
sizes and strides (then `op` keeps the target's dtype and, elementwise over dense tensors
laid out alike, its layout: `x += identity` of a residual block).
"""
from __future__ import annotations

import numbers

import torch
import torch.fx

aten = torch.ops.aten


def make_fresh_writes_functional(gm: torch.fx.GraphModule) -> int:
    """Rewrite the qualifying writes of `gm` (module docstring) in place; their count."""
    order = {node: position for position, node in enumerate(gm.graph.nodes)}
    count = 0
    for node in list(gm.graph.nodes):
        functional = _functional_form(node, order)
        if functional is None:
            continue
        with gm.graph.inserting_before(node):
            replacement = gm.graph.call_function(functional, node.args, dict(node.kwargs))
        replacement.meta = dict(node.meta)
        order[replacement] = order[node]
        node.replace_all_uses_with(replacement)
        gm.graph.erase_node(node)
        count += 1
    if count:
        gm.recompile()
    return count


def _functional_form(node: torch.fx.Node, order: dict):
    """The functional op replacing the write `node`, or None where it does not qualify."""
    schema = _schema(node)
    if schema is None or not schema.is_mutable or not node.args or node.kwargs:
        return None
    written = [index for index, argument in enumerate(schema.arguments)
               if argument.alias_info is not None and argument.alias_info.is_write]
    target = node.args[0]
    if written != [0] or not isinstance(target, torch.fx.Node) or \
            not _fresh(target) or not _sole_writer(target, node, order):
        return None
    if node.target is aten.copy_.default:
        return aten.copy.default
    value = target.meta.get("val")
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or \
            not all(_real_number(argument) or _same_geometry(argument, value)
                    for argument in node.args[1:]):
        return None
    name = schema.name.split("::")[-1]
    if not name.endswith("_") or name.endswith("__"):
        return None
    packet = getattr(aten, name[:-1], None)
    overload = getattr(packet, node.target._overloadname, None) if packet else None
    schema = _schema_of(overload) if overload is not None else None
    if schema is None or schema.is_mutable or \
            any(result.alias_info is not None for result in schema.returns):
        return None     # `squeeze_` -> `squeeze` would return a view where the write did not
    return overload


def _fresh(node: torch.fx.Node) -> bool:
    """`node` is the sole result of an ATen op returning a new tensor (no alias, no write)."""
    schema = _schema(node)
    if schema is None or schema.is_mutable or len(schema.returns) != 1:
        return False
    return schema.returns[0].alias_info is None and \
        isinstance(node.meta.get("val"), torch.Tensor)


def _sole_writer(target: torch.fx.Node, write: torch.fx.Node, order: dict) -> bool:
    """No user of `target` but `write` views or writes it, and none comes after `write`."""
    for user in target.users:
        if user is write:
            continue
        if order.get(user, -1) > order[write] or user.op != "call_function":
            return False
        schema = _schema(user)
        if schema is None or schema.is_mutable or \
                any(result.alias_info is not None for result in schema.returns):
            return False
    return True


def _same_geometry(argument, value: torch.Tensor) -> bool:
    """`argument` is a node of a tensor of `value`'s dtype, sizes and strides, compared as
    expressions (no size question asked)."""
    other = argument.meta.get("val") if isinstance(argument, torch.fx.Node) else None
    if not isinstance(other, torch.Tensor) or other.dtype != value.dtype or \
            other.dim() != value.dim():
        return False
    return all(_expression(first) == _expression(second) for first, second in
               zip((*other.shape, *other.stride()), (*value.shape, *value.stride())))


def _expression(size):
    return size.node.expr if isinstance(size, torch.SymInt) else size


def _real_number(argument) -> bool:
    return argument is None or (isinstance(argument, numbers.Real) and
                                not isinstance(argument, torch.fx.Node))


def _schema(node: torch.fx.Node):
    return _schema_of(node.target) if node.op == "call_function" else None


def _schema_of(target):
    if isinstance(target, torch._ops.OpOverload) and target.namespace == "aten":
        return target._schema
    return None
