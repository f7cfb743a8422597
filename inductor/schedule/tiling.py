"""Stage "schedule", GPU part: how each kernel plan maps onto a grid of Triton programs.

Input: a `GraphPlan` whose kernels run through Triton, and the target's limits. Output: each
`KernelPlan.tiling` set to a `Tiling`, which the Triton printer follows without deciding
anything itself:

- pointwise kernels run over one flattened index ("pointwise"), or over a 2-D tile
  ("tiled") when a read walks memory contiguously along a different loop than the writes
  (a transpose: one flat index would make those reads uncoalesced);
- reductions keep a whole row in registers ("persistent") when it is short enough, loop over
  the row in blocks otherwise ("looped"), or, when there are too few rows to fill the
  device, split each row over several programs writing partials that a second kernel
  combines ("split");
- a looped sum of `exp(v - max(v))` over the values of a max reduction in an earlier stage
  (softmax, log-softmax, logsumexp) joins that max's loop as an online softmax (a running
  maximum and a rescaled running sum), saving one pass over the row;
- indices are 32-bit unless some buffer or iteration space needs 64.

Over symbolic sizes (issue 23) the decisions read the example call's sizes
(`GraphPlan.size_hints`) and stay right for every size: indices are 64-bit, a symbolic row
that fits a persistent block also gets the looped variant (the runtime takes it for size
buckets past the limit), rows are never split (the chunk would be a runtime value), and a
transposing tile's Y axis must be static (the grid's second dimension is bounded).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import sympy

from inductor.ir.ops import OpsHandler, use_handler
from inductor.ir.symbols import hint, is_static, linear_coefficient, substitute
from inductor.schedule.plans import GraphPlan, KernelPlan, ScanPlan, ScatterPlan

INDEX_32_LIMIT = 2 ** 31 - 2 ** 20   # head room for a block past the last element
GRID_Y_LIMIT = 65535                 # CUDA's limit on the second grid dimension
OUTER_CONTIGUOUS_ROWS = 64           # rows one program of an outer-contiguous reduction takes


@dataclasses.dataclass
class Target:
    """What the tiling needs to know about the device."""

    device: str                 # "cuda", or "cpu" for interpreted Triton
    processors: int             # programs that run at once, roughly (streaming multiprocessors)
    persistent_limit: int       # longest row a persistent reduction keeps in registers
    split_reductions: bool = True
    split_min_row: int = 4096   # shortest row worth splitting over programs


@dataclasses.dataclass
class Tiling:
    """How one kernel plan runs as a grid of programs (see the module docstring)."""

    kind: str                   # "pointwise", "tiled" or "reduction"
    y_loops: int = 0            # tiled: the leading outer loops that form the Y axis
    strategy: str = ""          # reduction: "persistent", "looped" or "split"
    alternatives: tuple = ()    # other reduction strategies the autotuner may time
    split: int = 1              # split: programs (and partials) per row
    outer_contiguous: bool = False  # reduction whose reads walk the rows, not the row
    index_bits: int = 32
    online: dict = dataclasses.field(default_factory=dict)  # sum member -> its max member
    # symbolic row: the longest the persistent variant takes (longer size buckets loop)
    row_limit: int = 0

    def describe(self) -> str:
        """One line for `GraphPlan.describe()`."""
        parts = [self.kind]
        if self.kind == "tiled":
            parts.append(f"y = first {self.y_loops} loop(s)")
        if self.kind == "reduction":
            parts.append(self.strategy + (f" x{self.split}" if self.strategy == "split" else ""))
            if self.alternatives:
                parts.append("or " + ", ".join(self.alternatives))
            if self.outer_contiguous:
                parts.append("outer-contiguous")
            for total, maximum in self.online.items():
                parts.append(f"{total} joins {maximum} (online softmax)")
        parts.append(f"int{self.index_bits} indices")
        return ", ".join(parts)


def tile(plan: GraphPlan, target: Target) -> None:
    """Set `tiling` on every kernel of `plan` (scatter kernels run over a flat index)."""
    hints = plan.size_hints
    for kernel in plan.kernels():
        bits = _index_bits(kernel, plan.buffers)
        if isinstance(kernel, (ScatterPlan, ScanPlan)):
            kernel.tiling = Tiling("pointwise", index_bits=bits)
        elif kernel.inner_sizes:
            kernel.tiling = _reduction_tiling(kernel, target, bits, hints)
        else:
            kernel.tiling = _pointwise_tiling(kernel, bits, hints)


def _product(sizes, hints: Optional[dict] = None) -> int:
    """The product of `sizes`, symbolic ones taken at their example value (`hints`)."""
    result = 1
    for size in sizes:
        result *= int(size) if hints is None else hint(size, hints)
    return result


def _index_bits(kernel: KernelPlan, buffers: dict) -> int:
    """32 unless an iteration space or a touched buffer's storage needs 64-bit offsets (any
    symbolic size: a later call's may)."""
    if not is_static(list(kernel.outer_sizes) + list(kernel.inner_sizes)):
        return 64
    for name in list(kernel.loads) + list(kernel.stores):
        layout = getattr(buffers.get(name), "layout", None)
        if layout is not None and not is_static(layout.storage_size()):
            return 64
    largest = _product(kernel.outer_sizes) * max(1, _product(kernel.inner_sizes))
    for name in list(kernel.loads) + list(kernel.stores):
        buffer = buffers.get(name)
        layout = getattr(buffer, "layout", None)
        if layout is not None:
            largest = max(largest, int(layout.storage_size()))
    return 32 if largest < INDEX_32_LIMIT else 64


def _accesses(kernel: KernelPlan) -> tuple[list, list]:
    """(read indices, write indices) of every member, in kernel loop variables."""
    reads, writes = [], []
    for member in kernel.members():
        node = member.node
        for access in node.reads:
            if access.index is not None:
                reads.append(sympy.expand(substitute(access.index, member.replacements)))
        if member.store and node.write is not None and node.write.index is not None:
            writes.append(sympy.expand(substitute(node.write.index, member.replacements)))
    return reads, writes


def _fastest(expression, variables: list) -> Optional[int]:
    """The position of the loop an index walks with stride 1 (the innermost such), or None."""
    found = None
    for position, symbol in enumerate(variables):
        if linear_coefficient(expression, symbol) == 1:
            found = position
    return found


def _pointwise_tiling(kernel: KernelPlan, bits: int, hints: dict) -> Tiling:
    variables, sizes = kernel.outer_vars(), kernel.outer_sizes
    if not is_static(sizes):
        sizes = [hint(size, hints) for size in sizes]
    if len(sizes) < 2:
        return Tiling("pointwise", index_bits=bits)
    reads, writes = _accesses(kernel)
    last = len(sizes) - 1
    if any(_fastest(write, variables) not in (last, None) for write in writes):
        return Tiling("pointwise", index_bits=bits)
    votes: dict = {}
    for read in reads:
        position = _fastest(read, variables)
        if position is not None and position != last and sizes[position] >= 16:
            votes[position] = votes.get(position, 0) + 1
    if not votes or sizes[last] < 16:
        return Tiling("pointwise", index_bits=bits)
    split = max(votes, key=lambda position: (votes[position], position)) + 1
    if not is_static(kernel.outer_sizes[:split]):
        return Tiling("pointwise", index_bits=bits)
    y_extent = _product(sizes[:split])
    if -(-y_extent // 16) > GRID_Y_LIMIT:
        return Tiling("pointwise", index_bits=bits)
    return Tiling("tiled", y_loops=split, index_bits=bits)


def _outer_contiguous(kernel: KernelPlan) -> bool:
    """Whether the reductions' reads walk the outer loop contiguously and the row with a
    stride (a sum over the first dimension): programs then take many rows at once."""
    outer, inner = kernel.outer_vars(), kernel.inner_vars()
    along_rows = along_row = 0
    for member in kernel.members():
        if member.kind != "reduction":
            continue
        for access in member.node.reads:
            if access.index is None:
                continue
            index = sympy.expand(substitute(access.index, member.replacements))
            if outer and linear_coefficient(index, outer[-1]) == 1:
                along_rows += 1
            if linear_coefficient(index, inner[-1]) == 1:
                along_row += 1
    return along_rows > along_row


def splittable(kernel: KernelPlan) -> bool:
    """Whether a reduction kernel can run as partials plus a combine: one reduction stage
    first (reading nothing the kernel computes), then only once-per-row stages."""
    kinds = [stage.kind for stage in kernel.stages]
    if not kinds or kinds[0] != "reduction" or any(kind != "outer" for kind in kinds[1:]):
        return False
    written = {member.name for member in kernel.members()}
    return not any(member.node.read_names() & written for member in kernel.stages[0].members)


class _ExpressionRecorder(OpsHandler):
    """Evaluates a body into a hashable expression tree (None where it reads indirectly)."""

    def load(self, name, index):
        return ("load", name, sympy.expand(index))

    def constant(self, value, dtype):
        return ("constant", value, dtype)

    def index_expr(self, expr, dtype):
        return ("index", sympy.expand(expr), dtype)

    def indirect_indexing(self, value, size, check=True):
        raise _Unrecognised

    def masked(self, mask, body, other):
        raise _Unrecognised

    def default(self, name, *args, **kwargs):
        return (name,) + args + tuple(sorted(kwargs.items()))


class _Unrecognised(Exception):
    pass


def _expression(member):
    """The reduced value of a reduction member as an expression tree in kernel variables."""
    node = member.node
    outer = [sympy.expand(substitute(expr, member.replacements)) for expr in node.outer_index]
    inner = [sympy.expand(substitute(expr, member.replacements)) for expr in node.inner_index]
    try:
        with use_handler(_ExpressionRecorder()):
            return node.buffer.data.inner_fn(outer, inner)
    except _Unrecognised:
        return None


def online_softmax_pairs(kernel: KernelPlan) -> dict:
    """{sum member: max member} for sums of `exp(v - m)` where m is the max of the same v,
    computed in an earlier reduction stage of the kernel."""
    pairs, maxima = {}, []
    for stage in kernel.stages:
        if stage.kind != "reduction":
            continue
        for member in stage.members:
            data = member.node.buffer.data
            if data.reduction_type == "sum" and data.src_dtype.is_floating_point:
                body = _expression(member)
                for candidate, values in maxima:
                    written = sympy.expand(substitute(candidate.node.write.index,
                                                      candidate.replacements))
                    if body == ("exp", ("sub", values, ("load", candidate.name, written))):
                        pairs[member.name] = candidate.name
                        break
        for member in stage.members:
            if member.node.buffer.data.reduction_type == "max":
                values = _expression(member)
                if values is not None:
                    maxima.append((member, values))
    return pairs


def _reduction_tiling(kernel: KernelPlan, target: Target, bits: int, hints: dict) -> Tiling:
    static = is_static(list(kernel.outer_sizes) + list(kernel.inner_sizes))
    rows = _product(kernel.outer_sizes, None if static else hints)
    row = _product(kernel.inner_sizes, None if static else hints)
    outer_contiguous = _outer_contiguous(kernel)
    rows_per_program = OUTER_CONTIGUOUS_ROWS if outer_contiguous else 1
    programs = -(-rows // rows_per_program)
    if target.split_reductions and splittable(kernel) and row >= target.split_min_row \
            and programs < target.processors and static:
        # at most four programs per processor: one wave. A few programs past a wave leave a
        # tail (sum over the first dim of 16384 x 4096 bf16 on an H100: split 9, 576 programs,
        # 0.82 of the copy bandwidth; split 8, 512 programs, 0.89)
        split = max(2, min(4 * target.processors // max(programs, 1), row // 512, 256))
        return Tiling("reduction", strategy="split", split=split,
                      outer_contiguous=outer_contiguous, index_bits=bits)
    persistent_limit = 64 if outer_contiguous else target.persistent_limit
    online = online_softmax_pairs(kernel)
    if row <= persistent_limit:
        alternatives = ("looped",) if (row > 1024 and not outer_contiguous) or \
            not is_static(kernel.inner_sizes) else ()
        return Tiling("reduction", strategy="persistent", alternatives=alternatives,
                      outer_contiguous=outer_contiguous, index_bits=bits, online=online,
                      row_limit=0 if is_static(kernel.inner_sizes) else persistent_limit)
    return Tiling("reduction", strategy="looped", outer_contiguous=outer_contiguous,
                  index_bits=bits, online=online)


def target_for(device) -> Target:
    """The tiling target of `device` ("cuda", or "cpu" for interpreted Triton), from its
    properties and `inductor.config`."""
    from inductor.config import config

    if device.type == "cuda":
        import torch
        processors = torch.cuda.get_device_properties(device).multi_processor_count
        return Target("cuda", processors, config.triton_persistent_limit,
                      config.triton_split_reductions)
    # The interpreter runs programs one after another: splitting buys nothing there but
    # is kept reachable at small sizes so tests cover it.
    return Target("cpu", 8, config.triton_persistent_limit, config.triton_split_reductions,
                  split_min_row=1024)
