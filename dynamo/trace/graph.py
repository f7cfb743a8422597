"""The FX graph under construction while a frame is traced.

Input: tensor operations met by the interpreter (target, variable arguments). Output: an
`fx.GraphModule` whose placeholders are the frame's tensors (arguments, parameters, buffers,
globals: one placeholder per tensor object) and whose outputs the rewritten frame unpacks.

Every node is also run on fake tensors, so each `TensorVariable` knows its shape, dtype,
device, strides and `requires_grad` without computing anything.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import operator
import re
import threading
from typing import Any, Callable, Optional

import torch
import torch.fx
from torch._dispatch.python import enable_python_dispatcher
from torch.multiprocessing.reductions import StorageWeakRef
from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                           DynamicOutputShapeException)

from dynamo.breaks import (DYNAMIC_SHAPE_OP, SCALAR_OUT, UNSUPPORTED_CALL, UNSUPPORTED_OBJECT,
                           Unsupported)
from dynamo.variables.base import Variable
from guards.sources import Source
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import ListVariable, TupleVariable
from dynamo.variables.lowering import lower
from dynamo.variables.opaque import OpaqueNodeVariable
from dynamo.variables.symbolic import SymbolicVariable, is_symbolic
from dynamo.settings import config
from inductor.symbolic_overlap import apart_by_residue
from dynamo.shapes import STATIC, DimensionPolicy, SymbolicSizes
from dynamo.trace.write_counts import WriteCounts
from dynamo.variables.tensor import TensorVariable

# Calls whose result holds no tensor but which must stay in the graph for their effect.
EFFECTFUL = {torch._C._set_grad_enabled, torch.autograd.grad_mode._enter_inference_mode,
             torch.autograd.grad_mode._exit_inference_mode, torch.amp._enter_autocast,
             torch.amp._exit_autocast}


class GraphBuilder:
    """One FX graph plus its fake-tensor mode, inputs and example values."""

    def __init__(self, policy: DimensionPolicy = STATIC):
        self.graph = torch.fx.Graph()
        self.policy = policy
        self.shapes = SymbolicSizes()
        self.shapes.where = lambda: self.location  # where a size was specialised (explain)
        self.fake_mode = self.shapes.fake_mode()
        self.write_counts = WriteCounts()     # writes into inference tensors (no counters)
        self.example_inputs: list[torch.Tensor] = []
        self.input_sources: list[Source] = []
        self._inputs_by_id: dict[int, "Variable"] = {}
        self._names: set[str] = set()
        self.location: Optional[str] = None  # user file:line of the instruction being traced

    # -- inputs ----------------------------------------------------------------------------
    def add_input(self, value: torch.Tensor, source: Source) -> "Variable":
        """A placeholder for a real tensor of the frame (deduplicated by object)."""

        known = self._inputs_by_id.get(id(value))
        if known is not None:
            return known
        try:
            fake = self.shapes.fake_input(self.fake_mode, value, source,
                                          self.policy.dims(value, source))
        except AssertionError as error:
            # The fake of another view of `value`'s memory was written in the graph so far
            # (`v = x.view(-1); v *= w` with w requiring grad, then x read): the fake `value`
            # derived from it requires grad, the real one does not yet. Read after the graph.
            raise Unsupported(UNSUPPORTED_OBJECT, f"{source.name()}, whose memory the graph "
                              "already wrote through another view, read for the first "
                              f"time ({error})") from None
        except RuntimeError as error:
            if "created in no_grad mode" not in str(error):
                raise
            # A view made under no_grad whose base was then written with grad mode on: any read
            # of its autograd history raises (eager raises too, but only where the program
            # reads it). Its uses run eagerly, where that error is the program's own.
            raise Unsupported(UNSUPPORTED_OBJECT, f"{source.name()}, a tensor whose autograd "
                              f"history cannot be read ({error})") from None
        node = self.graph.placeholder(self._fresh_name(source.name()))
        node.meta["example_value"] = fake
        node.meta["source"] = source
        self.example_inputs.append(value)
        self.input_sources.append(source)
        result = TensorVariable(node, fake, source=source)
        self._inputs_by_id[id(value)] = result
        return result

    def add_number_input(self, value: int, source: Source) -> "Variable":
        """A placeholder for an int of the frame traced as a symbol (`dynamo.shapes.policy`)."""
        number = self.shapes.number_input(value, source)
        node = self.graph.placeholder(self._fresh_name(source.name()))
        node.meta["example_value"] = number
        node.meta["source"] = source
        self.example_inputs.append(value)
        self.input_sources.append(source)
        return SymbolicVariable(node, number, source=source)

    def _fresh_name(self, text: str) -> str:
        base = re.sub(r"\W+", "_", text).strip("_") or "input"
        name, counter = base, 1
        while name in self._names:
            counter += 1
            name = f"{base}_{counter}"
        self._names.add(name)
        return name

    # -- operations ------------------------------------------------------------------------
    def call(self, kind: str, target: Any, args: tuple, kwargs: dict) -> "Variable":
        """Record `target(*args, **kwargs)` (variables) and return the wrapped result."""
        node_args, fake_args = _lower(args)
        node_kwargs, fake_kwargs = _lower(kwargs)
        versions = self._versions(fake_args, fake_kwargs)
        try:
            with self.fake_mode, self._dispatcher(), _QUIET_FAKE_FAILURES, \
                    self.write_counts.recording(fake_args, fake_kwargs):
                fake = _run(kind, target, fake_args, fake_kwargs)
        except (DataDependentOutputException, DynamicOutputShapeException) as error:
            kind_of_break = SCALAR_OUT if _is_scalar_read(target) else DYNAMIC_SHAPE_OP
            raise Unsupported(kind_of_break, f"{_name(target)}: {error}") from None
        except Unsupported:
            raise
        except Exception as error:
            raise Unsupported(UNSUPPORTED_CALL, f"{_name(target)} failed on example inputs: "
                              f"{type(error).__name__}: {error}", exact_frames=True) from None
        self.shapes.check_time(config.symbolic_trace_seconds)
        _guard_mask_shapes(kind, target, fake_args)
        after = self._versions(fake_args, fake_kwargs)
        overlap = _written_overlap(target, fake_args, fake_kwargs) if versions != after else ""
        if overlap:
            raise Unsupported(UNSUPPORTED_CALL, f"{_name(target)} writes into {overlap}: "
                              "eager refuses most such writes when it runs them",
                              exact_frames=True)
        if versions != after and not torch.is_inference_mode_enabled() and \
                _writes_inference_tensor((fake_args, fake_kwargs), versions, after):
            raise Unsupported(UNSUPPORTED_CALL, f"{_name(target)} writes into an inference "
                              "tensor outside torch.inference_mode: eager refuses it when it "
                              "runs it (fake tensors do not)", exact_frames=True)
        node = self.graph.create_node(kind, target, node_args, node_kwargs)
        node.meta["example_value"] = fake
        node.meta["location"] = self.location
        node.meta["mutates"] = versions != after or writes_arguments(target)
        result = self._wrap(node, fake, target)
        if node.meta["mutates"] and isinstance(fake, torch.Tensor):
            same = _argument_with_example(args, fake)  # `x.add_(1)` returns `x` itself
            if same is not None:
                return same
        return result

    def _versions(self, *values: Any) -> list[int]:
        """Version counters of every tensor in `values`: an in-place op (a method ending in
        `_`, `operator.setitem`, `inplace=True`, `out=`) bumps the counter of what it writes;
        an inference tensor has none, its writes are counted (`write_counts.py`)."""
        return [self.write_counts.version(leaf) for leaf in
                torch.utils._pytree.tree_leaves(values) if isinstance(leaf, torch.Tensor)]

    def _dispatcher(self):
        """With symbolic sizes, torch's Python dispatcher: composite ops then run their Python
        decompositions, which take symbolic sizes (C++ ones like `constant_pad_nd`, met in
        CUDA attention with a mask, require concrete ints)."""
        return enable_python_dispatcher() if self.shapes.used else contextlib.nullcontext()

    def _wrap(self, node: torch.fx.Node, fake: Any, target: Any) -> "Variable":

        if isinstance(fake, torch.Tensor):
            return TensorVariable(node, fake)
        if isinstance(fake, (tuple, list)) and any(isinstance(item, torch.Tensor) for item in fake):
            items = []
            for index, item in enumerate(fake):
                if isinstance(item, torch.Tensor):
                    getter = self.graph.call_function(operator.getitem, (node, index))
                    getter.meta["example_value"] = item
                    items.append(TensorVariable(getter, item))
                else:
                    items.append(ConstantVariable(item))
            if isinstance(fake, tuple):  # torch.return_types keep their class
                return TupleVariable(tuple(items), type(fake))
            return ListVariable.new(items)
        if target in EFFECTFUL and fake is not None:
            return OpaqueNodeVariable(node, fake)
        if is_symbolic(fake):
            return SymbolicVariable(node, fake)
        if not node.meta["mutates"] and target not in EFFECTFUL:
            self.graph.erase_node(node)
        return ConstantVariable(fake)

    def output(self, values: list["Variable"]) -> torch.fx.GraphModule:
        """Finish the graph with `values` (tensor variables) as its outputs."""
        self.graph.output(tuple(value.node for value in values))
        self.graph.eliminate_dead_code(_is_impure)
        module = torch.fx.GraphModule(torch.nn.Module(), self.graph)
        return module

    def op_count(self) -> int:
        return sum(1 for node in self.graph.nodes if node.op in ("call_function", "call_method"))


def _argument_with_example(args: tuple, fake: torch.Tensor):
    """The tensor variable among `args` whose example is `fake`, if any."""
    for value in args:
        if isinstance(value, TensorVariable) and value.example is fake:
            return value
    return None


def _is_impure(node: torch.fx.Node) -> bool:
    return node.op in ("placeholder", "output") or node.target in EFFECTFUL or \
        node.meta.get("mutates", False)


class _QuietFakeFailures(logging.Filter):
    """While an operation runs on fake tensors for the trace, drops the records torch's fake
    tensor logger writes about it: a meta kernel raising (`x.amax(0)` of an empty `x`) is
    logged at ERROR level with a traceback on stderr, where eager prints nothing; the failure
    becomes a graph break and eager then raises its own error in the user's frame."""

    def __init__(self):
        super().__init__()
        self._local = threading.local()

    def __enter__(self):
        self._local.depth = getattr(self._local, "depth", 0) + 1

    def __exit__(self, *exc_info):
        self._local.depth -= 1
        return False

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self._local, "depth", 0)


_QUIET_FAKE_FAILURES = _QuietFakeFailures()
logging.getLogger("torch._subclasses.fake_tensor").addFilter(_QUIET_FAKE_FAILURES)


def _writes_inference_tensor(values: Any, before: list, after: list) -> bool:
    """Whether a tensor among `values` whose count moved (`before` -> `after`, one entry per
    tensor leaf) is an inference tensor."""
    tensors = [leaf for leaf in torch.utils._pytree.tree_leaves(values)
               if isinstance(leaf, torch.Tensor)]
    return any(tensor.is_inference() and first != last
               for tensor, first, last in zip(tensors, before, after))


def _written_overlap(target: Any, args: tuple, kwargs: dict) -> str:
    """Why a write is one eager checks at run time and fake tensors do not: the written
    region (an in-place method's tensor, `out=`, the indexed part of `x[i] = v`) overlaps
    itself (an expanded view) or shares elements with another argument (`out=w` with `w.T`
    as an input, `x[1:] = x[:-1]`). Such an op runs eagerly, in its real frames, where eager
    raises its own error or, where it allows the write, computes what it computes (a compiled,
    functional version reads the old values). Empty: no such write."""
    written, others = _written_region(target, args, kwargs)
    if written is None:
        return ""
    if any(stride == 0 and size > 1 for size, stride in zip(written.shape, written.stride())):
        return "a tensor whose elements share memory (an expanded view)"
    storage = StorageWeakRef(written.untyped_storage())
    for other in others:
        if other.numel() == 0 or StorageWeakRef(other.untyped_storage()) != storage:
            continue
        if (other.shape, other.stride(), other.storage_offset()) != \
                (written.shape, written.stride(), written.storage_offset()) and \
                _share_elements(written, other):
            return "a region that shares elements with another argument"
    return ""


def _written_region(target: Any, args: tuple, kwargs: dict):
    """(the tensor an operation writes, the other tensors it reads), or (None, ())."""
    tensors = [leaf for leaf in torch.utils._pytree.tree_leaves((args, kwargs))
               if isinstance(leaf, torch.Tensor)]
    if target is operator.setitem and isinstance(args[0], torch.Tensor):
        region = _indexed_view(args[0], args[1])  # not `x[mask] = v`: that copies
        others = [tensor for tensor in tensors[1:] if tensor is not args[0]]
        return region, others
    out = kwargs.get("out")
    if isinstance(out, torch.Tensor):
        return out, [tensor for tensor in tensors if tensor is not out]
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    in_place = (name.endswith("_") and not name.startswith("_")) or \
        (name.startswith("__i") and name.endswith("__")) or target in _IN_PLACE_OPERATORS
    if in_place and args and isinstance(args[0], torch.Tensor):  # `x.mul_(y)`, `x *= y`
        return args[0], [tensor for tensor in tensors if tensor is not args[0]]
    return None, ()


_IN_PLACE_OPERATORS = frozenset({operator.iadd, operator.isub, operator.imul,
                                 operator.itruediv, operator.ifloordiv, operator.imod,
                                 operator.ipow, operator.iand, operator.ior, operator.ixor,
                                 operator.ilshift, operator.irshift, operator.imatmul})


def _indexed_view(tensor: torch.Tensor, index: Any):
    """`tensor[index]` as a view of the same storage, or None (advanced indexing copies)."""
    parts = index if isinstance(index, tuple) else (index,)
    if any(isinstance(part, (torch.Tensor, list)) for part in parts):
        return None
    try:
        view = tensor[index]
    except Exception:  # noqa: BLE001  (the real op raised; eager decides)
        return None
    return view if view._base is not None or view is tensor else None


def _element_offsets(tensor: torch.Tensor) -> torch.Tensor:
    extent = tensor.storage_offset() + 1 + sum((size - 1) * stride for size, stride
                                               in zip(tensor.shape, tensor.stride()))
    return torch.arange(extent).as_strided(tuple(tensor.shape), tuple(tensor.stride()),
                                           tensor.storage_offset())


def _symbolic_geometry(tensor: torch.Tensor) -> bool:
    """Whether a size, stride or the storage offset of `tensor` is a `torch.SymInt`."""
    return any(isinstance(number, torch.SymInt) for number in
               (*tensor.shape, *tensor.stride(), tensor.storage_offset()))


def _share_elements(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two views of one storage share an element (`x[:, 0]` and `x[:, 1]` do not:
    writing one while reading the other is what eager computes too). Large views are taken
    to share (a graph break, never a wrong value), and so are views with symbolic sizes,
    strides or offsets unless known apart for every size (`_apart_by_residue`): an answer
    for the traced sizes need not hold for the others (and concrete kernels refuse SymInts:
    program fuzzer seed 60167, `--dynamic true`)."""
    if _symbolic_geometry(a) or _symbolic_geometry(b):
        return not _apart_by_residue(a, b)
    if a.numel() > 1 << 16 or b.numel() > 1 << 16:
        return True
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        return bool(torch.isin(_element_offsets(a).reshape(-1),
                               _element_offsets(b).reshape(-1)).any())


def _apart_by_residue(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two views of one storage are known, for every size and without a guard, to
    share no element: every stride of both is a multiple of the smallest one, `m`, and the
    storage offsets differ by less than `m` (each view's elements then lie at its own offset
    modulo `m`): `x[:, 0]` and `x[:, 1]` of an (s0, s1) `x`."""
    if a.element_size() != b.element_size():
        return False    # offsets counted in other units
    return apart_by_residue(a, b)   # the proof inductor makes of the same writes


@functools.lru_cache(maxsize=None)
def _schema_writes(name: str) -> bool:
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return False
    for overload in packet.overloads():
        if "out" in overload:  # `add.out` writes only when given `out=`: versions see that
            continue
        schema = getattr(packet, overload)._schema
        if any(argument.alias_info is not None and argument.alias_info.is_write
               for argument in schema.arguments):
            return True
    return False


def writes_arguments(target: Any) -> bool:
    """Whether the operation writes into an argument by its schema: what fake tensors'
    version counters miss (`torch._foreach_lerp_(averages, params, w)` bumps none on fake
    tensors, and the node was dropped as dead code: the averages never changed)."""
    if isinstance(target, torch._ops.OpOverload):
        return any(argument.alias_info is not None and argument.alias_info.is_write
                   for argument in target._schema.arguments)
    name = target if isinstance(target, str) else getattr(target, "__name__", None)
    module = getattr(target, "__module__", None) or ""
    if not isinstance(name, str) or (not isinstance(target, str) and
                                     not module.startswith("torch")):
        return False
    try:
        return _schema_writes(name)
    except (RuntimeError, AttributeError):
        return False




def _is_scalar_read(target: Any) -> bool:
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    return name in ("item", "tolist", "__bool__", "__int__", "__float__", "numpy")


def _name(target: Any) -> str:
    if isinstance(target, str):
        return f"Tensor.{target}"
    module = getattr(target, "__module__", None) or ""
    return f"{module}.{getattr(target, '__name__', repr(target))}".lstrip(".")


_INDEX_PUTS = frozenset({torch.index_put, torch.index_put_, torch.Tensor.index_put,
                         torch.Tensor.index_put_, "index_put", "index_put_"})


def _guard_mask_shapes(kind: str, target: Any, args: tuple) -> None:
    """Eager's check that a boolean mask indexing a write has the sizes of the dims it
    covers (`x[m] = v`, `x.index_put_((m,), v)`: IndexError otherwise) asked of the sizes,
    so that it becomes a guard: torch's fake `index_put_` does not ask, and inductor's
    lowering of the write (`decompose._index_put_with_mask`) then assumed a relation the
    entry did not guard (compiled per size: 29 of the fuzzer's 44 per-size graphs)."""
    if kind == "call_function" and target is operator.setitem and len(args) == 3:
        index, skips = args[1], False   # (None adds a dim)
    elif target in _INDEX_PUTS and len(args) >= 2 and isinstance(args[1], (tuple, list)):
        index, skips = tuple(args[1]), True     # (None keeps a dim whole)
    else:
        return
    tensor = args[0]
    items = index if isinstance(index, tuple) else (index,)
    if not isinstance(tensor, torch.Tensor) or not any(
            isinstance(item, torch.Tensor) and item.dtype in (torch.bool, torch.uint8)
            for item in items):
        return
    dim = 0
    for item in items:
        if item is Ellipsis:
            return
        if isinstance(item, torch.Tensor) and item.dtype in (torch.bool, torch.uint8):
            for offset, extent in enumerate(item.shape):
                if dim + offset < tensor.dim():
                    bool(tensor.shape[dim + offset] == extent)  # (a guard where symbolic)
            dim += item.dim()
        elif item is not None or skips:
            dim += 1


def _run(kind: str, target: Any, args: tuple, kwargs: dict) -> Any:
    if kind == "call_method":
        return getattr(args[0], target)(*args[1:], **kwargs)
    return target(*args, **kwargs)


def _lower(value: Any) -> tuple[Any, Any]:
    """Variables -> (FX node arguments, fake example arguments)."""
    return lower(value)


Lowerer = Callable[[Any], tuple[Any, Any]]
