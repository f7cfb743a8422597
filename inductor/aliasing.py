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
from typing import Optional

import torch
import torch.fx

from inductor.symbolic_overlap import (is_symbolic, known, may_overlap_symbolic,
                                      overlaps_as_argument,
                                      partly_overlap_symbolic)


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
    size: tuple             # ints, or SymInts for a graph traced with symbolic sizes
    stride: tuple
    storage_offset: int     # relative to the base's storage offset (or a SymInt)
    same_object: bool       # the very base object is returned (in-place ops led to it)
    detached: bool = False  # eager's is no view but a `detach()` of it (no autograd history)
    # eager's `_base` is a tensor the graph does not return, a `detach()` of the base (or of a
    # view of it): (that tensor's key among the outputs, None where it is laid out as the
    # base, else (its size, stride, storage offset relative to the base's)); the view is
    # rebuilt over one such tensor made per call
    detached_base: Optional[tuple] = None



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
    sorted by stride, each dimension must step past everything the smaller ones span (over
    symbolic sizes: `symbolic_overlap.may_overlap_symbolic`)."""
    if is_symbolic(value):
        return may_overlap_symbolic(value)
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


def written_placeholders(gm: torch.fx.GraphModule) -> set:
    """Positions of the placeholders whose memory an in-place op writes (through any view of
    it); every placeholder where a write's target is unknown."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    storages = set()
    for target in write_targets(gm):
        storage = storage_of(target.meta.get("val")) \
            if isinstance(target, torch.fx.Node) else None
        if storage is None:
            return set(range(len(placeholders)))
        storages.add(storage)
    return {position for position, node in enumerate(placeholders)
            if storage_of(node.meta.get("val")) in storages}


def reads_written_memory_partly(gm: torch.fx.GraphModule) -> bool:
    """Whether an in-place op reads, through another argument, memory it writes laid out
    otherwise (`y += y.t()`): eager's kernels refuse a partial overlap ("some elements of the
    input tensor and the written-to tensor refer to a single memory location") or read
    elements already written, while the functional graph reads them all before writing. The
    same node, or one view of the very elements, is a full overlap, which eager computes."""
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        written, read = [], []
        for position, argument in enumerate(schema.arguments):
            value = node.args[position] if position < len(node.args) else \
                node.kwargs.get(argument.name)
            values = value if isinstance(value, (list, tuple)) else [value]
            target = written if argument.alias_info is not None and \
                argument.alias_info.is_write else read
            target.extend(item for item in values if isinstance(item, torch.fx.Node))
        for out in written:
            root = memory_root(out)[0]
            if any(other is not out and memory_root(other)[0] is root and
                   _partly_overlap(out.meta.get("val"), other.meta.get("val"))
                   for other in read):
                return True
    return False


def _partly_overlap(a, b) -> bool:
    """Two views of one memory whose element ranges meet without being the same elements
    in the same layout (True where unsure)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return False
    if is_symbolic(a) or is_symbolic(b):
        return partly_overlap_symbolic(a, b)
    if a.numel() == 0 or b.numel() == 0:
        return False
    if a.dtype != b.dtype:
        return True
    if (tuple(a.shape), tuple(a.stride()), int(a.storage_offset())) == \
            (tuple(b.shape), tuple(b.stride()), int(b.storage_offset())):
        return False
    (a_start, a_end), (b_start, b_end) = _extent(a), _extent(b)
    if not (a_start < b_end and b_start < a_end):
        return False
    if _dense(a) and _dense(b):
        return True     # eager's own test: it raises
    return _share_elements(a, b)    # eager computes; in order where elements are shared


def _dense(value) -> bool:
    """Whether the elements fill a memory range without gaps or overlap, in some order of
    the dimensions (eager's `is_non_overlapping_and_dense`)."""
    expected = 1
    for stride, size in sorted((int(stride), int(size)) for size, stride in
                               zip(value.shape, value.stride()) if int(size) != 1):
        if stride != expected:
            return False
        expected *= size
    return True


_ENUMERATED = 1 << 20   # elements whose memory offsets are compared one by one, at most


def _share_elements(a, b) -> bool:
    """Whether two strided views reach a common memory element (True where too large to
    enumerate): `x[:, 0] += x[:, 1]` reads and writes apart."""
    if a.numel() > _ENUMERATED or b.numel() > _ENUMERATED:
        return True
    return bool(torch.isin(_offsets(a), _offsets(b)).any())


def _offsets(value) -> torch.Tensor:
    offsets = torch.tensor(int(value.storage_offset()), dtype=torch.int64)
    for dim, (size, stride) in enumerate(zip(value.shape, value.stride())):
        step = torch.arange(int(size), dtype=torch.int64) * int(stride)
        offsets = offsets.unsqueeze(-1) + step
    return offsets.flatten()


def _extent(value: torch.Tensor) -> tuple:
    start = int(value.storage_offset())
    return start, start + 1 + sum((int(size) - 1) * abs(int(stride))
                                  for size, stride in zip(value.shape, value.stride()))


def writes_into_overlapping_memory(gm: torch.fx.GraphModule) -> bool:
    """Whether an in-place op writes through a view (or into an input) some of whose elements
    share a memory location: eager writes them one after another into one place, while the
    functional graph computes them apart and inverts the view (an expanded input accumulated
    into by `index_put_`, a `fill_` through overlapping `unfold` windows)."""
    for target in write_targets(gm):
        node = target
        while isinstance(node, torch.fx.Node):
            value = node.meta.get("val")
            if isinstance(value, torch.Tensor) and not (
                    is_symbolic(value) and overlaps_as_argument(node, *aliased_argument(node))) \
                    and _may_overlap(value):
                return True
            node = aliased_argument(node)[0]
    return False



def observable_outputs(decomposed: torch.fx.GraphModule, eager: Optional[list] = None,
                       eager_inputs: Optional[list] = None):
    """Per flat output: how it aliases placeholders or other outputs (found by data flow:
    through view ops and in-place ops back to the node that owns the memory), and its
    strides. Outputs that view one intermediate the graph does not return get that
    intermediate as a hidden extra output to rebuild them from; returns (aliases, strides,
    hidden count), with `decomposed`'s output node extended by the hidden bases.

    `eager`: the torch-level graph's outputs on fake inputs (or None): strides are theirs,
    and views of one intermediate take their geometry from them where eager's base is the
    same tensor (`_eager_geometry`), else the decomposed graph's for the base and all its
    views alike (a view rebuilt over a base laid out otherwise read the wrong elements).
    `eager_inputs`: the placeholders' values in that run (None for lifted constants), which
    tell a view of an input from a view of a hidden `detach()` of it
    (`_views_of_hidden_detached`; over symbolic sizes only a `detach()` of the whole input)."""
    placeholders = [node for node in decomposed.graph.nodes if node.op == "placeholder"]
    output_node = next(node for node in decomposed.graph.nodes if node.op == "output")
    arguments = list(output_node.args[0])
    values = [arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg
              for arg in arguments]
    eager = eager if eager is not None and len(eager) == len(values) else None
    strides = [_strides(value, eager[position] if eager else None)
               for position, value in enumerate(values)]
    aliases, by_root, same = _classify(arguments, values, placeholders)
    twice = {alias.base_index for alias in aliases if alias is not None
             and alias.base_kind == "output"}   # positions returned again later
    hidden = []
    # A view returned twice: eager's one object has its base's memory even with no elements.
    # A lone view of an intermediate too: eager's has the whole base (`_base`, its storage
    # offset), as torch.compile keeps it; computing the view alone was P22.
    groups = {root: positions for root, positions in by_root.items()
              if len(positions) + len(twice.intersection(positions)) > 1
              or not same[positions[0]]}
    final = _final_objects(decomposed) if groups else {}
    replaced = False
    for root, positions in groups.items():
        base_position = next((position for position in positions if same[position]), None)
        base = final[root].meta["val"]    # the object after in-place ops (`squeeze_`) on it
        geometry = _eager_geometry(eager, positions, base, base_position)
        if base_position is None:
            root, base, base_position, geometry = _owner_as_eager(
                decomposed, final, root, eager, positions, values, arguments, geometry)
            replaced = replaced or base_position is not None
        if geometry is None and eager is not None and len(positions) == 1 and \
                not twice.intersection(positions) and \
                not _detached_over(eager[positions[0]], values[positions[0]], base):
            continue    # a lone view eager lays out otherwise: computed alone, eager's strides
        # Without eager's outputs (no fake run: a data-dependent `index_put_` of a bool mask)
        # a lone view is rebuilt on the decomposed layout, which its strides are then anyway:
        # computed alone it was no view, where eager's always views the intermediate (graph
        # fuzzer seed 5152, the view check of issue 21).
        if geometry is None:            # the decomposed graph's layout, base and views alike
            geometry = (tuple(base.stride()), {
                position: (tuple(values[position].shape), tuple(values[position].stride()),
                           offset_between(values[position], base))
                for position in positions})
        base_stride, views = geometry
        if base_position is None:
            base_position = len(arguments) + len(hidden)
            hidden.append(root)
            strides.append(base_stride)
        for position in positions:
            strides[position] = views[position][1]
            if position != base_position:
                aliases[position] = OutputAlias("output", base_position, *views[position],
                                                same[position])
    if eager is not None:   # `x.detach()`: eager's shares memory but is no view
        for position, alias in enumerate(aliases):   # (an inference tensor's views have no
            value = eager[position]                  # `_base`: no view tracking, no detach)
            if alias is not None and not alias.same_object and isinstance(
                    value, torch.Tensor) and value._base is None and not value.is_inference():
                alias.detached = True
        _views_of_detached_outputs(aliases, eager)
        if eager_inputs is not None:
            _views_of_hidden_detached(aliases, eager, eager_inputs)
    if hidden or replaced:
        output_node.args = (arguments + hidden,)
        decomposed.recompile()
    return aliases, strides, len(hidden)


def _views_of_detached_outputs(aliases: list, eager: list) -> None:
    """An output eager views through another output that is a detached alias of an input
    (`t = x.detach(); return t, t[-2]`): eager's view has that output as `_base`, a tensor of
    its own, where rebuilt over the input it had the input (program fuzzer seed 92052). Such
    views are rebuilt over that output (the wrapper rebuilds input aliases first)."""
    detached = {id(eager[position]): position for position, alias in enumerate(aliases)
                if alias is not None and alias.detached and alias.base_kind == "input"}
    for position, alias in enumerate(aliases):
        value = eager[position]
        if alias is None or alias.base_kind != "input" or alias.same_object or \
                not isinstance(value, torch.Tensor) or id(value._base) not in detached:
            continue
        owner = detached[id(value._base)]
        aliases[position] = OutputAlias(
            "output", owner, tuple(value.shape), tuple(value.stride()),
            value.storage_offset() - eager[owner].storage_offset(), False)


def _views_of_hidden_detached(aliases: list, eager: list, eager_inputs: list) -> None:
    """An output eager views through a `detach()` of an input that the graph does not return
    (`x.detach()[1:]`): eager's `_base` is that detached tensor (no history, sharing `x`'s
    memory and version counter), where rebuilt over the input it was `x` (and, under
    `no_grad`, required grad as `x`). Such views record that tensor's geometry, one key per
    eager tensor, so that views of one detached tensor share one (`alias.detached_base`)."""
    keys: dict = {}
    for position, alias in enumerate(aliases):
        value = eager[position]
        if alias is None or alias.base_kind != "input" or alias.same_object or \
                alias.detached or not isinstance(value, torch.Tensor):
            continue
        base, source = value._base, eager_inputs[alias.base_index]
        if base is None or not isinstance(source, torch.Tensor) or base is source or \
                base is source._base or any(base is other for other in eager) or \
                storage_of(base) != storage_of(source) or base.dtype != source.dtype:
            continue    # (an input that is a view: eager's views of it have its base)
        geometry = None if _laid_out_as(base, source) else \
            (tuple(base.shape), tuple(base.stride()), offset_between(base, source))
        if geometry is not None and is_symbolic(base):
            continue    # (a detached view of an input over symbolic sizes: rebuilt over it)
        alias.detached_base = (keys.setdefault(id(base), len(keys)), geometry)


def _laid_out_as(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors have one shape, strides and storage offset (over symbolic sizes:
    known to, without a guard)."""
    pairs = [(a.storage_offset(), b.storage_offset()), *zip(a.shape, b.shape),
             *zip(a.stride(), b.stride())]
    return a.dim() == b.dim() and all(known(first == second) for first, second in pairs)


def _detached_over(eager, value, base) -> bool:
    """Whether eager's output is a detached alias (no view) of an intermediate that `value`
    views in ours, addressing it as ours does: `(x * 2)[1:].detach()` shares the product's
    whole memory at offset 3 in eager (P37), where computed alone it would own 9 elements at 0.
    It is then rebuilt over the intermediate (a hidden base) and detached."""
    return (isinstance(eager, torch.Tensor) and eager._base is None
            and isinstance(value, torch.Tensor) and eager.dtype == base.dtype
            and eager.untyped_storage().nbytes() == base.untyped_storage().nbytes()
            and eager.storage_offset() == value.storage_offset()
            and _same_strides(eager, value))


def _same_strides(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shapes and equal strides on every dimension longer than one."""
    return tuple(a.shape) == tuple(b.shape) and all(
        size <= 1 or x == y for size, x, y in zip(a.shape, a.stride(), b.stride()))


def _classify(arguments: list, values: list, placeholders: list):
    """(aliases of inputs and of outputs returned twice, intermediate -> positions of the
    outputs that are it or view it, position -> whether it is its owner's very object)."""
    aliases: list = [None] * len(values)
    by_root: dict = {}
    same: dict = {}
    first: dict = {}   # output node -> the first position returning it
    for position, (argument, value) in enumerate(zip(arguments, values)):
        if not isinstance(value, torch.Tensor) or not isinstance(argument, torch.fx.Node):
            continue
        if argument in first:   # one tensor returned twice: eager returns one object
            aliases[position] = _alias(value, "output", first[argument], value, True)
            continue
        first[argument] = position
        if value.is_neg() or value.is_conj():
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
            continue    # a view of another dtype: computed on its own (as_strided keeps it)
        if root.op == "placeholder":
            aliases[position] = _alias(value, "input", placeholders.index(root), base,
                                       same_object)
        else:
            by_root.setdefault(root, []).append(position)
    return aliases, by_root, same


def _strides(value, eager) -> Optional[tuple]:
    """An output's strides: eager's where known, else the decomposed graph's."""
    if not isinstance(value, torch.Tensor):
        return None
    return tuple((eager if isinstance(eager, torch.Tensor) else value).stride())


def _final_objects(gm: torch.fx.GraphModule) -> dict:
    """Memory owner -> the last node that is that very tensor object (its final shape and
    strides: in-place view ops such as `squeeze_` change them; matmul of a 1-D tensor)."""
    final = {}
    for node in gm.graph.nodes:
        root, same_object = memory_root(node)
        if same_object:
            final[root] = node
    return final


def _eager_geometry(eager: Optional[list], positions: list, base, base_position):
    """(base strides, per position (size, stride, offset from the base)) as eager lays out
    outputs that view one intermediate, when eager's outputs at `positions` view one tensor
    of `base`'s shape and dtype (the one returned at `base_position`, if any); else None
    (also for inference tensors, whose views name no `_base`: which tensor they view is
    unknown, and comparing a view's sizes with the base's asked unguarded size questions)."""
    if eager is None or not all(isinstance(eager[position], torch.Tensor) and
                                not eager[position].is_inference() for position in positions):
        return None
    owners = {id(_eager_base(eager[position])) for position in positions}
    owner = _eager_base(eager[positions[0]])
    if len(owners) != 1 or tuple(owner.shape) != tuple(base.shape) \
            or owner.dtype != base.dtype \
            or (base_position is not None and eager[base_position] is not owner):
        return None
    return tuple(owner.stride()), {
        position: (tuple(eager[position].shape), tuple(eager[position].stride()),
                   offset_between(eager[position], owner))
        for position in positions}


def _owner_as_eager(decomposed, final: dict, root, eager: Optional[list], positions: list,
                    values: list, arguments: list, geometry):
    """(root, base, base position, geometry) for outputs with no owner among them in ours:
    the intermediate in eager's shape (`_reinterpreted`: the hidden base, or the output eager
    returns as that tensor), or an output that is the intermediate in eager and lies as it in
    ours (an alias of it: `v2 = a3 @ a4` of a one-wide product, `v2.permute(...)` beside it,
    seed 19086). An output given the owner's place has its node replaced in `arguments`."""
    base_position, base = None, final[root].meta["val"]
    if geometry is None:
        owner = _reinterpreted(decomposed, final[root], eager, positions, values)
        if owner is None:
            return root, base, None, None
        root, base = owner, owner.meta["val"]
        base_position = next((position for position in positions
                              if not _eager_view(eager, position)), None)
        if base_position is not None:
            arguments[base_position] = owner
        return root, base, base_position, _eager_geometry(eager, positions, base, base_position)
    owned = next((position for position in positions
                  if isinstance(eager[position], torch.Tensor)
                  and not _eager_view(eager, position)
                  and _lies_as(values[position], base)), None)
    if owned is None:
        return root, base, None, geometry
    arguments[owned] = final.get(root, root)
    return root, base, owned, _eager_geometry(eager, positions, base, owned)


def _reinterpreted(decomposed: torch.fx.GraphModule, node: torch.fx.Node,
                   eager: Optional[list], positions: list,
                   values: list) -> Optional[torch.fx.Node]:
    """A node giving `node`'s memory the shape of the tensor eager's outputs at `positions`
    view (or are: an output eager returns as that tensor, the others viewing it), where that
    tensor holds the same elements, both contiguous: eager's `repeat` allocates (n,) where the
    decomposition clones a (1, n) and views it, so a view of the result
    (`x.repeat([1]).split(3)[0]`) views a base of another shape than ours (graph fuzzer seed
    268), and `stack` is a `cat` viewed (`v0 = stack(...); return v0, v0.view(-1)`: eager's v1
    views v0, seed 12680). The node is an `_unsafe_view` (no view: a tensor of its own);
    None where the layouts differ."""
    if eager is None or not all(isinstance(eager[p], torch.Tensor) for p in positions):
        return None
    owners = {id(_eager_base(eager[position])) for position in positions}
    owner, value = _eager_base(eager[positions[0]]), node.meta.get("val")
    if sum(eager[position] is owner for position in positions) != \
            sum(not _eager_view(eager, position) for position in positions) or \
            all(eager[position] is owner for position in positions):
        return None     # outputs eager returns fresh beside the views, or no view at all
    if len(owners) != 1 or not isinstance(value, torch.Tensor) or \
            owner.dtype != value.dtype or owner.numel() != value.numel() or \
            owner.storage_offset() != 0 or not owner.is_contiguous() or \
            not value.is_contiguous() or tuple(owner.shape) == tuple(value.shape):
        return None
    # Each output must address the same elements of our intermediate as eager's output does
    # of its own: the decomposition may reach the output through a permute (`a.repeat([1, 2])`
    # clones a (3, 2, 2) tensor and permutes it), and eager's geometry read over our memory
    # would then pick other elements (graph fuzzer seed 10628, a regression of 941d95e).
    for position in positions:
        mine, theirs = values[position], eager[position]
        if not isinstance(mine, torch.Tensor) or _significant_geometry(mine) != \
                _significant_geometry(theirs) or mine.storage_offset() - \
                value.storage_offset() != theirs.storage_offset() - owner.storage_offset():
            return None
    shape = [int(extent) for extent in owner.shape]
    with decomposed.graph.inserting_after(node):
        reshaped = decomposed.graph.call_function(torch.ops.aten._unsafe_view.default,
                                                  (node, shape))
    reshaped.meta["val"] = torch.ops.aten._unsafe_view.default(value, shape)
    return reshaped


def _lies_as(value, base) -> bool:
    """Whether `value` is `base`'s memory with `base`'s shape, strides and offset."""
    return isinstance(value, torch.Tensor) and isinstance(base, torch.Tensor) and \
        tuple(value.shape) == tuple(base.shape) and value.stride() == base.stride() and \
        value.storage_offset() == base.storage_offset()


def _eager_view(eager: Optional[list], position: int) -> bool:
    """Whether eager's output at `position` is a view (`_base` set)."""
    return eager is not None and isinstance(eager[position], torch.Tensor) and \
        eager[position]._base is not None


def _significant_geometry(value: torch.Tensor) -> tuple:
    """(extent, stride) of the dimensions longer than one: the others address nothing."""
    return tuple((int(extent), int(stride)) for extent, stride in zip(value.shape, value.stride())
                 if int(extent) != 1)


def _eager_base(value: torch.Tensor) -> torch.Tensor:
    return value._base if value._base is not None else value


def _alias(value, kind: str, index: int, base, same_object: bool) -> OutputAlias:
    return OutputAlias(kind, index, tuple(value.shape), tuple(value.stride()),
                       offset_between(value, base), same_object)


def offset_between(value: torch.Tensor, base: torch.Tensor):
    """`value`'s storage offset from `base`'s: an int, or a SymInt over the sizes of a
    graph traced with symbolic sizes (never `int()` of one: that would specialise it)."""
    offset = value.storage_offset() - base.storage_offset()
    if isinstance(offset, torch.SymInt) and offset.node.expr.is_number:
        return int(offset.node.expr)
    return offset


def aliased_argument(node: torch.fx.Node):
    """(the argument node whose memory `node`'s result is, whether the op writes into it),
    or (None, False) for ops returning fresh memory."""
    if node.op != "call_function":
        return None, False
    if node.target is operator.getitem:
        parent = node.args[0]
        source, writes = aliased_argument(parent) if isinstance(parent, torch.fx.Node) \
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
        source, writes = aliased_argument(node)
        if source is None:
            return node, same_object
        same_object = same_object and writes
        node = source
