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
  chooses) as its elements in memory order, a flat view the offsets count into; an owner
  with gaps (`r[:, ::2]`) as a row-major copy, where the elements read are evenly spaced in
  it and nothing writes into it afterwards.
  A write through `as_strided` becomes `as_strided_scatter` into the owner's value at eager's
  offset: rebased onto the owner where that value sits as eager's does (the owner not
  written before, or contiguous from offset 0); elsewhere, for writes into storage between
  or around the owner's elements, and for reads of storage outside a tensor the graph
  writes, the graph runs as is.
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
from torch.fx.experimental.symbolic_shapes import statically_known_true

from inductor.aliasing import (UnsupportedGraph, aliased_argument, memory_root,
                               write_targets)

aten = torch.ops.aten

_INPUT_OPS = ("placeholder", "get_attr")


def rewrite_views(gm: torch.fx.GraphModule, rebuilt: frozenset = frozenset()) -> None:
    """Edit `gm` (see the module docstring); raise `UnsupportedGraph` where the functional
    form cannot express a view (an `as_strided` reading around a tensor the graph writes).
    `rebuilt`: output positions the caller rebuilds as views after the call (the graph's
    value there is not read)."""
    _refuse_input_metadata_writes(gm)
    if any(node.target is aten.as_strided.default for node in gm.graph.nodes):
        # Reads nobody uses are no reason to run as is (seed 12389: a dead `logical_and` of an
        # `unfold` of a written input); writes and random ops are impure and stay.
        gm.graph.eliminate_dead_code()
    written = {memory_root(target)[0] for target in write_targets(gm)
               if isinstance(target, torch.fx.Node)}
    through = _written_through(gm)
    writes = _write_positions(gm)
    position = {node: index for index, node in enumerate(gm.graph.nodes)}
    output = next(node for node in gm.graph.nodes if node.op == "output")
    returned = {argument for place, argument in enumerate(output.args[0])
                if place not in rebuilt and isinstance(argument, torch.fx.Node)}
    # Owners as the graph stands: a rewritten `as_strided` reads a copy, not its views' owner.
    roots = {node: memory_root(node) for node in gm.graph.nodes}
    current: dict = {}    # memory owner -> the latest node that is that very tensor object
    changed = False
    for index, node in enumerate(list(gm.graph.nodes)):
        root, same_object = roots[node]
        if same_object:
            current[root] = node
        if node.op != "call_function":
            continue
        if node.target is aten.expand.default:
            view = _expand_as_view(gm.graph, node)
            if view is not None:
                roots[view], changed = roots[node], True
        elif node.target is aten.as_strided.default and node in through:
            root = roots[node.args[0]][0]
            # Whether the owner is unwritten when the first write *through* this view lands
            # (seed 33544: `v = a0.unfold(...)`, then `a0.scatter_add_(...)`, then
            # `v.copy_(...)`: the view comes before the owner's first write, its write after).
            through_at = _first_write_through(node, position)
            first = all(write >= through_at for write in writes.get(root, []))
            changed = _write_through_as_strided(node, root, current, first) or changed
        elif node.target is aten.as_strided.default and not _read(node, returned) and \
                _unread_as_strided(node, roots[node.args[0]][0]):
            changed = True
        elif node.target is aten.as_strided.default:
            later = any(index < write < _last_read(node, position, returned)
                        for write in writes.get(roots[node.args[0]][0], []))
            changed = _as_strided_on_owner(gm.graph, node, roots[node.args[0]][0], written,
                                           current, later) or changed
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()


def _write_positions(gm: torch.fx.GraphModule) -> dict:
    """Memory owner -> the positions (in graph order) of the nodes writing into it."""
    writes: dict = {}
    for index, node in enumerate(gm.graph.nodes):
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        for place, argument in enumerate(schema.arguments):
            value = node.args[place] if place < len(node.args) else \
                node.kwargs.get(argument.name)
            if argument.alias_info is not None and argument.alias_info.is_write \
                    and isinstance(value, torch.fx.Node):
                writes.setdefault(memory_root(value)[0], []).append(index)
    return writes


def _first_write_through(node: torch.fx.Node, position: dict) -> int:
    """The position of the first node writing into `node`'s memory through `node` or a view
    of it (the position of `node` where nothing does)."""
    first = None
    for user in node.users:
        source, writes = aliased_argument(user)
        if source is node:
            at = position[user] if writes else _first_write_through(user, position)
            if writes or at != position[user]:
                first = at if first is None else min(first, at)
        elif _writes_argument(user, node):
            first = position[user] if first is None else min(first, position[user])
    return position[node] if first is None else first


def _writes_argument(user: torch.fx.Node, node: torch.fx.Node) -> bool:
    """Whether `user` writes into its argument `node` (a mutable schema's written argument)."""
    schema = getattr(user.target, "_schema", None)
    if user.op != "call_function" or schema is None or not schema.is_mutable:
        return False
    for place, argument in enumerate(schema.arguments):
        value = user.args[place] if place < len(user.args) else user.kwargs.get(argument.name)
        if value is node and argument.alias_info is not None and argument.alias_info.is_write:
            return True
    return False


def _last_read(node: torch.fx.Node, position: dict, returned: set) -> int:
    """The position of the last node reading `node`'s value, through views of it too; the
    output reads only the values in `returned`."""
    last = position.get(node, -1)
    for user in node.users:
        if aliased_argument(user)[0] is node:
            last = max(last, _last_read(user, position, returned))
        elif user.op != "output" or node in returned:
            last = max(last, position.get(user, last))
    return last


def _read(node: torch.fx.Node, returned: set) -> bool:
    """Whether the graph reads `node`'s value: a user that is no view of it, a view of it
    read, or the output where it is in `returned` (not an output the caller rebuilds)."""
    for user in node.users:
        if aliased_argument(user)[0] is node:
            if _read(user, returned):
                return True
        elif user.op != "output" or node in returned:
            return True
    return False


def _unread_as_strided(node: torch.fx.Node, root: torch.fx.Node) -> bool:
    """An `as_strided` whose value the graph never reads (dead, or an output the caller
    rebuilds as a view of its input after the call) needs no rebasing, and its reads of storage
    around a tensor the graph writes are no reason to run the graph as is (graph fuzzer seeds
    3540, 12389, 13797, 14413: dead; 5952, 19093: `as_strided(a2, ...)` returned, `a2`
    written after). Over an input it reads the input's storage at eager's offset (memory
    that exists: eager's `as_strided` checked it); a dead one is left to the dead-code pass.
    True: done (the graph changed); False: the usual rules decide (a returned view of an
    intermediate)."""
    if not _returned(node):
        return True
    if root.op not in _INPUT_OPS:
        return False
    example = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(example, torch.Tensor):
        return False
    offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
    absolute = int(example.storage_offset()) if offset is None else int(offset)
    node.args = (root, [int(extent) for extent in node.args[1]],
                 [int(step) for step in node.args[2]], absolute)
    node.kwargs = {}
    return True


def _returned(node: torch.fx.Node) -> bool:
    """Whether `node`, or a view of it, is an output of the graph."""
    return any(user.op == "output" or (aliased_argument(user)[0] is node and _returned(user))
               for user in node.users)


def _written_through(gm: torch.fx.GraphModule) -> set:
    """The nodes some write reaches memory through: its target and the views it came from."""
    through: set = set()
    for target in write_targets(gm):
        node = target
        while isinstance(node, torch.fx.Node) and node not in through:
            through.add(node)
            node = aliased_argument(node)[0]
    return through


def _write_through_as_strided(node: torch.fx.Node, root: torch.fx.Node, current: dict,
                              first_write: bool) -> bool:
    """A write through `as_strided` is functionalized as `as_strided_scatter` into the owner's
    value, at eager's offset: right where that value sits as eager's tensor does (the owner
    not written before: the input, or the op that made it; contiguous from offset 0, as the
    values of scatters are: a transposed input written through a slice first was not).
    Applied to a view, it is rebased onto the owner (functionalization refuses a view's
    `as_strided`)."""
    owner = current.get(root, root)
    owned, example = owner.meta.get("val"), node.args[0].meta.get("val")
    as_laid_out = first_write or (isinstance(owned, torch.Tensor) and owned.is_contiguous()
                                  and int(owned.storage_offset()) == 0)
    if not as_laid_out or not isinstance(example, torch.Tensor) \
            or not isinstance(owned, torch.Tensor) or owned.dtype != example.dtype:
        raise UnsupportedGraph("the graph writes through `as_strided` (or `unfold`) into a "
                               "tensor written before and not contiguous from its storage's "
                               "start")
    offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
    absolute = int(example.storage_offset()) if offset is None else int(offset)
    if not _among_elements(node.args[1], node.args[2], absolute, owned):
        # Graph fuzzer seed 32108: `as_strided(r[::3], [2], [2], 32).zero_()` writes storage
        # between the input's elements; the owner's new value holds only its elements.
        raise UnsupportedGraph("the graph writes through `as_strided` into storage outside "
                               "the tensor's own elements")
    if node.args[0] is owner:
        return False
    node.args = (owner, list(node.args[1]), list(node.args[2]), absolute)
    node.kwargs = {}
    return True


def _refuse_input_metadata_writes(gm: torch.fx.GraphModule) -> None:
    """An in-place view op (`t_`, `squeeze_`, `as_strided_`) on an input changes the caller's
    tensor's shape or strides, which the compiled graph cannot do."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) \
                and torch.Tag.inplace_view in node.target.tags \
                and memory_root(node)[0].op in _INPUT_OPS:
            raise UnsupportedGraph(f"the graph changes an input's shape or strides in place "
                                   f"({node.target.overloadpacket.__name__})")


def _expand_as_view(graph: torch.fx.Graph, node: torch.fx.Node):
    """Replace an `expand` that broadcasts nothing by views (see the module docstring);
    return the last of them (carrying the expand's example value), or None."""
    source = node.args[0]
    value, old = node.meta.get("val"), getattr(source, "meta", {}).get("val")
    if not isinstance(value, torch.Tensor) or not isinstance(old, torch.Tensor):
        return None
    new, old = list(value.shape), list(old.shape)
    lead = len(new) - len(old)
    padded = [1] * lead + old
    if lead < 0 or any(not _equal(want, have) and not (_equal(have, 1) and (
            _equal(want, 0) or _equal(want, 1))) for want, have in zip(new, padded)):
        return None
    with graph.inserting_before(node):
        view = graph.call_function(aten.alias.default, (source,))
        for _ in range(lead):
            view = graph.call_function(aten.unsqueeze.default, (view, 0))
        for dim, (want, have) in enumerate(zip(new, padded)):
            if _equal(want, 0) and _equal(have, 1):
                view = graph.call_function(aten.slice.Tensor, (view, dim, 0, 0))
    view.meta["val"] = value
    node.replace_all_uses_with(view)
    graph.erase_node(node)
    return view


def _equal(a, b) -> bool:
    """Whether two sizes are equal for every size the graph serves (symbolic sizes: adding
    no guard, False where not known)."""
    return bool(statically_known_true(a == b))


def _as_strided_on_owner(graph: torch.fx.Graph, node: torch.fx.Node, root: torch.fx.Node,
                         written: set, current: dict, written_later: bool) -> bool:
    """Point an `as_strided` at the memory it reads, that of `root` (see the module
    docstring)."""
    view = node.args[0]
    size, stride = [int(extent) for extent in node.args[1]], [int(step) for step in node.args[2]]
    offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
    example = view.meta.get("val") if isinstance(view, torch.fx.Node) else None
    if not isinstance(example, torch.Tensor):
        return False
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
    elif _dense(owned) and _reads_within(size, stride, absolute, owned):
        order = sorted(range(owned.dim()), key=lambda dim: -int(owned.stride(dim)))
        with graph.inserting_before(node):
            flat = owner
            if order != list(range(owned.dim())):
                flat = graph.call_function(aten.permute.default, (flat, order))
            flat = graph.call_function(aten.view.default, (flat, [-1]))
        # Relative to the flat view: functionalization applies the offset to its value, a
        # fresh copy that starts at 0.
        node.args = (flat, size, stride, absolute - int(owned.storage_offset()))
    else:
        # A copy: right while no write into the owner comes between it and its last reader.
        logical = None if written_later else _logical_read(size, stride, absolute, owned)
        if logical is None:
            raise UnsupportedGraph("the graph reads, through `as_strided`, storage around a "
                                   "tensor it writes (elements outside the tensor's own, or "
                                   "of a tensor with gaps that a write changes before a read)")
        with graph.inserting_before(node):
            copy = graph.call_function(aten.clone.default, (owner,),
                                       {"memory_format": torch.contiguous_format})
            flat = graph.call_function(aten.view.default, (copy, [-1]))
        node.args = (flat, size, *logical)
    node.kwargs = {}
    return True


_ENUMERATED = 1 << 22   # elements `_logical_read` lists at most (an as_strided, its owner)


def _logical_read(size: list, stride: list, offset: int, owned: torch.Tensor):
    """(strides, offset) over `owned`'s elements in row-major order that pick the elements
    `as_strided(size, stride, offset)` reads from its storage, or None where one of those is
    not an element of `owned` or they are not evenly spaced in it (an owner with gaps,
    `r[:, ::2]`: its memory is not one run, but a window that steps over the gaps reads only
    its elements)."""
    count, elements = _product(size), owned.numel()
    if count == 0:
        return [0] * len(size), 0
    if count > _ENUMERATED or elements > _ENUMERATED or elements == 0:
        return None
    owner_positions = _positions(owned.shape, owned.stride(), owned.storage_offset())
    ordered, logical_of = owner_positions.sort()
    reads = _positions(size, stride, offset)
    found = torch.searchsorted(ordered, reads).clamp(max=elements - 1)
    if not bool((ordered[found] == reads).all()):
        return None
    logical = logical_of[found].reshape(size)
    start = int(logical.reshape(-1)[0])
    steps = [int(logical.narrow(dim, 1, 1).reshape(-1)[0]) - start if extent > 1 else 0
             for dim, extent in enumerate(size)]
    if any(step < 0 for step in steps) or \
            not torch.equal(_positions(size, steps, start), logical.reshape(-1)):
        return None
    return steps, start


def _among_elements(size, stride, offset: int, owned: torch.Tensor) -> bool:
    """Whether every storage position `as_strided(size, stride, offset)` covers is one of
    `owned`'s elements (an owner too large to enumerate counts only where dense)."""
    size, stride = [int(extent) for extent in size], [int(step) for step in stride]
    if _product(size) == 0 or _reads_within(size, stride, offset, owned):
        return True
    if _product(size) > _ENUMERATED or owned.numel() > _ENUMERATED or owned.numel() == 0:
        return False
    ordered = _positions(owned.shape, owned.stride(), owned.storage_offset()).sort().values
    reads = _positions(size, stride, offset)
    found = torch.searchsorted(ordered, reads).clamp(max=owned.numel() - 1)
    return bool((ordered[found] == reads).all())


def _positions(size, stride, offset: int) -> torch.Tensor:
    """The storage positions a tensor of this geometry covers, in row-major order."""
    positions = torch.tensor(int(offset), dtype=torch.int64)
    for extent, step in zip(size, stride):
        positions = positions.unsqueeze(-1) + torch.arange(int(extent)) * int(step)
    return positions.reshape(-1)


def _product(values) -> int:
    result = 1
    for value in values:
        result *= int(value)
    return result


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
