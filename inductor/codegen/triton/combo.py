"""The Triton printer of a combined launch (`schedule/combine.py`'s `ComboPlan`).

Input: a `ComboPlan` (independent pointwise kernel plans) and the dtypes of its buffers.
Output: one `@triton.jit` function per distinct part, each the part's own pointwise kernel
(`kernel.py`, unchanged) taking its program index as a parameter `pid` instead of reading
`tl.program_id(0)`, with its block size fixed; and one launched function whose programs are
partitioned among the parts in order:

    pid = tl.program_id(0)
    if pid < 3:
        triton_part_<hash>(pointer0, pointer4, pointer5, pid, 1024)
    elif pid < 4:
        triton_part_<hash>(pointer1, pointer6, pid - 3, 512)

Triton inlines the calls. Each part keeps its element count, its mask (none where its block
divides its extent) and its block: `min(next power of two of its elements, PART_BLOCK)` (at
least 16; on the CPU interpreter up to `INTERPRETER_BLOCK`, fewer programs). The launch takes
one configuration (no tuning: the blocks are fixed): `num_warps` from the largest block, 8
elements per thread as the pointwise candidates' `(1024, 8)`. Parts print identically where
their plans do (repeated layers), so they share one function text.
"""
from __future__ import annotations

import math

from inductor.codegen.triton.kernel import NAME, TritonKernel
from inductor.codegen.triton.spec import KernelFunction, LaunchSpec, product
from inductor.runtime.triton_autotune import INTERPRETER_BLOCK, power_of_two

PART_BLOCK = 1024


class ComboKernel:
    """Prints one `ComboPlan` (see the module docstring); the interface of `TritonKernel`
    that `source.py` uses: `arguments()`, `functions()`, `spec`, `size_names`, `helpers`."""

    def __init__(self, plan, dtype_of, interpret: bool = False, wait_for_prior: bool = False):
        self.plan = plan
        self.interpret = interpret
        self.wait_for_prior = wait_for_prior and not interpret
        self.size_names: list = []
        self.extents = None
        self.check_bounds = False
        self.parts = [TritonKernel(part, dtype_of, interpret, False) for part in plan.parts]
        self.blocks, self.programs = [], []
        for printer in self.parts:
            numel = int(product(printer.plan.outer_sizes))
            block = max(16, min(power_of_two(numel),
                                INTERPRETER_BLOCK if interpret else PART_BLOCK))
            if "XBLOCK" in printer.spec.even:   # printed without a mask: a divisor
                block = math.gcd(block, numel)
            self.blocks.append(block)
            self.programs.append(-(-numel // block))
        self.spec = LaunchSpec("combo", sum(self.programs))
        self.spec.programmatic = self.wait_for_prior
        self.spec.status = interpret
        self.spec.num_warps = max(1, min(8, max(self.blocks) // 256))
        self.helpers: list = []     # KernelFunction per part, named by `source.py`

    def arguments(self) -> list[str]:
        """Graph buffer names in parameter order (loads, then stores)."""
        names = list(self.plan.loads)
        names += [name for name in self.plan.stores if name not in names]
        return names

    def functions(self) -> list[KernelFunction]:
        """The launched function; the parts' functions are left in `helpers` (named there
        first: the launched function's text calls them by name)."""
        from inductor.codegen.triton.source import function_name
        pointers = {name: f"pointer{position}"
                    for position, name in enumerate(self.arguments())}
        parameters = list(pointers.values()) + (["status_pointer"] if self.interpret else [])
        lines = ["@triton.jit", f"def {NAME}({', '.join(parameters)}):"]
        if self.wait_for_prior:
            lines.append("    tl.extra.cuda.gdc_wait()")
        lines.append("    pid = tl.program_id(0)")
        self.helpers, start = [], 0
        for position, printer in enumerate(self.parts):
            printer.extents, printer.check_bounds = self.extents, self.check_bounds
            printer.program_id = "pid"
            helper = printer._function("part", lambda printer=printer: printer._pointwise()
                                       or ["pid"], ["XBLOCK"])
            helper.name = function_name("part", helper.text)
            self.helpers.append(helper)
            end = start + self.programs[position]
            arguments = [pointers[name] for name in printer.arguments()]
            arguments.append(f"pid - {start}" if start else "pid")
            if self.interpret:
                arguments.append("status_pointer")
            arguments.append(str(self.blocks[position]))
            if position == len(self.parts) - 1:
                lines.append("    else:")
            else:
                lines.append(f"    {'if' if position == 0 else 'elif'} pid < {end}:")
            lines.append(f"        {helper.name}({', '.join(arguments)})")
            start = end
        return [KernelFunction("main", "\n".join(lines) + "\n", [])]
