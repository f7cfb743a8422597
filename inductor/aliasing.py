"""Stage "decompose" (memory facts): which values of an ATen graph share memory.

Input: the decomposed, not yet functionalized ATen graph (`make_fx` output: views are view
ops, in-place ops write into their first argument) and the values of its placeholders. Output:
the facts `decompose.trace_aten` and the runtime wrapper need: per output, the input or output
it aliases (`OutputAlias`, found by data flow: back through view ops and in-place ops to the
node that owns the memory, so neither storage identity nor the aliasing of the example inputs
can mislead it), and whether an in-place op writes into memory the functional form cannot
express (an input sharing its storage with another, a view whose elements overlap).
"""
from __future__ import annotations

import dataclasses
import operator
import torch
import torch.fx


class UnsupportedGraph(Exception):
    """The graph cannot be compiled (e.g. unpaired autocast regions, symbolic inputs); the
    caller runs it as is, which is always correct."""


class SharedInputWrites(UnsupportedGraph):
    """The graph writes into an input that shares its memory with another input (views of
    one tensor passed separately): functionalization would treat them as independent. The
    caller runs it as is for that sharing of storages."""


@dataclasses.dataclass
class OutputAlias:
    """An output that, in eager, is a view of a graph input or of an earlier output."""

    base_kind: str          # "input" (index into constants + user inputs) or "output"
    base_index: int
    size: tuple
    stride: tuple
    storage_offset: int     # relative to the base's storage offset
    same_object: bool       # the very base object is returned (in-place ops led to it)



def storage_of(value):
    return value.untyped_storage()._cdata if isinstance(value, torch.Tensor) else None


def writes_into_shared_inputs(gm: torch.fx.GraphModule, values: list) -> bool:
    """Whether an in-place op writes into the memory of a placeholder whose value (in
    `values`, one per placeholder: lifted constants, then the inputs) shares its storage with
    another placeholder's (views of one tensor passed separately, or an input that is a
    tensor the graph also holds: functionalization would not see the write through the other
    one). Writes into intermediates (T5's `add_`) are fine; a written value without a
    recorded example counts as shared."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    groups: dict = {}
    for node, value in zip(placeholders, values):
        if isinstance(value, torch.Tensor):
            groups.setdefault(value.untyped_storage()._cdata, []).append(node)
    shared = {node for members in groups.values() if len(members) > 1 for node in members}
    if not shared:
        return False
    shared_storages = {storage_of(node.meta.get("val")) for node in shared} - {None}
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        for position, argument in enumerate(schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            value = node.args[position] if position < len(node.args) else \
                node.kwargs.get(argument.name)
            if not isinstance(value, torch.fx.Node):
                return True
            storage = storage_of(value.meta.get("val"))
            if memory_root(value)[0] in shared or storage is None or storage in shared_storages:
                return True
    return False


def _may_overlap(value) -> bool:
    """Whether two elements of a tensor may share a memory location (True where unsure):
    sorted by stride, each dimension must step past everything the smaller ones span."""
    dims = sorted((int(stride), int(size)) for size, stride in zip(value.shape, value.stride())
                  if int(size) > 1)
    span = 0
    for stride, size in dims:
        if stride <= span:
            return True
        span += (size - 1) * stride
    return False


def write_targets(gm: torch.fx.GraphModule):
    """The nodes in-place ops write into."""
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        for position, argument in enumerate(schema.arguments):
            if argument.alias_info is not None and argument.alias_info.is_write:
                yield node.args[position] if position < len(node.args) else \
                    node.kwargs.get(argument.name)


def writes_into_overlapping_memory(gm: torch.fx.GraphModule) -> bool:
    """Whether an in-place op writes through a view (or into an input) some of whose elements
    share a memory location: eager writes them one after another into one place, while the
    functional graph computes them apart and inverts the view (an expanded input accumulated
    into by `index_put_`, a `fill_` through overlapping `unfold` windows)."""
    for target in write_targets(gm):
        node = target
        while isinstance(node, torch.fx.Node):
            value = node.meta.get("val")
            if isinstance(value, torch.Tensor) and _may_overlap(value):
                return True
            node = _aliased_argument(node)[0]
    return False



def observable_outputs(decomposed: torch.fx.GraphModule):
    """Per flat output: how it aliases placeholders or other outputs (found by data flow:
    through view ops and in-place ops back to the node that owns the memory), and its eager
    strides. Outputs that view one intermediate the graph does not return get that
    intermediate as a hidden extra output to rebuild them from; returns (aliases, strides,
    hidden count), with `decomposed`'s output node extended by the hidden bases."""
    placeholders = [node for node in decomposed.graph.nodes if node.op == "placeholder"]
    output_node = next(node for node in decomposed.graph.nodes if node.op == "output")
    arguments = list(output_node.args[0])
    values = [arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg
              for arg in arguments]
    aliases: list = [None] * len(values)
    strides = [tuple(value.stride()) if isinstance(value, torch.Tensor) else None
               for value in values]
    by_root: dict = {}
    same: dict = {}    # position -> whether it is its root's very object
    for position, (argument, value) in enumerate(zip(arguments, values)):
        if not isinstance(value, torch.Tensor) or not isinstance(argument, torch.fx.Node) \
                or value.is_neg() or value.is_conj():
            continue  # a lazily negated/conjugated view: as_strided would drop the bit
        root, same_object = memory_root(argument)
        same[position] = same_object
        if root is argument and root.op != "placeholder":
            by_root.setdefault(root, []).append(position)
            continue
        base = root.meta.get("val")
        if not isinstance(base, torch.Tensor) or storage_of(base) != storage_of(value):
            continue
        if base.dtype != value.dtype:   # as_strided on the base would keep its dtype
            if root.op == "placeholder":
                raise UnsupportedGraph("an output views an input's memory with another dtype")
            continue    # a view of an intermediate: computed on its own
        if root.op == "placeholder":
            aliases[position] = _alias(value, "input", placeholders.index(root), base,
                                       same_object)
        else:
            by_root.setdefault(root, []).append(position)
    hidden = []
    for root, positions in by_root.items():
        if len(positions) < 2 and arguments[positions[0]] is not root:
            continue   # one view of an intermediate: the code generator returns it as is
        base_position = next((position for position in positions
                              if arguments[position] is root), None)
        if base_position is None:
            if len(positions) < 2:
                continue
            base_position = len(arguments) + len(hidden)
            hidden.append(root)
            strides.append(tuple(root.meta["val"].stride()))
        base = root.meta["val"]
        for position in positions:
            if position != base_position:
                aliases[position] = _alias(values[position], "output", base_position, base,
                                           same[position])
    if hidden:
        output_node.args = (arguments + hidden,)
        decomposed.recompile()
    return aliases, strides, len(hidden)


def _alias(value, kind: str, index: int, base, same_object: bool) -> OutputAlias:
    return OutputAlias(kind, index, tuple(value.shape), tuple(value.stride()),
                       int(value.storage_offset()) - int(base.storage_offset()), same_object)


def _aliased_argument(node: torch.fx.Node):
    """(the argument node whose memory `node`'s result is, whether the op writes into it),
    or (None, False) for ops returning fresh memory."""
    if node.op != "call_function":
        return None, False
    if node.target is operator.getitem:
        parent = node.args[0]
        source, writes = _aliased_argument(parent) if isinstance(parent, torch.fx.Node) \
            else (None, False)
        return source, False
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.returns or schema.returns[0].alias_info is None:
        return None, False
    # A list of views (`split`, `unbind`: `Tensor(a)[]`) carries its set on the elements,
    # which the schema does not expose: then the argument annotated `(a -> *)` is the source.
    alias_set = schema.returns[0].alias_info.before_set
    for position, argument in enumerate(schema.arguments):
        info = argument.alias_info
        if info is None or (alias_set and info.before_set != alias_set):
            continue
        value = node.args[position] if position < len(node.args) \
            else node.kwargs.get(argument.name)
        if isinstance(value, torch.fx.Node):
            return value, bool(info.is_write)
    return None, False


def memory_root(node: torch.fx.Node):
    """(the node whose memory `node`'s value is, following views and in-place ops back to a
    placeholder or an op returning fresh memory; whether only in-place ops led there, so the
    value is that very tensor object)."""
    same_object = True
    while True:
        source, writes = _aliased_argument(node)
        if source is None:
            return node, same_object
        same_object = same_object and writes
        node = source
