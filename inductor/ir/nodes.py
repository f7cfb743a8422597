"""The loop IR: boxes over storages, loop bodies over sympy index symbols, buffers, views.

Input: built by the lowering, one ATen node at a time. Output: the buffers of a `LoopGraph`
that the scheduler turns into kernels. The shape:

    TensorBox -> StorageBox -> Pointwise | Reduction      (a value not yet in memory)
                            -> Buffer                     (input, computed, or from a library call)
    TensorBox -> View (index remap) -> ... -> StorageBox  (views cost nothing until read)

A `Pointwise` is `inner_fn(index) -> value`; a `Reduction` is `inner_fn(index, rindex)`
combined over `reduction_ranges`. Bodies compute through the `ops` handler, so the same body
is analysed, printed and turned into C++ by swapping handlers. Unrealized values are inlined
into their readers; `realize()` gives them a buffer (on reuse, before reductions read them
from several places, and for outputs).
"""
from __future__ import annotations

import contextlib
from typing import Callable, Optional, Sequence

import torch

from inductor.ir.layout import Layout
from inductor.ir.ops import ops
from inductor.ir.symbols import Expr, product, to_expr

REDUCTION_TYPES = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all", "var_m2",
                   "welford_mean")
# Reductions kept as Welford (mean, m2, count) triples; they differ in the part they return.
WELFORD_PART = {"var_m2": "m2", "welford_mean": "mean"}
WELFORD = tuple(WELFORD_PART)

_graphs: list = []


@contextlib.contextmanager
def building(graph):
    """Make `graph` (which has `register_buffer(buffer) -> name`) the graph realize() adds to."""
    _graphs.append(graph)
    try:
        yield graph
    finally:
        _graphs.pop()


def current_graph():
    """The graph under construction."""
    return _graphs[-1]


class IRNode:
    """A tensor-valued node: size, dtype, device, and a loader `index -> value`."""

    origin: Optional[str] = None  # the FX node this came from, for printing

    def get_size(self) -> list:
        raise NotImplementedError

    def get_dtype(self) -> torch.dtype:
        raise NotImplementedError

    def get_device(self) -> torch.device:
        raise NotImplementedError

    def make_loader(self) -> Callable:
        raise NotImplementedError

    def numel(self) -> Expr:
        return product(self.get_size())

    def realize(self) -> Optional["Buffer"]:
        """Give the value a buffer if it has none; return the buffer if there is one."""
        return None


class Loops(IRNode):
    """A loop body over `ranges`, producing values of `dtype` on `device`."""

    def __init__(self, device: torch.device, dtype: torch.dtype, inner_fn: Callable,
                 ranges: Sequence):
        self.device = device
        self.dtype = dtype
        self.inner_fn = inner_fn
        self.ranges = [to_expr(value) for value in ranges]

    def get_size(self) -> list:
        return list(self.ranges)

    def get_dtype(self) -> torch.dtype:
        return self.dtype

    def get_device(self) -> torch.device:
        return self.device


class Pointwise(Loops):
    """`value[index] = inner_fn(index)`."""

    def make_loader(self) -> Callable:
        return self.inner_fn


class Reduction(Loops):
    """`value[index] = combine over rindex of inner_fn(index, rindex)`.

    `reduction_type` is one of `REDUCTION_TYPES`; `src_dtype` is the dtype the body yields
    (accumulation happens in float for half types, in int64 for integer sums). `var_m2` is
    the sum of squared deviations from the mean, computed in one Welford pass; `welford_mean`
    the mean of that pass (exact for equal values, as eager's var_mean and layer/group norm:
    `sum / count` is not).
    """

    def __init__(self, device, dtype, inner_fn, ranges, reduction_ranges: Sequence,
                 reduction_type: str, src_dtype: torch.dtype):
        super().__init__(device, dtype, inner_fn, ranges)
        assert reduction_type in REDUCTION_TYPES, reduction_type
        self.reduction_ranges = [to_expr(value) for value in reduction_ranges]
        self.reduction_type = reduction_type
        self.src_dtype = src_dtype

    def make_loader(self) -> Callable:
        raise AssertionError("a reduction is read only after it is realized")


class Buffer(IRNode):
    """Memory with a name and a layout."""

    def __init__(self, name: Optional[str], layout: Layout):
        self.name = name
        self.layout = layout

    def get_name(self) -> str:
        return self.name

    def get_size(self) -> list:
        return list(self.layout.size)

    def get_dtype(self) -> torch.dtype:
        return self.layout.dtype

    def get_device(self) -> torch.device:
        return self.layout.device

    def make_loader(self) -> Callable:
        name, layout = self.name, self.layout

        def load(index):
            return ops.load(name, layout.index(index))
        return load

    def realize(self) -> "Buffer":
        return self


class InputBuffer(Buffer):
    """A graph input (user tensor, parameter or lifted constant)."""


class SizeInput(InputBuffer):
    """A graph input that is an int, not memory (a SymInt placeholder: an int carried across
    a graph break, `x[:k]`'s `k`): its readers use its size expression; the wrapper binds
    the expression's symbol from the argument (`GraphPlan.symbol_bindings`, kind "int")."""

    def __init__(self, name: str, expression):
        super().__init__(name, None)
        self.expression = expression


class ConstantBuffer(InputBuffer):
    """A tensor the graph holds as an attribute (`get_attr`): read through a reference to the
    live tensor, which the wrapper binds by name."""

    def __init__(self, name: str, layout: Layout, value):
        super().__init__(name, layout)
        self.value = value


class ComputedBuffer(Buffer):
    """A buffer filled by a generated loop (`data` is a Pointwise or Reduction).

    `mutated_input` names the graph input this buffer is written into instead of fresh
    memory (an in-place update of an input, e.g. BatchNorm running statistics).
    """

    def __init__(self, name, layout: Layout, data: Loops, mutated_input: Optional[str] = None):
        super().__init__(name, layout)
        self.data = data
        self.mutated_input = mutated_input

    def is_reduction(self) -> bool:
        return isinstance(self.data, Reduction)


class ScatterBuffer(ComputedBuffer):
    """A copy of `initial` (a loop body over this buffer's size) with values written at
    computed positions: for each index of `data` (a Pointwise over the source), element
    `destination(index)` (which may hold indirect indices) receives `data.inner_fn(index)`,
    replacing it (`mode=None`) or added to it (`mode="sum"`). Writes run in source order, so
    duplicate positions end as eager leaves them."""

    def __init__(self, name, layout: Layout, data: Loops, initial: Callable,
                 destination: Callable, mode: Optional[str]):
        super().__init__(name, layout, data)
        self.initial = initial
        self.destination = destination
        self.mode = mode


class ScanBuffer(ComputedBuffer):
    """A scan along `dim`: element `j` of each line along `dim` is the combination
    (`scan_type`: "sum", "prod" or "logsumexp") of the line's elements `0..j` of `data` (a
    Pointwise over this buffer's size), accumulated in order in `acc_dtype` and converted to
    the buffer's dtype element by element, as eager's CPU kernels do (float32 in float64,
    half types in float32, integers in int64)."""

    def __init__(self, name, layout: Layout, data: Loops, dim: int, scan_type: str,
                 acc_dtype: torch.dtype):
        super().__init__(name, layout, data)
        self.dim = dim
        self.scan_type = scan_type
        self.acc_dtype = acc_dtype


class ExternKernel(Buffer):
    """A buffer produced by an ATen kernel called as is.

    `kind` is "library" (matmul, convolution, attention: kept by design) or "fallback" (no
    lowering exists). `arguments` is the call's `(args, kwargs)` where each tensor argument is
    replaced by `TensorArgument(position)` into `inputs` (realized buffers or strided views).
    A kernel returning several tensors has `layout = None`; `MultiOutput`s pick them out.
    """

    def __init__(self, name, layout: Optional[Layout], kernel, inputs: list, arguments,
                 kind: str, device: torch.device):
        super().__init__(name, layout)
        self.kernel = kernel
        self.inputs = inputs
        self.arguments = arguments
        self.kind = kind
        self.device = device

    def op_name(self) -> str:
        packet = getattr(self.kernel, "overloadpacket", None)
        return str(packet) if packet is not None else getattr(self.kernel, "__name__", "op")

    def get_device(self) -> torch.device:
        return self.device


class TensorArgument:
    """A placeholder for the `position`-th tensor input of an `ExternKernel` call."""

    def __init__(self, position: int):
        self.position = position

    def __repr__(self) -> str:
        return f"input{self.position}"


class MultiOutput(Buffer):
    """One tensor of a multi-output `ExternKernel` result, at `path` (tuple of indices)."""

    def __init__(self, name, layout: Layout, parent: ExternKernel, path: tuple):
        super().__init__(name, layout)
        self.parent = parent
        self.path = path


class StorageBox(IRNode):
    """Owns a value that is either still a loop body (`Loops`) or already a `Buffer`.

    `preferred_stride` (eager's strides for the FX node that made it) is the layout a
    realized buffer takes unless something asks for another.
    """

    def __init__(self, data: IRNode, preferred_stride: Optional[Sequence] = None):
        self.data = data
        self.preferred_stride = preferred_stride
        self.reads = 0

    def get_size(self):
        return self.data.get_size()

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def make_loader(self):
        return self.data.make_loader()

    def is_realized(self) -> bool:
        return isinstance(self.data, Buffer)

    def realize(self) -> Buffer:
        if isinstance(self.data, Buffer):
            return self.data
        loops = self.data
        layout = Layout(loops.get_device(), loops.get_dtype(), loops.get_size(),
                        self.preferred_stride, fixed=False)
        buffer = ComputedBuffer(None, layout, loops)
        buffer.origin = getattr(loops, "origin", None)
        current_graph().register_buffer(buffer)
        self.data = buffer
        return buffer


class TensorBox(IRNode):
    """The value a lowering receives and returns: a StorageBox, possibly seen through views."""

    def __init__(self, data: IRNode):
        self.data = data

    @classmethod
    def create(cls, data: IRNode, preferred_stride: Optional[Sequence] = None) -> "TensorBox":
        """Box a fresh loop body or buffer."""
        return cls(StorageBox(data, preferred_stride))

    def get_size(self):
        return self.data.get_size()

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def make_loader(self):
        return self.data.make_loader()

    def realize(self) -> Optional[Buffer]:
        return self.data.realize()

    def storage(self) -> Optional[StorageBox]:
        """The StorageBox under any views."""
        node = self.data
        while isinstance(node, (View, TensorBox)):
            node = node.data
        return node if isinstance(node, StorageBox) else None


class View(IRNode):
    """`data` seen with a new `size`: element `index` is `data[reindex(index)]`."""

    def __init__(self, data: IRNode, size: Sequence, reindex: Callable):
        self.data = data
        self.size = [to_expr(value) for value in size]
        self.reindex = reindex

    def get_size(self):
        return list(self.size)

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def make_loader(self):
        inner = self.data.make_loader()
        reindex = self.reindex

        def load(index):
            return inner(reindex(index))
        return load

    def realize(self) -> Optional[Buffer]:
        return self.data.realize()


class ReinterpretView(IRNode):
    """A realized buffer read through another fixed layout over the same storage."""

    def __init__(self, data: Buffer, layout: Layout):
        self.data = data
        self.layout = layout

    def get_size(self):
        return list(self.layout.size)

    def get_dtype(self):
        return self.layout.dtype

    def get_device(self):
        return self.layout.device

    def get_name(self) -> str:
        return self.data.get_name()

    def make_loader(self):
        name, layout = self.data.get_name(), self.layout

        def load(index):
            return ops.load(name, layout.index(index))
        return load

    def realize(self) -> Buffer:
        return self.data
