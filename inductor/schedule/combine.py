"""Stage "schedule", Triton only, after tiling: horizontal fusion of independent kernels.

Input: a tiled `GraphPlan`. Output: a plan (a copy; the input is left as it was) where runs
of consecutive small pointwise kernels with no data dependency between them (the
per-parameter updates of an optimizer step: each reads and writes its own parameter,
gradient and state) are replaced by one `ComboPlan`, which the Triton printer turns into
one kernel whose programs are partitioned among its parts (`codegen/triton/combo.py`): one
launch where there were many. Each part keeps its own element count, mask and block, and
computes exactly what it computed alone, so results are the same bits.

A kernel joins the open run when it is a plain pointwise kernel (no reduction, scatter or
2-D tile), of static size at most `config.combo_max_numel` elements, reads nothing the run
writes and writes nothing the run reads or writes (programs of one launch run in any order),
and the run stays within `config.combo_max_kernels` kernels and `config.combo_max_arguments`
buffers; otherwise the run is closed (a run of one stays as it was). Distinct buffer names are
distinct memory here: a graph writing an input that shares storage with another input is not
compiled (`aliasing.SharedInputWrites`), and kernels taking a donor's memory (`in_place.py`,
CPU only) never join. Buffers die after the combined step instead of after their last part.
"""
from __future__ import annotations

import dataclasses

from inductor.config import config
from inductor.schedule.plans import GraphPlan, KernelPlan, ScatterPlan
from inductor.schedule.tiling import Tiling


@dataclasses.dataclass
class ComboPlan(KernelPlan):
    """Independent pointwise kernel plans run by one launch (see the module docstring)."""

    parts: list = dataclasses.field(default_factory=list)

    def members(self) -> list:
        return [member for part in self.parts for member in part.members()]

    def size_symbols(self) -> list:
        return []

    def variable_ranges(self) -> dict:
        return {}

    def describe(self) -> str:
        lines = [f"{self.name}: one launch of {len(self.parts)} independent kernels"]
        for part in self.parts:
            lines += ["  " + line for line in part.describe().splitlines()]
        return "\n".join(lines)


def joinable(kernel) -> bool:
    """Whether `kernel` may run as a part of a combined launch."""
    if type(kernel) is not KernelPlan or isinstance(kernel, ScatterPlan):
        return False
    tiling = kernel.tiling
    if tiling is None or tiling.kind != "pointwise" or kernel.inner_sizes or \
            kernel.aliased_stores:
        return False
    numel = 1
    for size in kernel.outer_sizes:
        if not isinstance(size, int) and not getattr(size, "is_Integer", False):
            return False
        numel *= int(size)
    return 0 < numel <= config.combo_max_numel


class _Run:
    """The open run of kernels that may share a launch."""

    def __init__(self):
        self.kernels: list = []
        self.positions: list = []
        self.loads: set = set()
        self.stores: set = set()

    def admits(self, kernel: KernelPlan) -> bool:
        loads, stores = set(kernel.loads), set(kernel.stores)
        if loads & self.stores or stores & (self.loads | self.stores):
            return False
        if len(self.kernels) >= config.combo_max_kernels:
            return False
        return len(self.loads | self.stores | loads | stores) <= config.combo_max_arguments

    def add(self, kernel: KernelPlan, position: int) -> None:
        self.kernels.append(kernel)
        self.positions.append(position)
        self.loads |= set(kernel.loads)
        self.stores |= set(kernel.stores)


def combine_kernels(plan: GraphPlan) -> GraphPlan:
    """`plan` with runs of independent pointwise kernels replaced by `ComboPlan`s (new steps,
    and the steps after which buffers die; everything else shared); `plan` itself where
    nothing combines. The scheduler's plan is left as it was (tests read its kernels)."""
    if plan.size_hints or not config.combo_kernels or config.combo_max_kernels < 2:
        return plan
    donors = set(plan.in_place) | set(plan.in_place.values())
    runs, run = [], _Run()
    for position, step in enumerate(plan.steps):
        fits = joinable(step) and not (set(step.stores) & donors)
        if fits and run.admits(step):
            run.add(step, position)
            continue
        runs.append(run)
        run = _Run()
        if fits:
            run.add(step, position)
    runs.append(run)
    new_position, steps, saved = {}, [], 0
    combined = {run.positions[0]: run for run in runs if len(run.kernels) > 1}
    covered = {position for run in combined.values() for position in run.positions}
    for position, step in enumerate(plan.steps):
        if position in combined:
            run = combined[position]
            steps.append(_combo(run.kernels, f"combo{len(steps)}"))
            saved += len(run.kernels) - 1
            for member in run.positions:
                new_position[member] = len(steps) - 1
        elif position not in covered:
            steps.append(step)
            new_position[position] = len(steps) - 1
    if not saved:
        return plan
    frees: dict = {}
    for position, names in plan.frees.items():
        frees.setdefault(new_position[position], []).extend(names)
    return dataclasses.replace(plan, steps=steps, frees=frees)


def _combo(kernels: list, name: str) -> ComboPlan:
    loads = sorted({name for kernel in kernels for name in kernel.loads})
    stores = [name for kernel in kernels for name in kernel.stores]
    combo = ComboPlan(name, [], [], [], loads, stores, parts=list(kernels))
    combo.tiling = Tiling("combo", index_bits=max(kernel.tiling.index_bits
                                                    for kernel in kernels))
    return combo
