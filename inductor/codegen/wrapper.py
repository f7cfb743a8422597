"""The Python wrapper: the function a compiled graph runs per call.

Input: a `GraphPlan`, its C++ segments and their loaded entry points. Output: Python source
(kept for people and logs) and the function compiled from it, which allocates buffers with
`empty_strided`, calls each segment's entry point (one native `launch(entry, *tensors, *sizes)`
where `runtime/native.cpp` builds, else the ctypes entry with `data_ptr()`s), calls library
kernels and eager fallbacks through ATen, frees each buffer and each input after its last
reader, and returns the outputs. A wrapper compiled over symbolic sizes first binds its size
symbols and checks its inputs' strides (`size_binding.py`).

Calling conventions: `call(*inputs)`, and `call.with_argument_list(inputs)`, which takes one
list and empties it, so that an input the caller no longer holds (a backward graph's saved
activations) is freed right after its last reader instead of when the call returns.

Host cost per call (every line runs on each call; on a GPU the host enqueueing work is often
the limit): a library call's tensor argument is the tensor itself where the view is all of it,
else `.t()` or `.view(...)` where that is the view, else `as_strided`; `mm`/`addmm` of a
transposed 2-D weight is one `linear` call; kernels are called through torch's bindings or an
overload's raw callable; results of ops that are always contiguous are not checked.

Memory reuse: a dead buffer's memory is handed to a later buffer of the same byte size, dtype
and device only where keeping it alive in between does not raise the graph's peak of live bytes
(`plan_reuse`, computed over the whole call before any line is written). Otherwise it is freed
at once: on CPU an unconditional pool held dead buffers until a later match that might be far
away or never come, which raised peaks by tens of megabytes in training graphs. A buffer the
graph returns (or an output views) that takes another layout's memory is a tensor of its own over
it (`own_tensor`, `runtime/native.py`), not a view: callers see `_base`, `is_view()` and a
view's shared version counter.
"""
from __future__ import annotations

import math
from typing import Optional

import sympy
import torch

from inductor.codegen.expressions import index_text
from inductor.ir.symbols import size_hint

from inductor.ir.nodes import (Buffer, ConstantBuffer, MultiOutput, ReinterpretView,
                               TensorArgument)
from inductor.schedule.plans import ExternStep, GraphPlan, KernelPlan
from inductor.codegen.memory_reuse import ReusePlanner
from inductor.runtime import native_program
from inductor.codegen.size_binding import InputLayoutChanged, binding_lines  # noqa: F401


class KernelError:
    """Raises what eager raises for an error a kernel reported."""

    @staticmethod
    def raise_for(status: int):
        if status == 1:
            raise RuntimeError("ZeroDivisionError")
        if status == 2:
            raise IndexError("index out of range in a compiled kernel (gather, index or "
                             "embedding with an index outside the tensor)")
        if status == 3:     # bounds mode (codegen/bounds.py): the details went to stderr
            raise IndexError("a compiled kernel accessed memory outside a buffer (bounds "
                             "check, inductor.config.bounds_check: kernel, buffer and index "
                             "on stderr); a bug in inductor's code generator")
        raise RuntimeError(f"compiled kernel failed with status {status}")


# Library ops whose results ATen always allocates afresh with contiguous strides (their
# structured meta functions say so): no stride check after them, and their storage offset is 0.
CONTIGUOUS_RESULT_OPS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
                         torch.ops.aten.bmm.default, torch.ops.aten.baddbmm.default}

# Products that take part in memory reuse on CPU, writing into a dead buffer (`out=`) and
# handing on their own result once dead: memory fresh from the system allocator costs a page
# fault per page on first touch (a 25088x96 @ 96x384 product: 23.7 ms into fresh memory,
# 12.1 ms with `out=`, 2-core VM). CUDA's caching allocator has no such cost.
OUT_PRODUCTS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
                torch.ops.aten.bmm.default}


def _significant(layout) -> list:
    """(extent, stride) of the dimensions longer than one: the others address nothing."""
    return [(_number(extent), _number(stride))
            for extent, stride in zip(layout.size, layout.stride) if extent != 1]


def view_kind(base, view) -> Optional[str]:
    """How `view` (a layout over a buffer's storage, offset from the buffer's first element)
    relates to the buffer's own layout `base`: "same" (all of it, as it lies), "transpose"
    (a 2-D buffer transposed), "reshape" (both contiguous over the same elements), else
    None."""
    if view.offset != 0 or base.offset != 0:
        return None
    base_size = [_number(extent) for extent in base.size]
    view_size = [_number(extent) for extent in view.size]
    if base_size == view_size and _significant(base) == _significant(view):
        return "same"
    if len(base_size) == 2 and view_size == base_size[::-1] and all(
            extent == 1 or _number(view.stride[dim]) == _number(base.stride[1 - dim])
            for dim, extent in enumerate(view_size)):
        return "transpose"
    if base.is_contiguous() and view.is_contiguous() and _same_count(base_size, view_size):
        return "reshape"
    return None


def _number(value):
    """A size or stride: an int where static, else its (canonical) sympy expression."""
    value = sympy.sympify(value)
    return int(value) if value.is_Integer else sympy.expand(value)


def _same_count(first: list, second: list) -> bool:
    """Whether two sizes hold the same (non-zero, where static) number of elements."""
    if all(isinstance(value, int) for value in first + second):
        return math.prod(first) == math.prod(second) > 0
    return sympy.expand(sympy.Mul(*first) - sympy.Mul(*second)) == 0


def size_text(value) -> str:
    """A size, stride or offset as Python: the int, or its expression over the symbols the
    wrapper binds at the top of each call (`s0 = arg0.shape[0]`)."""
    value = _number(value)
    return str(value) if isinstance(value, int) else index_text(value, "//")


# torch's own bindings of the matrix products: they reach the same ATen kernels as the
# overloads, through generated argument parsing that costs less per call than an overload's
# schema-driven one (2-core VM, 2x2 inputs: mm 1.0 us vs 1.3 through `_op` vs 1.6 through
# the overload; addmm 1.9 vs 2.6 vs 2.9).
PUBLIC_BINDINGS = {torch.ops.aten.mm.default: torch.mm, torch.ops.aten.addmm.default: torch.addmm,
                   torch.ops.aten.bmm.default: torch.bmm,
                   torch.ops.aten.baddbmm.default: torch.baddbmm,
                   # 4.3 us against 12 us through the overload: the JIT-schema argument
                   # parsing of its int lists costs more than the call (a ResNet-50 call on
                   # an H100 makes 54 of them and is host-bound)
                   torch.ops.aten.convolution.default: torch.convolution,
                   # an eager fallback (no lowering): 5.2-5.3 us against 6.2-7.3 through the
                   # overload's `_op`, for a 64x64 float32 input (2-core VM)
                   torch.ops.aten.cumsum.default: torch.cumsum}
# keywords each binding takes as the overload does (the others: `beta` and `alpha` at most)
PUBLIC_KEYWORDS = {torch.ops.aten.cumsum.default: {"dtype"}}


def raw_callable(kernel, keywords=()):
    """The cheapest callable running ATen `kernel` with the same arguments: torch's binding
    for the matrix products (keywords `beta` and `alpha` at most) and cumsum, else the
    callable behind an `OpOverload` (its `_op`: calling it skips the Python frame of
    `OpOverload.__call__`), else `kernel` itself."""
    public = PUBLIC_BINDINGS.get(kernel)
    if public is not None and set(keywords) <= PUBLIC_KEYWORDS.get(kernel, {"beta", "alpha"}):
        return public
    if isinstance(kernel, torch._ops.OpOverload):
        raw = getattr(kernel, "_op", None)
        if callable(raw):
            return raw
    return kernel


def _size_text(size) -> str:
    """The arguments of a `.view(...)` call to `size` (`()` for a 0-d view: `.view()` with no
    argument is a TypeError)."""
    return ", ".join(size_text(extent) for extent in size) if len(size) else "()"


def _restride(value: torch.Tensor, size, stride) -> torch.Tensor:
    result = torch.empty_strided(size, stride, dtype=value.dtype, device=value.device)
    return result.copy_(value)


def _unwritten(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` with its version counter at 0: a library product written into a dead
    buffer's memory (`out=`) moved it, where eager's product is a fresh tensor (program fuzzer
    seed 36179: a 1-D linear's result read version 1). An inference tensor (the call runs
    under `torch.inference_mode`) has no counter to put back."""
    if not tensor.is_inference():
        torch._C._autograd._unsafe_set_version_counter((tensor,), (0,))
    return tensor


def _returns_fresh(buffer) -> bool:
    """Whether the library call's schema returns one tensor aliasing no input."""
    schema = getattr(getattr(buffer, "kernel", None), "_schema", None)
    return schema is not None and len(schema.returns) == 1 and \
        schema.returns[0].alias_info is None


def _nbytes(layout):
    """Bytes of a layout's storage: an int, or an expression of the size symbols."""
    return _number(layout.storage_size() *
                   torch.empty((), dtype=layout.dtype).element_size())


def _nbytes_hint(layout) -> int:
    """`_nbytes` at the example sizes (peak planning: a heuristic, never correctness)."""
    return size_hint(_nbytes(layout))


def _viewed_by_library_calls(plan: GraphPlan) -> set:
    """Buffers passed to an eager op that may return a view of its input (its schema says
    so): the view outlives the buffer's last use, so its memory is never handed on."""
    viewed = set()
    for step in plan.steps:
        buffer = getattr(getattr(step, "node", None), "buffer", None)
        schema = getattr(getattr(buffer, "kernel", None), "_schema", None)
        if schema is None or not isinstance(step, ExternStep):
            continue
        if any(result.alias_info is not None for result in schema.returns):
            viewed |= step.node.read_names()
    return viewed


def _step_names(step) -> set:
    """Every buffer name a step reads or writes."""
    if isinstance(step, ExternStep):
        return step.node.read_names() | {step.name}
    return set(step.loads) | set(step.stores)


def _output_names(plan: GraphPlan) -> set:
    names = set()
    for value in plan.outputs:
        if isinstance(value, (Buffer, ReinterpretView)):
            names.add(value.get_name())
    return names


def input_last_uses(plan: GraphPlan) -> dict:
    """Step index -> graph inputs whose last reader (or writer) is that step. Inputs that are
    outputs, or that no step touches, are not listed (the latter are dropped on entry)."""
    inputs = [buffer.get_name() for buffer in plan.inputs
              if not isinstance(buffer, ConstantBuffer)]
    kept = _output_names(plan)
    last: dict = {}
    for position, step in enumerate(plan.steps):
        for name in _step_names(step):
            last[name] = position
    uses: dict = {}
    for name in inputs:
        if name in last and name not in kept:
            uses.setdefault(last[name], []).append(name)
    return uses


class WrapperWriter:
    """Builds the wrapper's source line by line (see the module docstring)."""

    def __init__(self, plan: GraphPlan, segments: list, entries: list):
        self.plan = plan
        self.segments = {segment.first_step: (segment, entry)
                         for segment, entry in zip(segments, entries)}
        self.lines: list[str] = []
        from inductor.runtime import native
        own_tensor, _ = native.output_geometry()
        self.globals: dict = {"torch": torch, "empty_strided": native.empty_strided(),
                              "as_strided": torch.as_strided, "kernel_error": KernelError.raise_for,
                              "restride": _restride, "own_tensor": own_tensor,
                              "unwritten": _unwritten,
                              "device": torch.device,
                              "inf": math.inf, "nan": math.nan}
        self.launch = native.launcher()     # None: entries are called through ctypes
        self.layout_differs = native.layout_check()     # None: checked in Python
        self.allocated = set(plan.allocated)
        self.input_frees = input_last_uses(plan)
        self.recorder: Optional[ReusePlanner] = None   # set while recording (first pass)
        self.reuse: dict = {}       # allocated name -> dead buffer whose memory it takes
        self.donors: set = set()
        self.viewed = _viewed_by_library_calls(plan)
        self.fresh: set = set()     # buffers whose tensors start their storage (see offset_text)
        self.views: set = set()     # buffers whose tensors are views of a dead buffer's memory
        self.observed = _output_names(plan)     # buffers returned, or viewed by an output
        self.inputs = {buffer.get_name() for buffer in plan.inputs}
        for name, buffer in plan.buffers.items():
            if isinstance(buffer, ConstantBuffer):
                self.globals[name] = buffer.value
                self.inputs.add(name)

    # -- helpers -----------------------------------------------------------------------
    def constant(self, value) -> str:
        """A Python expression for a constant argument (simple ones inline)."""
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, sympy.Expr) and not value.is_number:
            return size_text(value)     # a symbolic size argument (bound at the top)
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else \
                ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, torch.device):  # bound once: not a `torch.device(...)` per call
            name = "device_" + str(value).replace(":", "_")
            self.globals[name] = value
            return name
        if isinstance(value, (list, tuple)):
            items = [self.constant(item) for item in value]
            text = ", ".join(items) + ("," if isinstance(value, tuple) and len(items) == 1
                                       else "")
            return f"[{text}]" if isinstance(value, list) else f"({text})"
        name = f"constant{len(self.globals)}"
        self.globals[name] = value
        return name

    def reference(self, value) -> str:
        """A Python expression for a buffer or strided view of one (an `as_strided`)."""
        if isinstance(value, ReinterpretView):
            base = value.data.get_name()
            layout = value.layout
            return (f"as_strided({base}, {self.sizes(layout.size)}, "
                    f"{self.sizes(layout.stride)}, {self.offset_text(base, layout.offset)})")
        return value.get_name()

    def offset_text(self, base: str, offset) -> str:
        """The storage offset of element `offset` of buffer `base`: a literal where the
        wrapper knows the tensor starts its storage, else read from the tensor (inputs, and
        results of eager ops that may return views, such as a fallback `slice`)."""
        offset = size_text(offset)
        if base in self.fresh:
            return offset
        return f"{base}.storage_offset() + {offset}" if offset != "0" else \
            f"{base}.storage_offset()"

    def sizes(self, values) -> str:
        """A tuple of sizes or strides as Python: a constant where static, else a tuple
        expression over the bound symbols."""
        numbers = [_number(value) for value in values]
        if all(isinstance(number, int) for number in numbers):
            return self.constant(tuple(numbers))
        texts = [size_text(number) for number in numbers]
        return f"({', '.join(texts)}{',' if len(texts) == 1 else ''})"

    def library_reference(self, value) -> str:
        """A library call's tensor argument: the tensor itself where the view is all of it
        as it lies, else `.t()` or `.view(...)` of it where that is the view, else an
        `as_strided` (per call on the 2-core VM: as_strided 0.8-1.0 us, view 0.6, t 0.5)."""
        if isinstance(value, ReinterpretView) and value.data.layout is not None:
            base = value.data.get_name()
            kind = view_kind(value.data.layout, value.layout)
            if kind == "same":
                return base
            if kind == "transpose":
                return f"{base}.t()"
            if kind == "reshape":
                return f"{base}.view({_size_text(value.layout.size)})"
        return self.reference(value)

    def argument(self, value, inputs, library: bool = False) -> str:
        if isinstance(value, TensorArgument):
            tensor = inputs[value.position]
            return self.library_reference(tensor) if library else self.reference(tensor)
        if isinstance(value, (list, tuple)) and any(isinstance(item, TensorArgument)
                                                     for item in value):
            items = ", ".join(self.argument(item, inputs, library) for item in value)
            return f"[{items}]"
        return self.constant(value)

    # -- steps -------------------------------------------------------------------------
    def _poolable(self, name: str) -> Optional[tuple]:
        """(bytes, dtype, device) of a buffer whose memory may be handed on, else None."""
        buffer = self.plan.buffers.get(name)
        if name in self.allocated and name not in self.viewed and \
                name not in self.plan.in_place.values() and \
                isinstance(buffer, Buffer) and buffer.layout:
            layout = buffer.layout
            # memory passes only between buffers whose byte counts are equal for every size
            return (_nbytes(layout), layout.dtype, layout.device)
        if name in self.viewed or name in self.plan.in_place.values():
            return None
        return self._product_key(buffer)

    @staticmethod
    def _product_key(buffer) -> Optional[tuple]:
        """The pool key of a CPU product that writes into dead memory and hands its own on
        (`OUT_PRODUCTS`), else None."""
        layout = getattr(buffer, "layout", None)
        if getattr(buffer, "kernel", None) not in OUT_PRODUCTS or layout is None or \
                layout.device.type != "cpu" or not layout.is_contiguous():
            return None
        return (_nbytes(layout), layout.dtype, layout.device)

    def _bytes_of(self, name: str) -> int:
        buffer = self.plan.buffers.get(name)
        layout = getattr(buffer, "layout", None)
        if layout is None or isinstance(buffer, ConstantBuffer):
            return 0
        return _nbytes_hint(layout)

    def allocate(self, name: str) -> None:
        buffer = self.plan.buffers[name]
        layout = buffer.layout
        size, stride = self.sizes(layout.size), self.sizes(layout.stride)
        in_place = self.plan.in_place.get(name)     # a buffer dying in the same kernel
        if self.recorder is not None:
            self.recorder.allocate(name, _nbytes_hint(layout),
                                   None if in_place else self._poolable(name))
        if in_place is not None:
            self.lines.append(f"    {name} = {self.donated(in_place, layout, name)}")
            if in_place in self.fresh:
                self.fresh.add(name)
            return
        donor = self.reuse.get(name)
        if donor is not None:
            memory = self.donated(donor, layout, name)
            note = "  # its memory, as laid out" if memory == donor else ""
            self.lines.append(f"    {name} = {memory}{note}")
            self.lines.append(f"    del {donor}")
            if donor in self.fresh:
                self.fresh.add(name)
            return
        self.fresh.add(name)
        dtype = self.constant(layout.dtype)
        # The device always: under a `with torch.device(...)` block in the user's code,
        # torch's factory functions would otherwise allocate there.
        device = self.constant(layout.device)
        self.lines.append(f"    {name} = empty_strided({size}, {stride}, {dtype}, {device})")

    def donated(self, donor: str, layout, name: str) -> str:
        """An expression for buffer `name` of `layout` in the memory of dead buffer `donor`:
        the donor itself where the layouts agree, else a view of it; a buffer the graph returns
        (or an output views) gets a tensor of its own over that memory (`own_tensor`), since a
        caller sees `_base`, `is_view()` and the version counter a view shares with its base."""
        donor_layout = self.plan.buffers[donor].layout
        kind = view_kind(donor_layout, layout)
        size, stride = self.sizes(layout.size), self.sizes(layout.stride)
        if kind == "same" and donor not in self.views:
            # a returned buffer reads version 0, as eager's fresh one: the dead buffer's
            # object may carry a library product's `out=` write (program fuzzer seed 23912)
            return f"unwritten({donor})" if name in self.observed else donor
        if name in self.observed:
            return f"own_tensor({donor}, {size}, {stride}, {self.offset_text(donor, 0)})"
        self.views.add(name)
        if kind == "same":
            return donor
        if kind == "reshape":
            return f"{donor}.view({_size_text(layout.size)})"
        return f"as_strided({donor}, {size}, {stride}, {self.offset_text(donor, 0)})"

    def free(self, names) -> None:
        for name in names:
            if self.recorder is not None:
                self.recorder.free(name, self._bytes_of(name), self._poolable(name))
            if name not in self.donors:
                self.lines.append(f"    del {name}")

    def segment_call(self, position: int) -> int:
        """Emit one segment; return the index of its last step."""
        segment, entry = self.segments[position]
        entry_name = f"entry{len(self.globals)}"
        self.globals[entry_name] = entry
        kernel_names = set(segment.kernels)
        steps = [step for step in self.plan.steps[position:]
                 if isinstance(step, KernelPlan) and step.name in kernel_names]
        for step in steps:
            for name in step.stores:
                if name in self.allocated and name not in self._defined:
                    self.allocate(name)
                    self._defined.add(name)
        address = getattr(entry, "packed_address", None)
        launch = self.launch if address is not None else None
        if launch is not None:     # one native call: no ctypes, no `data_ptr()` per buffer
            self.globals["launch"] = launch
            self.globals[entry_name] = address
            values = ", ".join([entry_name] + list(segment.arguments) +
                               [symbol.name for symbol in segment.size_symbols])
            self.lines.append(f"    status = launch({values})")
        else:
            pointers = ", ".join([f"{name}.data_ptr()" for name in segment.arguments] +
                                 [symbol.name for symbol in segment.size_symbols])
            self.lines.append(f"    status = {entry_name}({pointers})")
        self.lines.append("    if status:")
        self.lines.append("        kernel_error(status)")
        return position + len(steps) - 1

    def extern_call(self, step: ExternStep) -> None:
        buffer = step.node.buffer
        name = buffer.get_name()
        if self.recorder is not None:
            self.recorder.allocate(name, self._bytes_of(name), self._product_key(buffer))
        donor = self.reuse.get(name) if self.recorder is None else None
        if isinstance(buffer, MultiOutput):
            path = "".join(f"[{index}]" for index in buffer.path)
            self.lines.append(f"    {name} = {buffer.parent.get_name()}{path}")
        elif donor is not None:
            memory = self.donated(donor, buffer.layout, name)
            call = self.call(buffer, out=memory)
            # `out=` counts as a write: a returned buffer reads version 0, as eager's fresh one
            call = f"unwritten({call})" if name in self.observed else call
            self.lines.append(f"    {name} = {call}")
            self.lines.append(f"    del {donor}")
            if donor in self.fresh:
                self.fresh.add(name)
        else:
            self.lines.append(f"    {name} = {self.linear_call(buffer) or self.call(buffer)}")
            if buffer.kernel in CONTIGUOUS_RESULT_OPS:
                self.fresh.add(name)
        if buffer.layout is not None:
            self.stride_check(buffer)

    def call(self, buffer, out: Optional[str] = None) -> str:
        """The call of an eager kernel (a library call or a fallback); `out`: an expression
        for the memory it writes into (products in `OUT_PRODUCTS`)."""
        kernel = f"extern{len(self.globals)}"
        args, kwargs = buffer.arguments
        self.globals[kernel] = raw_callable(buffer.kernel, kwargs)
        library = buffer.kind == "library"
        parts = [self.argument(value, buffer.inputs, library) for value in args]
        parts += [f"{key}={self.argument(value, buffer.inputs, library)}"
                  for key, value in kwargs.items()]
        if out is not None:
            parts.append(f"out={out}")
        return f"{kernel}({', '.join(parts)})"

    def linear_call(self, buffer) -> Optional[str]:
        """`linear(x, weight[, bias])` for `mm(x, weight.t())` or `addmm(bias, x, weight.t())`
        with `x` 2-D and `weight` a 2-D buffer: ATen's linear makes that very call, and its
        transpose in C++ costs less than a `.t()` from Python (2-core VM, 8x96 @ 96x96:
        3.7 us vs 4.3 us; 4.8 vs 5.1 with a bias)."""
        args, kwargs = buffer.arguments
        if kwargs or buffer.kernel not in (torch.ops.aten.mm.default,
                                           torch.ops.aten.addmm.default) or \
                not all(isinstance(value, TensorArgument) for value in args):
            return None
        tensors = [buffer.inputs[value.position] for value in args]
        bias, first, weight = ([None] + tensors)[-3:]
        if not isinstance(weight, ReinterpretView) or weight.data.layout is None or \
                view_kind(weight.data.layout, weight.layout) != "transpose" or \
                len(first.get_size()) != 2 or (bias is not None and len(bias.get_size()) != 1):
            return None
        self.globals["linear"] = torch.nn.functional.linear
        parts = [self.library_reference(first), weight.data.get_name()]
        if bias is not None:
            parts.append(self.library_reference(bias))
        return f"linear({', '.join(parts)})"

    def stride_check(self, buffer) -> None:
        """Copy an eager kernel's result into the layout the kernels expect where its
        strides differ (dimensions of extent one excepted: their strides address nothing),
        or where a fresh result is not a storage of its own (`select_scatter` of an input view
        clones the input's whole storage: as an output, or as memory an output takes over,
        it came back at the view's offset in a larger storage; program fuzzer seed 20153).
        Skipped after ops whose results are always contiguous, where that is expected."""
        name, layout = buffer.get_name(), buffer.layout
        if getattr(buffer, "kernel", None) in CONTIGUOUS_RESULT_OPS and layout.is_contiguous():
            return
        # symbolic extents are checked as if above 1 (a size-1 dim may then restride: a copy)
        dims = [dim for dim, extent in enumerate(layout.size)
                if not isinstance(_number(extent), int) or int(extent) > 1]
        storage = _returns_fresh(buffer) and layout.offset == 0
        if self.layout_differs is not None and (dims or storage):
            self.globals["layout_differs"] = self.layout_differs
            nbytes = size_text(_nbytes(layout)) if storage else "-1"
            self.lines.append(f"    if layout_differs({name}, {self.constant(tuple(dims))}, "
                              f"{self.sizes([layout.stride[dim] for dim in dims])}, {nbytes}):")
            size, stride = self.sizes(layout.size), self.sizes(layout.stride)
            self.lines.append(f"        {name} = restride({name}, {size}, {stride})")
            return
        conditions = []
        if dims and dims == list(range(dims[0], dims[-1] + 1)):
            # one call and one tuple comparison (a check per dimension called stride() each)
            expected = self.sizes([layout.stride[dim] for dim in dims])
            picked = f"{name}.stride()[{dims[0]}:{dims[-1] + 1}]" if \
                (dims[0], dims[-1] + 1) != (0, len(layout.size)) else f"{name}.stride()"
            conditions.append(f"{picked} != {expected}")
        elif dims:
            conditions += [f"{name}.stride()[{dim}] != {size_text(layout.stride[dim])}"
                           for dim in dims]
        if storage:
            conditions.append(f"{name}.storage_offset() or {name}.untyped_storage().nbytes() "
                              f"!= {size_text(_nbytes(layout))}")
        if not conditions:
            return
        condition = " or ".join(conditions)
        size, stride = self.sizes(layout.size), self.sizes(layout.stride)
        self.lines.append(f"    if {condition}:")
        self.lines.append(f"        {name} = restride({name}, {size}, {stride})")

    def _outputs(self) -> list:
        """Output expressions; a buffer returned twice comes back as two tensor objects (eager's
        `detach` or `alias` outputs are distinct objects over one storage)."""
        texts, seen = [], set()
        for value in self.plan.outputs:
            text = self.output(value)
            if text in seen and isinstance(value, Buffer) and value.layout is not None:
                layout = value.layout
                text = (f"as_strided({text}, {self.sizes(layout.size)}, "
                        f"{self.sizes(layout.stride)}, {text}.storage_offset())")
            seen.add(text)
            texts.append(text)
        return texts

    def output(self, value) -> str:
        """A returned value. An output that reshapes a graph-made buffer is eager's own tensor
        (an in-place view op such as the `squeeze_` of a 1-D matmul's product): outputs eager
        returns as views are rebuilt over their bases outside (`OutputAlias`), so it is a
        tensor of its own over the buffer's memory, not its view (program fuzzer seeds 31247,
        31255, 31328: `torch.matmul(v, w.T)` of a 1-D `v` viewed the (1, n) product)."""
        if isinstance(value, ReinterpretView) and value.data.get_name() not in self.inputs:
            base, layout = value.data.get_name(), value.layout
            return (f"own_tensor({base}, {self.sizes(layout.size)}, "
                    f"{self.sizes(layout.stride)}, {self.offset_text(base, layout.offset)})")
        if isinstance(value, (Buffer, ReinterpretView)):
            return self.reference(value)
        return self.constant(value)

    def write(self) -> str:
        """The wrapper's source: a first pass records allocations and frees to plan memory
        reuse (`ReusePlanner`), the second writes the lines."""
        initial = sum(self._bytes_of(buffer.get_name()) for buffer in self.plan.inputs)
        self.recorder = ReusePlanner(initial)
        saved_globals = dict(self.globals)
        self._write_body()
        self.globals = saved_globals        # the second pass names its globals afresh
        self.reuse = self.recorder.plan()
        self.donors = set(self.reuse.values())
        self.recorder = None
        return self._write_body()

    def _write_body(self) -> str:
        names = [buffer.get_name() for buffer in self.plan.inputs]
        self.lines = ["def call_with_argument_list(arguments):"]
        if names:
            self.lines.append(f"    {', '.join(names)}, = arguments")
            self.lines += self._bind_symbols(names)     # (before the list is emptied)
            self.lines.append("    arguments.clear()")
        freed_later = {name for group in self.input_frees.values() for name in group}
        kept = _output_names(self.plan)
        unused = [name for name in names if name not in freed_later and name not in kept]
        if unused:
            self.lines.append(f"    del {', '.join(unused)}")
        self._defined: set = set()
        self.fresh = set()
        self.views = set()
        position = 0
        steps = self.plan.steps
        while position < len(steps):
            step = steps[position]
            if isinstance(step, KernelPlan):
                last = self.segment_call(position)
            else:
                self.extern_call(step)
                last = position
            for index in range(position, last + 1):
                self.free(self.plan.frees.get(index, []))
                self._free_inputs(self.input_frees.get(index, []))
            position = last + 1
        self.lines.append(f"    return [{', '.join(self._outputs())}]")
        self.lines += ["", "", "def call(*arguments):",
                       "    return call_with_argument_list(list(arguments))", "",
                       "", "call.with_argument_list = call_with_argument_list"]
        return "\n".join(self.lines) + "\n"

    def _bind_symbols(self, names: list) -> list:
        """The contract's symbol binding, once per call (`size_binding.binding_lines`)."""
        return binding_lines(self.plan, names, self.sizes, self.globals)

    def _free_inputs(self, names) -> None:
        """Drop the wrapper's references to inputs after their last reader."""
        if self.recorder is not None:
            for name in names:
                self.recorder.free(name, self._bytes_of(name), None)
        if names:
            self.lines.append(f"    del {', '.join(names)}")


def generate(plan: GraphPlan, segments: list, entries: list):
    """(wrapper source, the `call` function compiled from it). `call.native_plan`: the
    wrapper's work as data where it is only allocations and launches (`native_program`), for
    callers that run it in one native call, else None."""
    writer = WrapperWriter(plan, segments, entries)
    source = writer.write()
    namespace = dict(writer.globals)
    exec(compile(source, "<framejit wrapper>", "exec"), namespace)
    call = namespace["call"]
    call.native_plan = native_program.plan_of(source, namespace)
    return source, call

