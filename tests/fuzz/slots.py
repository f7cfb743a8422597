"""The fuzzer's type system: the slots a generated expression or variable can fill.

Stage: generation (shared by every construct). Input: nothing. Output: immutable slot values
(`TensorT`, `ScalarT`, `ListT`, ...) and the symbolic shapes tensors carry.

Shapes are symbolic in one size, the batch size `N`, which the runner changes between calls
(2 to 4): a dimension is `coef * N**power`, so that `x.T @ x` (power 0) and `x @ x.T` (power 2)
both have a shape the generator can reason about. Every dimension is at least 2 for every `N`
in range, except those of size 1 made by `unsqueeze`/`keepdim`.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

N_RANGE = (2, 4)  # the batch size of every call lies in this range


@dataclasses.dataclass(frozen=True)
class Dim:
    """`coef * N**power`."""

    coef: int
    power: int = 0

    def value(self, n: int) -> int:
        return self.coef * n ** self.power

    @property
    def smallest(self) -> int:
        return self.value(N_RANGE[0])

    def times(self, other: "Dim") -> "Dim":
        return Dim(self.coef * other.coef, self.power + other.power)

    def __str__(self) -> str:
        if self.power == 0:
            return str(self.coef)
        symbol = "N" if self.power == 1 else f"N^{self.power}"
        return symbol if self.coef == 1 else f"{self.coef}{symbol}"


Shape = tuple  # tuple[Dim, ...]


def const(*sizes: int) -> Shape:
    return tuple(Dim(size) for size in sizes)


BATCH = Dim(1, 1)


def numel(shape: Shape) -> Dim:
    total = Dim(1)
    for dim in shape:
        total = total.times(dim)
    return total


def concrete(shape: Shape, n: int) -> tuple:
    return tuple(dim.value(n) for dim in shape)


def shape_text(shape: Shape) -> str:
    return "(" + ", ".join(str(dim) for dim in shape) + ("," if len(shape) == 1 else "") + ")"


def has_batch(shape: Shape) -> bool:
    return any(dim.power for dim in shape)


@dataclasses.dataclass(frozen=True)
class TensorT:
    """A tensor of a symbolic shape. `dtype` is a family: "float" (the program's float dtype,
    float32 or float64 depending on the call), "long" or "bool"."""

    shape: Shape
    dtype: str = "float"

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"Tensor{shape_text(self.shape)}:{self.dtype}"


@dataclasses.dataclass(frozen=True)
class ScalarT:
    """A Python scalar: kind "int" (with bounds lo..hi), "float", "bool" or "str"."""

    kind: str
    lo: int = 0
    hi: int = 0

    def __str__(self) -> str:
        return f"{self.kind}[{self.lo}..{self.hi}]" if self.kind == "int" else self.kind


INT = ScalarT("int", 0, 3)
FLOAT = ScalarT("float")
BOOL = ScalarT("bool")
STR = ScalarT("str")


@dataclasses.dataclass(frozen=True)
class ListT:
    """A list whose elements all fill `elem` (its length is tracked per variable)."""

    elem: object

    def __str__(self) -> str:
        return f"list[{self.elem}]"


@dataclasses.dataclass(frozen=True)
class DictT:
    """A dict of str keys, each mapped to a value filling `value`; `keys` are those known to be
    present."""

    keys: tuple
    value: object

    def __str__(self) -> str:
        return f"dict[{','.join(self.keys)}: {self.value}]"


@dataclasses.dataclass(frozen=True)
class TupleT:
    items: tuple

    def __str__(self) -> str:
        return "tuple[" + ", ".join(str(item) for item in self.items) + "]"


@dataclasses.dataclass(frozen=True)
class ObjT:
    """An instance of a generated class (its attributes live in the class's `ClassInfo`)."""

    cls: str

    def __str__(self) -> str:
        return self.cls


@dataclasses.dataclass(frozen=True)
class ModT:
    """An instance of a generated `nn.Module` subclass: `m(t)` maps `inp` to `out`."""

    cls: str
    inp: TensorT
    out: TensorT

    def __str__(self) -> str:
        return f"{self.cls}({self.inp} -> {self.out})"


@dataclasses.dataclass(frozen=True)
class NamespaceT:
    """A `types.ModuleType` configuration object read by attribute."""

    name: str

    def __str__(self) -> str:
        return f"module {self.name}"


@dataclasses.dataclass(frozen=True)
class ClassT:
    """A generated class itself (class attributes, constructor)."""

    name: str


@dataclasses.dataclass(frozen=True)
class CallableT:
    """A function value (closure, lambda, helper) mapping `params` to `result`."""

    params: tuple
    result: object


def same_slot(a, b) -> bool:
    """Whether a value of slot `a` may stand where `b` is expected (int bounds included)."""
    if isinstance(a, ScalarT) and isinstance(b, ScalarT):
        if a.kind != b.kind:
            return False
        return a.kind != "int" or (b.lo <= a.lo and a.hi <= b.hi)
    return a == b


def is_float_tensor(slot) -> bool:
    return isinstance(slot, TensorT) and slot.dtype == "float"


def int_slot(lo: int, hi: int) -> ScalarT:
    return ScalarT("int", lo, hi)


def dim_bounds(dim: Dim) -> tuple:
    return dim.value(N_RANGE[0]), dim.value(N_RANGE[1])


def reduce_shape(shape: Shape, axis: int, keepdim: bool = False) -> Shape:
    axis = axis % len(shape)
    if keepdim:
        return shape[:axis] + (Dim(1),) + shape[axis + 1:]
    return shape[:axis] + shape[axis + 1:]


def matmul_shape(a: Shape, b: Shape) -> Optional[Shape]:
    """The shape of `a @ b` for 2-D/1-D operands, or None when they do not multiply."""
    if len(a) == 2 and len(b) == 2 and a[1] == b[0]:
        return (a[0], b[1])
    if len(a) == 2 and len(b) == 1 and a[1] == b[0]:
        return (a[0],)
    if len(a) == 1 and len(b) == 2 and a[0] == b[0]:
        return (b[1],)
    return None


def broadcasts_to(small: Shape, big: Shape) -> bool:
    """Whether `small` broadcasts to `big` without changing `big` (a suffix, or size 1)."""
    if len(small) > len(big):
        return False
    for s, b in zip(reversed(small), reversed(big)):
        if s != b and s != Dim(1):
            return False
    return True
