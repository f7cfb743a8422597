"""Stage "decompose" (before functionalization): views its functional form would get wrong.

Input: the decomposed ATen graph of a graph that writes somewhere (`make_fx` output: views
are view ops, in-place ops write into their first argument), about to be functionalized.
Output: the same graph, edited in place so that each view computes what eager computes once
functionalization replaces views by copies (`*_copy` ops: fresh, contiguous tensors) and
writes through views by their inverses:

- `as_strided` reads its input's *storage*, not its elements: over a copy of a view it read
  past the copy's end (graph fuzzer class 24: `a0.narrow(1, 1, 3).unfold(1, 2, 2)` after any
  write in the graph). It is rebased onto the tensor owning the memory: an input nothing
  writes into is read directly, at the absolute offset; any other owner (an intermediate, or
  an input the graph writes into, whose new value is a fresh tensor laid out as the graph
  chooses) as its elements in memory order, a flat view the offsets count into.
  A write through `as_strided` becomes `as_strided_scatter` into the owner's value at eager's
  offset: kept where that value sits as eager's does (the owner itself, dense from offset 0);
  elsewhere, and for reads of storage outside a tensor the graph writes, the graph runs as is.
- An `expand` that broadcasts nothing (same shape, new leading size-1 dims) is inverted by
  functionalization with arithmetic, `base + (new - base)`: NaN where `base` held inf,
  rounding, and an error for bools (class 25). It becomes the view it is: `alias`,
  `unsqueeze`, and an empty `slice` where a size-1 dim expands to size 0.
- An in-place view op (`t_`, `squeeze_`) on an input changes the caller's tensor's metadata,
  which the compiled graph cannot: the graph runs as is.
"""
from __future__ import annotations

import torch
import torch.fx

from inductor.aliasing import (UnsupportedGraph, aliased_argument, memory_root,
                               write_targets)

aten = torch.ops.aten

_INPUT_OPS = ("placeholder", "get_attr")


def rewrite_views(gm: torch.fx.GraphModule) -> None:
    """Edit `gm` (see the module docstring); raise `UnsupportedGraph` where the functional
    form cannot express a view (an `as_strided` reading around a tensor the graph writes)."""
    _refuse_input_metadata_writes(gm)
    written = {memory_root(target)[0] for target in write_targets(gm)
               if isinstance(target, torch.fx.Node)}
    through = _written_through(gm)
    current: dict = {}    # memory owner -> the latest node that is that very tensor object
    changed = False
    for node in list(gm.graph.nodes):
        root, same_object = memory_root(node)
        if same_object:
            current[root] = node
        if node.op != "call_function":
            continue
        if node.target is aten.expand.default:
            changed = _expand_as_view(gm.graph, node) or changed
        elif node.target is aten.as_strided.default and node in through:
            _check_write_through_as_strided(node, current)
        elif node.target is aten.as_strided.default:
            changed = _as_strided_on_owner(gm.graph, node, written, current) or changed
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()


def _written_through(gm: torch.fx.GraphModule) -> set:
    """The nodes some write reaches memory through: its target and the views it came from."""
    through: set = set()
    for target in write_targets(gm):
        node = target
        while isinstance(node, torch.fx.Node) and node not in through:
            through.add(node)
            node = aliased_argument(node)[0]
    return through


def _check_write_through_as_strided(node: torch.fx.Node, current: dict) -> None:
    """A write through `as_strided` is functionalized as `as_strided_scatter` into the owner's
    value, at eager's offset: right only where that value sits as eager's tensor does (dense
    from offset 0, the layout a computed value keeps) and `as_strided` is applied to the
    owner itself (functionalization refuses it on a view of a view)."""
    view = node.args[0]
    root, same_object = memory_root(view)
    owned = current.get(root, root).meta.get("val")
    if not same_object or not isinstance(owned, torch.Tensor) \
            or int(owned.storage_offset()) != 0 or not _dense(owned):
        raise UnsupportedGraph("the graph writes through `as_strided` (or `unfold`) of a view, "
                               "or of a tensor not laid out densely from its storage's start")


def _refuse_input_metadata_writes(gm: torch.fx.GraphModule) -> None:
    """An in-place view op (`t_`, `squeeze_`, `as_strided_`) on an input changes the caller's
    tensor's shape or strides, which the compiled graph cannot do."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) \
                and torch.Tag.inplace_view in node.target.tags \
                and memory_root(node)[0].op in _INPUT_OPS:
            raise UnsupportedGraph(f"the graph changes an input's shape or strides in place "
                                   f"({node.target.overloadpacket.__name__})")


def _expand_as_view(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
    """Replace an `expand` that broadcasts nothing by views (see the module docstring)."""
    source = node.args[0]
    value, old = node.meta.get("val"), getattr(source, "meta", {}).get("val")
    if not isinstance(value, torch.Tensor) or not isinstance(old, torch.Tensor):
        return False
    new, old = [int(extent) for extent in value.shape], [int(extent) for extent in old.shape]
    lead = len(new) - len(old)
    padded = [1] * lead + old
    if lead < 0 or any(want != have and not (have == 1 and want in (0, 1))
                       for want, have in zip(new, padded)):
        return False
    with graph.inserting_before(node):
        view = graph.call_function(aten.alias.default, (source,))
        for _ in range(lead):
            view = graph.call_function(aten.unsqueeze.default, (view, 0))
        for dim, (want, have) in enumerate(zip(new, padded)):
            if want == 0 and have == 1:
                view = graph.call_function(aten.slice.Tensor, (view, dim, 0, 0))
    node.replace_all_uses_with(view)
    graph.erase_node(node)
    return True


def _as_strided_on_owner(graph: torch.fx.Graph, node: torch.fx.Node, written: set,
                         current: dict) -> bool:
    """Point an `as_strided` at the memory it reads (see the module docstring)."""
    view = node.args[0]
    size, stride = list(node.args[1]), list(node.args[2])
    offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
    example = view.meta.get("val") if isinstance(view, torch.fx.Node) else None
    if not isinstance(example, torch.Tensor):
        return False
    root = memory_root(view)[0]
    if root is view and root not in written:
        return False    # functional: the same tensor, laid out as eager lays it out
    absolute = int(example.storage_offset()) if offset is None else int(offset)
    owner = current.get(root, root)
    owned = owner.meta.get("val")
    if not isinstance(owned, torch.Tensor) or owned.dtype != example.dtype:
        raise UnsupportedGraph("the graph reads memory through `as_strided` of a view of "
                               "another dtype")
    if root.op in _INPUT_OPS and root not in written:
        node.args = (root, size, stride, absolute)
        node.kwargs = {}
        return True
    start = int(owned.storage_offset())
    if not _reads_within(size, stride, absolute, owned):
        raise UnsupportedGraph("the graph reads, through `as_strided`, storage around a "
                               "tensor it writes (elements outside the tensor's own)")
    order = sorted(range(owned.dim()), key=lambda dim: -int(owned.stride(dim)))
    with graph.inserting_before(node):
        flat = owner
        if order != list(range(owned.dim())):
            flat = graph.call_function(aten.permute.default, (flat, order))
        flat = graph.call_function(aten.view.default, (flat, [-1]))
    # Relative to the flat tensor: functionalization applies the offset to its value, a
    # fresh copy that starts at 0.
    node.args = (flat, size, stride, absolute - start)
    node.kwargs = {}
    return True


def _reads_within(size: list, stride: list, offset: int, owned: torch.Tensor) -> bool:
    """Whether every element `as_strided(size, stride, offset)` reads lies among `owned`'s,
    which must fill one run of memory (dense, not overlapping)."""
    if any(int(extent) == 0 for extent in size):
        return True
    if not _dense(owned):
        return False
    start = int(owned.storage_offset())
    last = offset + sum((int(extent) - 1) * int(step) for extent, step in zip(size, stride))
    return start <= offset and last < start + owned.numel() \
        and all(int(step) >= 0 for step in stride)


def _dense(value: torch.Tensor) -> bool:
    """Whether `value`'s elements fill one run of memory, none twice (any order of dims)."""
    dims = sorted((int(value.stride(dim)), int(value.shape[dim])) for dim in range(value.dim())
                  if int(value.shape[dim]) > 1)
    expected = 1
    for step, extent in dims:
        if step != expected:
            return False
        expected *= extent
    return True
