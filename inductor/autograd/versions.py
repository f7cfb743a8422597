"""Eager's version-counter semantics for compiled training graphs (stages "trace" and "run").

Eager autograd saves tensors for the backward and, when a node of the backward runs, raises if
one of its saved tensors was changed in place since it was saved (its version counter moved):
"one of the variables needed for gradient computation has been modified by an inplace
operation". A compiled graph saves values of its own choosing, so it reproduces eager's checks
instead: the backward raises exactly where eager's would, with eager's message, whether the
graph itself changed the saved tensor after saving it (`y.mul_(x); y.mul_(y)`) or the caller
changed an input or output in place before calling `backward()`.

Input (trace): the joint trace runs the graph's forward through `SavedTensorLog.run_graph`, an FX
interpreter under saved-tensor hooks: each tensor eager's autograd saves is recorded with the
FX node saving it, and the trace's own backward skips the version check (it is the compiled
graph's, not the caller's). Output: a `VersionPlan` of `Watch`es, one per saved tensor that the
graph changes after saving it or that the caller can reach (it shares the version counter of
an input or an output), each with the function outputs whose gradients reach the node that
saved it, and per output the inputs its gradient reaches (`inputs_reached`). Run time:
`CallVersions` holds, per call, the counters to compare; `check` raises.
"""
from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Optional, Sequence

import torch
import torch.fx
from torch.utils import _pytree as pytree

from inductor.autograd.symbols import known_equal
from inductor.autograd.version_messages import (EAGER_NODE, is_compiled_node, message,
                                                node_name, regenerated_view, which_output)

INPUT, OUTPUT, INTERNAL = "input", "output", "internal"


@dataclasses.dataclass(frozen=True)
class Watch:
    """One tensor eager's autograd saves. `root`: (INPUT, input index), (OUTPUT, function
    output position) or (INTERNAL, 0), the tensor whose version counter it shares; versions
    are counted from the root's version when the graph starts. `which`: the ", which is output
    N of NAME" part of eager's message when nothing changed the root after the graph;
    `follows_root`: the saved tensor is the root itself, whose later writes rename it."""

    root: tuple
    saved_version: int
    end_version: int
    reached_by: frozenset
    order: int
    size: tuple
    dtype: torch.dtype
    device: torch.device
    which: Optional[str]   # None: the input's own node, read at run time
    follows_root: bool
    is_view: bool
    # saved by the node that made it (`exp`'s result, `relu_`'s): eager names that node
    # whatever the caller did to the tensor since
    named_by_saver: bool = False


@dataclasses.dataclass(frozen=True)
class VersionPlan:
    """The watches of one joint graph, in the order eager's backward checks them;
    `output_names`: per function output, the ", which is output N of NAME," part of eager's
    message for it as the graph made it ("" for none), for the messages of later graphs'
    checks, whose input it is (`name_outputs`)."""

    watches: tuple
    output_names: tuple = ()

    @property
    def watched_inputs(self) -> frozenset:
        """Inputs eager saves (or saves a view of) for the backward."""
        return frozenset(watch.root[1] for watch in self.watches if watch.root[0] == INPUT)

    @property
    def watched_outputs(self) -> frozenset:
        return frozenset(watch.root[1] for watch in self.watches if watch.root[0] == OUTPUT)


def name_node(tensor: torch.Tensor, name: str) -> None:
    """Note on `tensor`'s node (the epilogue's copy) the name eager's write would have given
    it ("Sub" for `t -= v`; "" for none: `CopySlices` is eager's), for the messages of other
    graphs' checks, and on the earlier calls' watches of it that do not hold it (`_Watched`):
    eager's saved tensor holds it, and names its node at backward time after the caller
    dropped it."""
    if name and tensor.grad_fn is not None:
        tensor.grad_fn.metadata[EAGER_NODE] = name
    watchers = _unheld_watchers(tensor)
    if watchers:
        which = which_output(tensor)
        for reference in watchers:
            watched = reference()
            if watched is not None:
                watched.last_name = which


def _same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """(symbolic sizes compared with no guard: `symbols.known_equal`)"""
    return (known_equal(a.shape, b.shape) and known_equal(a.stride(), b.stride())
            and known_equal(a.storage_offset(), b.storage_offset()))


class _Packed:
    """What autograd's pack hook received: a saved input itself, or an alias of a saved
    output; its version then, the FX node saving it, and when the backward first read it."""

    __slots__ = ("alias", "version", "node", "order", "unpacked_by", "maker", "output_nr")

    def __init__(self, alias: torch.Tensor, node: Optional[torch.fx.Node]):
        self.alias = alias
        self.version = alias._version
        self.node = node
        # the tensor's node when saved: the saving node itself for an output it made
        self.maker = alias.grad_fn
        self.output_nr = alias.output_nr
        self.order: Optional[int] = None
        self.unpacked_by: Optional[int] = None   # id() of the backward node


class SavedTensorLog(torch.fx.Interpreter):
    """Runs the forward of the joint trace and records what eager's autograd saves."""

    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__(gm, garbage_collect_values=False)
        self.packed: list[_Packed] = []
        self.current: Optional[torch.fx.Node] = None
        self.candidates: dict = {}   # fx node -> tensors its call took and returned
        self.view_versions: dict = {}   # id(view made by a node) -> its version then
        self.unpacks = 0

    def run_graph(self, arguments: Sequence[Any]) -> Any:
        # the nodes the inputs come with (a stand-in's clone): not what eager would name
        self.start_nodes = [value.grad_fn if isinstance(value, torch.Tensor) else None
                            for value in arguments]
        with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
            return self.run(*arguments)

    def run_node(self, node: torch.fx.Node) -> Any:
        self.current = node
        arguments = [value for value in pytree.tree_leaves(
            [self.env.get(n) for n in node.all_input_nodes]) if isinstance(value, torch.Tensor)]
        result = super().run_node(node)
        produced = [value for value in pytree.tree_leaves(result)
                    if isinstance(value, torch.Tensor)]
        self.candidates[node] = (arguments, produced)
        for value in produced:
            if value._base is not None:
                self.view_versions.setdefault(id(value), value._version)   # when made
        return result

    def _pack(self, tensor: torch.Tensor) -> _Packed:
        packed = _Packed(tensor, self.current)
        self.packed.append(packed)
        return packed

    def _unpack(self, packed: _Packed) -> torch.Tensor:
        # No version check here: the traced backward is the compiled graph's; `check` does
        # eager's at run time.
        if packed.order is None:
            packed.order = self.unpacks
            self.unpacks += 1
            node = torch._C._current_autograd_node()
            packed.unpacked_by = None if node is None else id(node)
        return packed.alias

    def describe_forward(self, arguments: Sequence[Any], outputs: Sequence[Any],
                         starts: Sequence[int]) -> "_ForwardFacts":
        """What eager's message needs, read right after the forward (before any backward)."""
        return _ForwardFacts(self, arguments, outputs, starts)


class _ForwardFacts:
    """Per saved tensor: its root, versions, and eager's name for it; the backward nodes
    reachable from each output. Reads versions first, then finds roots by bumping each saved
    tensor's counter (the trace's backward checks no versions)."""

    def __init__(self, log: SavedTensorLog, arguments, outputs, starts):
        self.log = log
        self.reachable = _reachable_nodes(outputs)   # holds the node objects: ids stay valid
        self.entries = []
        for packed in log.packed:
            original, from_result = _original(packed, log.candidates.get(packed.node))
            which = "" if original is None else which_output(original)
            argument = 0 if original is None or from_result else _is_argument(original,
                                                                                arguments)
            if argument and original.grad_fn in (None, log.start_nodes[argument - 1]):
                which = None   # the caller's tensor, as the graph left it: named at run time
            if original is not None and original.requires_grad and original._version != \
                    log.view_versions.get(id(original), original._version):
                # a view whose base was written after it was made: eager regenerates its node
                # as AsStridedBackward0 (the trace replays the view op instead)
                which = regenerated_view()
            elif original is None and _regenerates(packed):
                which = regenerated_view()
            self.entries.append([packed, packed.alias._version, original, from_result, which])
        roots = [(INPUT, index, value) for index, value in enumerate(arguments)
                 if isinstance(value, torch.Tensor)]
        roots += [(OUTPUT, position, value) for position, value in enumerate(outputs)
                  if isinstance(value, torch.Tensor)]
        roots = [root for root in roots if not root[2].is_inference()]
        self.starts = starts
        self.output_names = tuple(which_output(output) if isinstance(output, torch.Tensor) else ""
                                  for output in outputs)
        for entry in self.entries:
            entry.append(_root_of(entry[0].alias, roots, entry[2]))

    def inputs_reached(self, leaves: Sequence[Any], count: int) -> tuple:
        """Per function output position: the indices of `leaves` (inputs requiring grad) its
        gradient reaches; a backward gives the others None, as eager leaves their `.grad`."""
        index_of = {id(leaf): index for index, leaf in enumerate(leaves)
                    if isinstance(leaf, torch.Tensor) and leaf.requires_grad}
        reached = []
        for position in range(count):
            nodes = self.reachable.get(position, {}).values()
            reached.append(frozenset(index_of[id(node.variable)] for node in nodes
                                     if id(getattr(node, "variable", None)) in index_of))
        return tuple(reached)

    def plan(self, differentiable_positions: Sequence[int]) -> VersionPlan:
        watches = []
        for packed, end, original, from_result, which, root in self.entries:
            start = self.starts[root[1]] if root[0] == INPUT else 0
            saved, end = packed.version - start, end - start
            if packed.order is None or (root[0] == INTERNAL and saved == end):
                continue   # never read by the backward, or nothing can change it
            reached = frozenset(position for position in differentiable_positions
                                if packed.unpacked_by in self.reachable.get(position, ()))
            if from_result and original is not None and packed.unpacked_by is not None:
                which = self._saving_node_name(packed, original) or which
            named_by_saver = (packed.maker is not None and packed.unpacked_by is not None
                              and id(packed.maker) == packed.unpacked_by)
            if named_by_saver:   # (`relu_`'s result: the argument itself, not `from_result`)
                which = f", which is output {packed.output_nr} of {node_name(packed.maker)},"
            alias = packed.alias
            watches.append(Watch(root[:2], saved, end, reached, packed.order, tuple(alias.shape),
                                 alias.dtype, alias.device, which,
                                 follows_root=original is not None and not from_result and
                                 root[0] != INTERNAL and original is root[2],
                                 is_view=(alias if original is None else original)._is_view(),
                                 named_by_saver=named_by_saver))
        watches.sort(key=lambda watch: watch.order)
        return VersionPlan(tuple(watches), self.output_names)

    def _saving_node_name(self, packed: _Packed, original: torch.Tensor) -> str:
        # An output saved by the node that made it: eager names that node.
        for nodes in self.reachable.values():
            node = nodes.get(packed.unpacked_by)
            if node is not None:
                return f", which is output {original.output_nr} of {node_name(node)},"
        return ""


def _regenerates(packed: _Packed) -> bool:
    """Whether a saved view made inside its node (`F.linear`'s unsqueeze of a 1-D input: no
    value of the graph) was written after it was saved, so that eager regenerates its node as
    AsStridedBackward0 (program fuzzer inductor seed 27048: `y[1:2] = ...` after
    `lin(y)`)."""
    alias = packed.alias
    return alias._is_view() and alias._version != packed.version and alias.requires_grad


def _is_argument(tensor: torch.Tensor, arguments: Sequence[Any]) -> int:
    """1 + the index of the argument `tensor` is, or 0."""
    return next((index + 1 for index, value in enumerate(arguments) if value is tensor), 0)


def _original(packed: _Packed, candidates) -> tuple[Optional[torch.Tensor], bool]:
    """The tensor eager saved (among the FX node's arguments and results), and whether it is
    one of the results (saved as an output of its node)."""
    if candidates is None:
        return None, False
    arguments, produced = candidates
    alias = packed.alias
    for from_result, group in ((False, arguments), (True, produced)):
        for tensor in group:
            if tensor is alias or (_same_layout(tensor, alias)
                                   and _shares_counter(tensor, alias)):
                return tensor, from_result and not any(tensor is a for a in arguments)
    return None, False


def _shares_counter(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.is_inference() or b.is_inference():
        return False
    before = b._version
    torch.autograd.graph.increment_version(a)
    shared = b._version != before
    torch._C._autograd._unsafe_set_version_counter((a,), (a._version - 1,))
    return shared


def _root_of(alias: torch.Tensor, roots: list, original: Optional[torch.Tensor] = None
             ) -> tuple:
    """The root sharing `alias`'s version counter (one bump, then every root read): the one
    that is the saved tensor itself (`original`) where several share it (inputs that view
    one another: a symbolic trace's example inputs keep a view's base, and a saved input
    named by the first input sharing its counter lost eager's name for it, "which is output
    0 of Mm", tests/repros/test_inductor_p31_compiled_output_names.py), else the first."""
    if alias.is_inference():
        return (INTERNAL, 0, None)
    before = [value._version for _, _, value in roots]
    torch.autograd.graph.increment_version(alias)
    moved = [root for root, version in zip(roots, before) if root[2]._version != version]
    torch._C._autograd._unsafe_set_version_counter((alias,), (alias._version - 1,))
    if not moved:
        return (INTERNAL, 0, None)
    return next((root for root in moved if root[2] is original), moved[0])


def _reachable_nodes(outputs: Sequence[Any]) -> dict:
    """Per output position: {id(node): node} for the backward nodes its gradient reaches."""
    reachable = {}
    for position, output in enumerate(outputs):
        if not isinstance(output, torch.Tensor) or output.grad_fn is None:
            continue
        seen: dict = {}
        stack = [output.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen[id(node)] = node
            stack.extend(next_node for next_node, _ in node.next_functions)
        reachable[position] = seen
    return reachable


# ---------------------------------------------------------------------------------------------
# Run time


# tensors watched without being held (`_Watched`), by id -> (a weak reference to the tensor,
# whose callback drops the entry when it dies; weak references to those watches). Keyed by
# id, not a `WeakIdKeyDictionary`, whose lookups build a key object in Python (a call's cost:
# ResNet-50's forward registers 106 running statistics per call).
_UNHELD: dict = {}


def _unheld_watchers(tensor: torch.Tensor) -> Optional[list]:
    entry = _UNHELD.get(id(tensor))
    return entry[1] if entry is not None and entry[0]() is tensor else None


def _watch_unheld(tensor: torch.Tensor, watched: "_Watched") -> None:
    """Register `watched` for `name_node`'s notes (a tensor written every call, a parameter,
    keeps only the watches still alive)."""
    watchers = _unheld_watchers(tensor)
    if watchers is None:
        key = id(tensor)

        def forget(reference, key=key):
            entry = _UNHELD.get(key)
            if entry is not None and entry[0] is reference:
                del _UNHELD[key]
        _UNHELD[key] = (weakref.ref(tensor, forget), [weakref.ref(watched)])
    else:
        watchers[:] = [reference for reference in watchers if reference() is not None]
        watchers.append(weakref.ref(watched))


class _Watched:
    """One watched tensor of a call. `held`: the tensor itself where eager's saved tensor
    holds it (its node names the error at backward time, whatever the caller did since);
    `counter`: a detached alias sharing its version counter where holding the tensor could
    make a reference cycle through this call's node (the graph writes it: the epilogue's
    copy gives it that node; or an output requiring grad: that node is its `grad_fn`);
    `reference`: a weak reference, for names while the caller holds it; `start`: its
    version when the call began; `was_view`: it was a view then."""

    __slots__ = ("held", "counter", "reference", "start", "was_view", "last_name",
                 "__weakref__")

    def __init__(self, tensor: torch.Tensor, hold: Optional[bool]):
        """`hold`: True the tensor, False its counter, None neither (a weak reference)."""
        self.held = tensor if hold else None
        self.counter = tensor.detach() if hold is False else None
        self.reference = weakref.ref(tensor)
        self.start = 0 if tensor.is_inference() else tensor._version
        self.was_view = tensor._is_view()
        # eager's name of the tensor after a later graph's write (`name_node`), for a check
        # after the caller dropped it
        self.last_name: Optional[str] = None
        if hold is False:
            _watch_unheld(tensor, self)

    def tensor(self) -> Optional[torch.Tensor]:
        return self.held if self.held is not None else self.reference()

    def version(self) -> Optional[int]:
        """The counter's value now; None where nothing holds it any more."""
        tensor = self.held if self.held is not None else self.counter
        if tensor is None:
            tensor = self.reference()
        if tensor is None:
            return None
        return 0 if tensor.is_inference() else tensor._version

    def unhold(self) -> None:
        """Keep the counter, not the tensor (its node may reach this call's node)."""
        if self.held is not None:
            self.counter, self.held = self.held.detach(), None


class CallVersions:
    """The version counters one call's backward compares: per watched input and output, a
    `_Watched`. Eager's saved tensors keep the tensors they saved, so an input eager saves is
    held while the backward may still run (its counter lives on in the caller's aliases
    after the caller dropped it: program fuzzer seeds 11662, 21113), as is an output with
    no autograd history (eager names its node at backward time: seed 21246); an input the
    graph writes, or an output requiring grad, is held through a detached alias (it shares
    the counter without the autograd history, which would make a cycle through this call's
    node). Everything is let go after a backward that does not keep the graph, as eager
    frees its saved tensors; only the counters after a backward that raised."""

    __slots__ = ("inputs", "outputs", "released", "release_task", "sizes")

    def __init__(self):
        self.inputs: dict = {}
        self.outputs: dict = {}
        self.released = False
        self.release_task: Optional[int] = None
        # symbolic sizes: (binder, the call's bound symbols), for the sizes of eager's message
        self.sizes: Optional[tuple] = None

    def watch_input(self, index: int, tensor: torch.Tensor, saved: bool,
                    written: bool) -> None:
        """`saved`: eager saves it (or a view of it); `written`: the graph writes it, or
        memory it shares (the epilogue's write gives it a node reaching this call's: held,
        it would make a cycle). An input only the compiled backward reads is referenced
        weakly."""
        self.inputs[index] = _Watched(tensor, not written if saved else None)

    def watch_output(self, position: int, tensor: torch.Tensor, differentiable: bool) -> None:
        """`differentiable`: the output gets this call's node as its `grad_fn`."""
        self.outputs[position] = _Watched(tensor, not differentiable)

    def finish(self, raised: bool) -> None:
        """After one node's checks: where they raised, keep only the counters (the
        tensors' nodes may reach this call's: a cycle eager's node would not make); after
        a backward that does not keep the graph, let everything go when it ends (the call's
        other nodes check the same tensors in it), as eager frees its saved tensors."""
        if raised:
            for watched in [*self.inputs.values(), *self.outputs.values()]:
                watched.unhold()
            return
        task = torch._C._current_graph_task_id()
        if task != self.release_task and \
                not torch._C._autograd._get_current_graph_task_keep_graph():
            self.release_task = task
            torch.autograd.Variable._execution_engine.queue_callback(self._release)

    def _release(self) -> None:
        self.released = True
        self.inputs, self.outputs = {}, {}


def check(plan: VersionPlan, versions: CallVersions, grads: Sequence[Any],
          input_bumps: Sequence[int], output_bumps: Sequence[int]) -> None:
    """Raise eager's RuntimeError if a saved tensor that this backward reads in eager was
    changed in place since eager saved it. `grads`: per function output, None where no
    gradient arrived (eager would not run the nodes only those outputs reach)."""
    if versions.released:
        return   # a second backward: autograd raises that the saved tensors were freed
    try:
        _check(plan, versions, grads, input_bumps, output_bumps)
    except RuntimeError:
        versions.finish(raised=True)
        raise


def _check(plan: VersionPlan, versions: CallVersions, grads: Sequence[Any],
           input_bumps: Sequence[int], output_bumps: Sequence[int]) -> None:
    for watch in plan.watches:
        if not any(grads[position] is not None for position in watch.reached_by):
            continue
        kind, index = watch.root
        start, which = 0, watch.which
        if kind == INTERNAL:
            current = watch.end_version
        else:
            if kind == INPUT:
                watched = versions.inputs[index]
                start, after = watched.start, watched.start + input_bumps[index]
            else:
                watched = versions.outputs[index]
                after = output_bumps[index]
            tensor, version = watched.tensor(), watched.version()
            if version is None:
                continue   # gone with every alias: nothing can have written it since
            if which is None:
                which = "" if tensor is None else which_output(tensor)
            current = version - start
            if version != after:
                which = _renamed(watch, tensor, watched.last_name)
            if kind == INPUT and watched.was_view and watch.follows_root and (
                    input_bumps[index] or version != after) and (
                    tensor is None or tensor.requires_grad):
                which = regenerated_view()   # a written view: the node eager regenerates
        if current != watch.saved_version:
            size = watch.size if versions.sizes is None else \
                versions.sizes[0].evaluate(watch.size, versions.sizes[1])
            raise RuntimeError(message(watch.dtype, watch.device, size, which,
                                       current + start, watch.saved_version + start))


def _renamed(watch: Watch, tensor: Optional[torch.Tensor], last_name: Optional[str]) -> str:
    """Eager's name for a saved tensor whose root the caller changed after the call: the
    root's new node, or for a view of it, the `AsStrided` node eager regenerates; where the
    caller dropped the root, the name a later graph's write left it (`last_name`: eager's
    saved tensor holds it, program fuzzer inductor seeds 23071, 28210)."""
    if watch.named_by_saver:
        return watch.which
    if tensor is None and last_name is not None and watch.follows_root:
        return last_name
    if tensor is None or not tensor.requires_grad:
        return "" if tensor is not None else watch.which or ""
    if watch.follows_root:
        # a write under `no_grad` leaves the node the graph gave it: eager's node is then
        # the one it saved with (program fuzzer seed 17326: "of Add", not "of
        # CompiledFunction")
        if watch.which is not None and is_compiled_node(tensor.grad_fn):
            return watch.which
        return which_output(tensor)
    if watch.is_view:
        return regenerated_view()
    return watch.which or ""


def caller_hooks_active() -> bool:
    """Whether the caller saves tensors through hooks (`torch.autograd.graph.save_on_cpu`,
    `saved_tensors_hooks`): eager then checks no versions, and neither does `check`."""
    return torch._C._autograd._top_saved_tensors_default_hooks(True) is not None


def set_versions(tensors: Sequence[torch.Tensor], versions: Sequence[int]) -> None:
    """Set version counters (inference tensors, which have none, are left alone)."""
    pairs = [(tensor, version) for tensor, version in zip(tensors, versions)
             if not tensor.is_inference()]
    if pairs:
        torch._C._autograd._unsafe_set_version_counter(
            tuple(tensor for tensor, _ in pairs), tuple(version for _, version in pairs))


class ModifiedSavedInput(RuntimeError):
    """A tensor the compiled backward reads (an input, or an output sharing memory with a
    saved value) was changed in place after the call, where eager's backward would not have
    read it. Cause: the compiled graph saved it instead of a value eager saves. Fix: change it
    after `backward()`, or run this function eagerly."""


def check_saved_inputs(saved: Sequence[int], versions: CallVersions,
                       input_bumps: Sequence[int]) -> None:
    """Raise `ModifiedSavedInput` if an input the compiled backward reads moved after the
    call (checked after `check`: where eager raises, its error comes first). The last check
    of a node's backward: the watched tensors are let go after it (`CallVersions.finish`)."""
    if versions.released:
        return
    for index in saved:
        watched = versions.inputs[index]
        version = watched.version()
        if version is not None and version != watched.start + input_bumps[index]:
            versions.finish(raised=True)
            raise ModifiedSavedInput(
                f"framejit: input {index} of a compiled graph was modified in place after the "
                "call, and the compiled backward reads it (eager's backward would not: it "
                "saved other values). Modify it after backward(), or run this function "
                "eagerly.")
    versions.finish(raised=False)
