"""Stage "schedule", last step: which kernel outputs may take the memory of a buffer that
dies in the same kernel (in-place reuse).

Input: a `GraphPlan`. Output: {output name: donor name}, stored on the plan as `in_place`;
the C++ wrapper then binds the output to the donor's tensor instead of allocating (a fresh
allocation of tens of megabytes costs page faults on every call: BatchNorm + ReLU after each
convolution of a CNN). CPU buffers only.

Legal only where no element of the donor is read after it is overwritten: the kernel stores
exactly one buffer, either in its only stage of point-wise work or in a last inner loop after
one reduction loop per outer point (layer norm, RMS norm: every outer point reads its row in
the reduction loop, then writes it), every read of the donor in it is at the element being
stored (the same storage offset, as an index
expression in kernel loop variables), both buffers span the same storage (dtype, device,
elements; the shapes may differ: a GELU of shape [8, 56, 56, 384] over a matrix product's
[25088, 384] result), and nothing else may see the donor's memory: it is a buffer the
wrapper allocated or a library call's fresh result (an op whose schema returns no alias of
its inputs), never passed to an op that may return a view of it, never a graph input, output
or constant.

A scatter (`ScatterPlan`: copy a tensor, then write values at computed positions) takes the
memory of the buffer its copy reads when that buffer dies there, the copy reads it at exactly
the element it stores and nothing else reads it (the scatter's values and positions): the
copy is then skipped (`ScatterPlan.copy_in_place`) and only the scattered elements are
touched (a tied embedding's gradient scattered into the output layer's, `accumulate_into.py`).
C++ kernels only.
"""
from __future__ import annotations

from typing import Optional

import sympy

from inductor.config import config
from inductor.ir.nodes import ComputedBuffer, ExternKernel, MultiOutput
from inductor.ir.ops import use_handler
from inductor.ir.symbols import index_symbol, simplify_index, substitute
from inductor.schedule.nodes import AccessRecorder
from inductor.schedule.plans import ExternStep, GraphPlan, KernelPlan, ScatterPlan


def in_place_outputs(plan: GraphPlan) -> dict:
    """{kernel output: dying buffer whose memory it takes} (see the module docstring)."""
    viewed = _viewed_by_library_calls(plan)
    result: dict = {}
    for position, step in enumerate(plan.steps):
        if isinstance(step, ScatterPlan):
            donor = _scatter_donor(plan, step, set(plan.frees.get(position, [])) - viewed -
                                   set(result.values()))
            if donor is not None:
                result[step.node.name] = donor
                step.aliased_stores.add(step.node.name)
                step.copy_in_place = True
            continue
        single = _single_store(step)
        if single is None or single.name not in plan.allocated:
            continue
        ranges = step.variable_ranges()
        target = _kernel_index(single, single.node.write.index, ranges)
        out_layout = plan.buffers[single.name].layout
        if out_layout is None or out_layout.device.type != "cpu":
            continue        # GPU graphs allocate as before (not measured there)
        dying = set(plan.frees.get(position, []))
        for donor in step.loads:
            if donor not in dying or donor in viewed or donor in result.values():
                continue
            if not _fresh_memory(plan, donor) or \
                    not _same_storage(plan.buffers[donor].layout, out_layout):
                continue
            indexes = [_kernel_index(member, access.index, ranges)
                       for member in step.members() for access in member.node.reads
                       if access.name == donor]
            if target is not None and indexes and all(index is not None and index == target
                                                      for index in indexes):
                result[single.name] = donor
                step.aliased_stores.add(single.name)
                break
    return result


class _LoadTokens(AccessRecorder):
    """Records loads as (name, index, token): each load returns its own token."""

    def __init__(self):
        super().__init__()
        self.loads: list = []

    def load(self, name, index):
        super().load(name, index)
        token = object()
        self.loads.append((name, index, token))
        return token

    def masked(self, mask, body, other):
        body()
        return object()     # a value only under a mask: not the element as stored


def _scatter_donor(plan: GraphPlan, step: ScatterPlan, candidates: set) -> Optional[str]:
    """The buffer among `candidates` (dying here, not viewed, not yet given) whose memory the
    scatter of `step` may take (see the module docstring), else None."""
    buffer = step.node.buffer
    layout = buffer.layout
    if step.node.name not in plan.allocated or layout.device.type != "cpu" or \
            config.uses_triton(layout.device):
        return None
    output_vars = [index_symbol("i", n) for n in range(len(layout.size))]
    copy = _LoadTokens()
    with use_handler(copy):
        value = buffer.initial(output_vars)
    if len(copy.loads) != 1 or value is not copy.loads[0][2]:
        return None     # the copy computes, or reads several buffers
    donor, index, _token = copy.loads[0]
    if donor not in candidates or not _fresh_memory(plan, donor) or \
            not _same_storage(plan.buffers[donor].layout, layout) or \
            sympy.expand(index - layout.index(output_vars)) != 0:
        return None
    writes = AccessRecorder()
    source_vars = [index_symbol("r", n) for n in range(len(buffer.data.ranges))]
    with use_handler(writes):
        buffer.destination(source_vars)
        buffer.data.inner_fn(source_vars)
    if any(access.name == donor for access in writes.reads):
        return None     # a value or a position read from memory the writes change
    return donor


def _single_store(step):
    """The one stored member of a kernel whose stages fit (`_stages_fit`), writing its own
    buffer."""
    if not isinstance(step, KernelPlan) or len(step.stores) != 1 or \
            not _stages_fit(step.stages):
        return None
    stored = [member for member in step.members() if member.store]
    if len(stored) != 1 or stored[0].node.written_name() != stored[0].name or \
            stored[0].node.write.index is None:
        return None
    return stored[0]


def _stages_fit(stages: list) -> bool:
    """One point-wise stage; or one reduction stage, outer stages, and a last inner stage
    (all earlier reads of a row then precede the first write of that row)."""
    kinds = [stage.kind for stage in stages]
    if not kinds:
        return False                # a scatter plan: no stages of its own
    if len(kinds) == 1:
        return kinds[0] != "reduction"
    return kinds[-1] == "inner" and kinds.count("reduction") == 1 and \
        "inner" not in kinds[:-1] and \
        all(not member.store for stage in stages[:-1] for member in stage.members)


def _kernel_index(member, index, ranges) -> Optional[sympy.Expr]:
    if index is None:
        return None
    return sympy.expand(simplify_index(substitute(index, member.replacements), ranges))


def _same_storage(first, second) -> bool:
    """Whether both layouts span the same elements of one dtype from offset 0 (the reads at
    the stored element then make the overwrite safe whatever the shapes)."""
    if first is None or second is None:
        return False
    return (first.dtype == second.dtype and first.device == second.device
            and first.offset == 0 and second.offset == 0
            and sympy.expand(first.storage_size() - second.storage_size()) == 0)


def _fresh_memory(plan: GraphPlan, name: str) -> bool:
    """Whether `name` owns memory nobody else can see: allocated by the wrapper, or returned
    fresh by a library call or fallback whose schema returns no alias."""
    buffer = plan.buffers.get(name)
    if name in plan.allocated:
        return isinstance(buffer, ComputedBuffer) and \
            getattr(buffer, "mutated_input", None) is None
    if not isinstance(buffer, ExternKernel) or isinstance(buffer, MultiOutput):
        return False
    schema = getattr(buffer.kernel, "_schema", None)
    return schema is not None and len(schema.returns) == 1 and \
        schema.returns[0].alias_info is None


def _viewed_by_library_calls(plan: GraphPlan) -> set:
    """Buffers passed to an eager op that may return a view of them."""
    viewed = set()
    for step in plan.steps:
        if not isinstance(step, ExternStep):
            continue
        schema = getattr(getattr(step.node.buffer, "kernel", None), "_schema", None)
        if schema is None or any(result.alias_info is not None for result in schema.returns):
            viewed |= step.node.read_names()
    return viewed
