"""Mutable state seen while tracing, and the mutations to replay after the graph runs.

Input: mutations of lists, dicts, sets, objects, globals and closure cells performed by the
traced program. Output: a replay plan for the rewritten frame (`SideEffects.pending()`).

Nothing is mutated during tracing. Each mutable value is a `Box`: a container variable points at
its box, and the box holds the current contents as variables. Boxes of objects that existed
before the frame ran carry the source to reach them; when such a box changes, the change is
replayed on the real object after the compiled graph has run. Boxes of objects created during
the trace need no replay: they are rebuilt where they escape.

An error raised inside the compiled graph would skip the replay: `ExceptionPath` keeps what
the trace needs to know about that (program fuzzer P42, see `dynamo.rewrite.raising`), and
`lasting_effect` says which graph operations cannot simply run again.
"""
from __future__ import annotations

import dataclasses
import operator
from typing import Any, Iterable, Optional

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from guards.sources import Source


@dataclasses.dataclass(eq=False)
class Box:
    """The current contents of one mutable value."""

    kind: str  # "list", "dict", "set", "object", "cell", "globals"
    contents: Any  # list[Variable] | dict[key, Variable] | dict[attr, Variable] | Variable
    source: Optional[Source] = None  # set for values that existed before the frame ran
    real: Any = None  # the real pre-existing object (held only while tracing)
    mutated: bool = False
    python_type: Optional[type] = None
    deleted: set = dataclasses.field(default_factory=set)  # object attributes deleted
    owner: Any = dataclasses.field(default=None, repr=False)  # the SideEffects tracking it

    @property
    def preexisting(self) -> bool:
        return self.source is not None

    def touch(self) -> None:
        self.mutated = True
        if self.owner is not None:
            self.owner.exception_path.effects = True


@dataclasses.dataclass
class ExceptionPath:
    """What an error raised by the graph at run time would skip, as the trace goes on.

    `effects`: a pre-existing value was changed (eager changes it before a later operation
    raises; the glue replays it after the graph). `mode_changes`: a grad-mode block entered
    before this trace was left (its exit is not the glue's to undo). `grad_left_differs`: an
    error now would leave another grad mode than the glue puts back.
    `exposed`: an operation was recorded while an error in it would run Python code or skip an
    effect. `lasting`: an operation that cannot simply run again (it writes memory the graph
    did not allocate, or draws random numbers) was recorded: why."""

    effects: bool = False
    mode_changes: int = 0
    exposed: bool = False
    lasting: str = ""
    checked: int = 0  # graph nodes already looked at
    raised: bool = False  # an operation that may raise when the graph runs was recorded
    entry_grad: bool = dataclasses.field(default_factory=torch.is_grad_enabled)
    grad_blocks: int = 0  # grad-mode `with` blocks entered in this trace and still open
    outer_grad: bool = True  # the mode the outermost of them puts back

    def grad_left_differs(self) -> bool:
        """Whether an error raised now would leave a grad mode other than the one the glue
        puts back (the mode the graph started in): the open `with` blocks' exits put back
        the mode from before the outermost; with none open, the mode now stays (a bare
        `torch.set_grad_enabled(False)` then `(True)` leaves what it found)."""
        left = torch.is_grad_enabled() if self.grad_blocks == 0 else self.outer_grad
        return left != self.entry_grad

    def enter_grad_block(self, previous: bool) -> None:
        """A grad-mode `with` block entered in this trace, whose exit puts back `previous`."""
        if self.grad_blocks == 0:
            self.outer_grad = previous
        self.grad_blocks += 1


class SideEffects:
    """All boxes of pre-existing values, in the order they were first seen."""

    def __init__(self):
        self._by_id: dict[tuple[int, str], Box] = {}
        self._order: list[Box] = []
        self._keepalive: list[Any] = []
        # calls made after the graph instead of during the trace, in program order: a real
        # function and its argument variables (`logger.warning_once(message)`, see special.py)
        self.deferred_calls: list[tuple[Any, list]] = []
        # idempotent calls made before the graph instead (see `defer`)
        self.early_calls: list[tuple[Any, list]] = []
        self.exception_path = ExceptionPath()

    def defer(self, function: Any, arguments: list, graph_size: int,
              idempotent: bool = False) -> None:
        """Make `function(*arguments)` outside the graph, in program order with the trace's
        other effects. An idempotent call recorded before anything that could make an error
        of the graph skip it or reorder it (no operation that may raise, no earlier change
        to a Python value, no grad-mode block left, no deferred call; `graph_size`: the
        graph's node count now, all of them checked) runs before the graph instead: where
        eager made it, so an error of the graph no longer forces a re-run (and the copies of
        the inputs the graph writes that a re-run needs). `optimizer.zero_grad()` before the
        forward of a training step is the case."""
        path = self.exception_path
        first = idempotent and not (path.raised or path.effects or path.mode_changes or
                                    self.deferred_calls or path.checked < graph_size)
        (self.early_calls if first else self.deferred_calls).append((function, arguments))

    def box_for(self, real: Any, facet: str = "") -> Optional[Box]:
        """The box already made for a pre-existing object, if any (keeps aliasing right).

        `facet` tells apart two boxes of one object: a dict subclass instance has its items
        (facet "") and its instance attributes (facet "attributes").
        """
        return self._by_id.get((id(real), facet))

    def track(self, box: Box, facet: str = "") -> Box:
        box.owner = self
        if box.mutated:
            self.exception_path.effects = True
        if box.real is not None:
            self._by_id[(id(box.real), facet)] = box
            self._keepalive.append(box.real)
        self._order.append(box)
        return box

    def pending(self) -> list[Box]:
        """Boxes of pre-existing values whose contents changed, in first-seen order."""
        return [box for box in self._order if box.mutated]

    def release(self) -> None:
        """Drop references to real objects once code generation is done."""
        for box in self._order:
            box.real = None
        self._by_id.clear()
        self._keepalive.clear()


_RANDOM_WORDS = ("rand", "dropout", "bernoulli", "multinomial", "normal", "uniform",
                 "poisson", "exponential", "geometric", "cauchy", "rrelu", "seed", "random")
# in-place methods that change what a tensor is, not only its values: no copy puts it back
_METADATA_WRITES = {"resize_", "resize_as_", "set_", "as_strided_", "squeeze_", "unsqueeze_",
                    "t_", "transpose_", "swapdims_", "swapaxes_", "detach_", "requires_grad_",
                    "share_memory_", "rename_", "retain_grad"}
RANDOM_DEVICES = ("cpu", "cuda")  # generators the glue can save and put back


@dataclasses.dataclass(frozen=True)
class Effect:
    """What running a graph operation leaves that a second run would change again.

    `kind`: "" (nothing), "random" (draws from `device`'s generator), "write" (writes the
    memory of inputs: `storages`), "lasting" (neither can be put back: `reason`)."""

    kind: str = ""
    reason: str = ""
    device: str = ""
    storages: tuple = ()


def memory_of_inputs(nodes: Iterable[torch.fx.Node]) -> set:
    """The storages of a graph's tensor inputs (placeholders' example values)."""
    storages = set()
    for node in nodes:
        example = node.meta.get("example_value") if node.op == "placeholder" else None
        if isinstance(example, torch.Tensor):
            storages.add(StorageWeakRef(example.untyped_storage()))
    return storages


def effect_of(node: torch.fx.Node, inputs: set) -> Effect:
    """What running `node` leaves beyond its outputs (`inputs`: the graph's input storages).
    Module calls count as lasting (not looked into)."""
    if node.op == "call_module":
        return Effect("lasting", f"a call of module {node.target}")
    target = node.target
    name = target if isinstance(target, str) else getattr(target, "__name__", "") or ""
    lowered = name.lower()
    random = None
    if any(word in lowered for word in _RANDOM_WORDS) and "normalize" not in lowered:
        example = node.meta.get("example_value")
        device = example.device if isinstance(example, torch.Tensor) else torch.device("cpu")
        if device.type not in RANDOM_DEVICES:
            return Effect("lasting", f"{name} draws random numbers on {device}")
        random = Effect("random", device=str(device) if device.type == "cuda" else "cpu")
    if not node.meta.get("mutates"):
        return random or Effect()
    storages = []
    for leaf in _written(node, name):
        example = leaf.meta.get("example_value") if isinstance(leaf, torch.fx.Node) else None
        if not isinstance(example, torch.Tensor) or \
                StorageWeakRef(example.untyped_storage()) not in inputs:
            continue
        if example.requires_grad or name in _METADATA_WRITES:
            return Effect("lasting", f"{name} writes an input in a way no copy puts back")
        storages.append(StorageWeakRef(example.untyped_storage()))
    if storages and random is not None:
        return Effect("lasting", f"{name} writes random numbers into an input")
    return Effect("write", storages=tuple(storages)) if storages else random or Effect()


def _written(node: torch.fx.Node, name: str) -> list:
    """The arguments `node` may write: `out=`, the tensor an in-place method or operator
    (`x.add_(y)`, `x *= y`, `x[i] = y`) writes, else every argument (a schema's writes)."""
    if isinstance(node.kwargs.get("out"), torch.fx.Node):
        return [node.kwargs["out"]]
    in_place = (name.endswith("_") and not name.startswith("_")) or \
        (name.startswith("__i") and name.endswith("__")) or \
        node.target in _IN_PLACE_OPERATORS
    if in_place and node.args and isinstance(node.args[0], torch.fx.Node):
        return [node.args[0]]
    return torch.utils._pytree.tree_leaves((node.args, node.kwargs))


_IN_PLACE_OPERATORS = {operator.setitem, operator.iadd, operator.isub, operator.imul,
                       operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow,
                       operator.iand, operator.ior, operator.ixor, operator.ilshift,
                       operator.irshift, operator.imatmul}


# views whose every failure fake tensors see while tracing (shapes, strides, dims): running
# them allocates nothing and reads no tensor's values, so they cannot raise when the graph runs
_CHECKED_VIEWS = frozenset({"getitem", "view", "view_as", "permute", "transpose", "t",
                            "unsqueeze", "squeeze", "select", "narrow", "expand", "expand_as",
                            "detach", "movedim", "swapaxes", "swapdims", "diagonal", "unbind",
                            "split", "chunk", "unflatten", "size", "dim", "stride"})


def cannot_raise(node: torch.fx.Node) -> bool:
    """Whether `node` cannot raise when the graph runs: a placeholder, or a view in
    `_CHECKED_VIEWS` whose arguments other than the tensor viewed are no tensors (`x[:, 0]`,
    not `x[index]`, which reads the index's values)."""
    if node.op == "placeholder":
        return True
    if node.op not in ("call_function", "call_method") or node.meta.get("mutates"):
        return False
    target = node.target
    name = target if isinstance(target, str) else getattr(target, "__name__", "") or ""
    if name not in _CHECKED_VIEWS or not node.args:
        return False
    leaves = torch.utils._pytree.tree_leaves((node.args[1:], node.kwargs))
    return not any(isinstance(leaf, torch.fx.Node) and
                   isinstance(leaf.meta.get("example_value"), torch.Tensor) for leaf in leaves)
