"""When sizes become symbolic (stage: trace; input: a tensor of the frame, its source, the jit
call's `dynamic` setting and what earlier compiles of the code saw; output: the dimensions to
trace symbolically, with their bounds).

- `dynamic=None` (the default, "automatic dynamic"): a compile specialises every size; the
  sizes each source had are remembered per code object and `jit` wrapper, and a later compile
  (a recompile, usually because a size changed) makes symbolic exactly the dimensions whose size
  differs from what an earlier compile saw. A batch-size sweep compiles twice.
- `dynamic=True`: every dimension of every input tensor is symbolic from the first compile
  (parameters and buffers excepted: they change only under automatic dynamic).
- `dynamic=False`: every size is specialised, except dimensions the user marked dynamic.
- Whatever the setting, a region (the code after a graph break) traces symbolically from its
  first compile the dimensions its inputs had symbolic in the trace before the break
  (`SizeHistory.inherit`, filled by `dynamo.resume.inheritance`): a batch dimension stays one
  through any number of breaks.
- Int arguments of the frame (a position, a length, a resumed frame's live values after a
  graph break) follow the same rule as one size: symbolic once they changed (or always with
  `dynamic=True`), except 0 and 1.
- `mark_dynamic(x, dim, min=, max=)` / `mark_static(x, dim)` mark a tensor object; marks win
  over the setting (a static mark over everything).

Sizes 0 and 1 stay static whatever the setting (torch's 0/1 rule, see `environment`). A tensor
that is a view of another tensor's memory follows the same rule for its own dimensions, and its
base (`x._base`, read by the guards as such) for the base's: the fake of a view is made from a
fake of its base, so the base's symbols must be bound by reads of the base.
"""
from __future__ import annotations

import threading
from typing import Iterable, Optional, Union

import torch

from guards.sources import AttrSource, BufferSource, ParamSource, Source

_DYNAMIC_MARK = "_jit_dynamic_dims"
_STATIC_MARK = "_jit_static_dims"


def mark_dynamic(tensor: torch.Tensor, dim: Union[int, Iterable[int]], *,
                 min: Optional[int] = None, max: Optional[int] = None) -> None:
    """Trace dimension(s) `dim` of `tensor` with a symbolic size in the first compile that
    sees this tensor object, within [min, max] when given (a call outside recompiles)."""
    marks = dict(getattr(tensor, _DYNAMIC_MARK, {}))
    for index in _dims(tensor, dim, "mark_dynamic"):
        if min is not None and max is not None and min > max:
            raise ValueError(f"mark_dynamic: min={min} is larger than max={max}")
        marks[index] = (min, max)
    setattr(tensor, _DYNAMIC_MARK, marks)


def mark_static(tensor: torch.Tensor, dim: Union[int, Iterable[int]]) -> None:
    """Never trace dimension(s) `dim` of `tensor` with a symbolic size."""
    marks = set(getattr(tensor, _STATIC_MARK, ()))
    marks.update(_dims(tensor, dim, "mark_static"))
    setattr(tensor, _STATIC_MARK, frozenset(marks))


def _dims(tensor: torch.Tensor, dim, caller: str) -> list[int]:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{caller}: expected a tensor, got {type(tensor).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    result = []
    for index in dims:
        if not isinstance(index, int) or not -tensor.dim() <= index < max(tensor.dim(), 1):
            raise IndexError(f"{caller}: dimension {index!r} is out of range for a tensor of "
                             f"{tensor.dim()} dimensions")
        result.append(index % tensor.dim())
    return result


class SizeHistory:
    """The sizes each source had in earlier compiles of one code object (None: already seen
    to change), and for a region (the code after a graph break) the dimensions its inputs
    were symbolic in when the trace before the break reached it (`inherit`). Shared by the
    threads compiling that code (under the compile lock)."""

    def __init__(self) -> None:
        self._sizes: dict[str, tuple] = {}
        self._inherited: dict[str, frozenset] = {}
        self._lock = threading.Lock()

    def changed_dims(self, source: Source, sizes: tuple[int, ...]) -> set[int]:
        """Dimensions whose size differs from an earlier compile's; records `sizes`."""
        key = source.name()
        with self._lock:
            seen = self._sizes.get(key)
            if seen is None or len(seen) != len(sizes):
                self._sizes[key] = tuple(sizes)
                return set()
            merged = tuple(None if old != new else old for old, new in zip(seen, sizes))
            self._sizes[key] = merged
        return {dim for dim, entry in enumerate(merged) if entry is None}

    def inherit(self, dims: dict) -> None:
        """{source name: dims} traced symbolically before a graph break, for the inputs of
        the region after it (`dynamo.resume.inheritance`); merged with earlier ones."""
        with self._lock:
            for key, found in dims.items():
                self._inherited[key] = self._inherited.get(key, frozenset()) | frozenset(found)

    def inherited(self, source: Source, rank: int) -> set[int]:
        """The dimensions of `source` (a value of `rank` dimensions) inherited as symbolic."""
        with self._lock:
            return {dim for dim in self._inherited.get(source.name(), ()) if dim < rank}


class Dims(dict):
    """{dim: (min, max)} for the dimensions of one input tensor to trace symbolically; for a
    view, `base` holds the same for its base tensor (`x._base`)."""

    def __init__(self, dims: dict, base: Optional[dict] = None) -> None:
        super().__init__(dims)
        self.base = base or {}


class DimensionPolicy:
    """Which dimensions of a frame's input tensors one trace makes symbolic."""

    def __init__(self, dynamic: Optional[bool], history: Optional[SizeHistory]) -> None:
        self.dynamic = dynamic
        self.history = history

    def dims(self, tensor: torch.Tensor, source: Source) -> Dims:
        """{dim: (min, max)} to trace symbolically (bounds None where unbounded); a view's
        base gets its own choice, under the source `<view>._base`."""
        if tensor.layout is not torch.strided or tensor.dim() == 0:
            return Dims({})
        base = tensor._base
        if base is not None and base.layout is not torch.strided:
            return Dims({})
        chosen = self._own_dims(tensor, source)
        if base is None or base.dim() == 0:
            return Dims(chosen)
        return Dims(chosen, self._own_dims(base, AttrSource(source, "_base")))

    def _own_dims(self, tensor: torch.Tensor, source: Source) -> dict[int, tuple]:
        sizes = tuple(tensor.shape)
        changed = self.history.changed_dims(source, sizes) \
            if self.dynamic is not False and self.history is not None else set()
        marked = dict(getattr(tensor, _DYNAMIC_MARK, {}))
        static = getattr(tensor, _STATIC_MARK, frozenset())
        if self.dynamic and not _module_state(tensor, source):
            chosen = set(range(len(sizes)))
        else:
            chosen = changed
        chosen |= set(marked) | self._inherited(source, len(sizes))
        return {dim: marked.get(dim, (None, None)) for dim in sorted(chosen)
                if dim not in static and sizes[dim] >= 2}

    def number(self, value: int, source: Source) -> bool:
        """Whether an int argument of the frame is traced as a symbol (automatic dynamic: it
        changed since an earlier compile; `dynamic=True`: always; any setting: a region's
        int that was a symbol before the graph break). 0 and 1 never are."""
        if type(value) is not int:
            return False
        changed = self.dynamic is None and self.history is not None and \
            bool(self.history.changed_dims(source, (value,)))  # recorded whatever the value
        inherited = bool(self._inherited(source, 1))
        if self.dynamic is False:
            return value >= 2 and inherited
        return value >= 2 and (bool(self.dynamic) or changed or inherited)

    def _inherited(self, source: Source, rank: int) -> set[int]:
        return set() if self.history is None else self.history.inherited(source, rank)


def _module_state(tensor: torch.Tensor, source: Source) -> bool:
    """Parameters and buffers: `dynamic=True` leaves them static (their sizes are the model's,
    not the data's); automatic dynamic still follows them if they change."""
    return isinstance(tensor, torch.nn.Parameter) or isinstance(source, (ParamSource,
                                                                         BufferSource))


STATIC = DimensionPolicy(False, None)
"""The policy of a trace that specialises every size (no marks are honoured: tests, tools)."""
