"""What the Triton kernel printer hands on, and the extents it prints.

Input: a kernel plan's loop extents (ints, or sympy expressions in the graph's size symbols).
Output: `KernelFunction` (one `@triton.jit` function's text and block parameters),
`LaunchSpec` (what the runtime needs to launch a plan's functions), and extents as Triton
text: products, the steps of a flat index's loops, whether an axis may drop its mask.
"""
from __future__ import annotations

import dataclasses
import re

import sympy

from inductor.codegen.triton.expressions import index_text

NAME = "KERNEL_NAME"     # placeholder for the function name in `KernelFunction.text`
SIZES = "SIZE_PARAMETERS"   # placeholder for the size parameters of a symbolic plan
# Names the shape environment gives size symbols (`s0`; unbacked `u0`)
SIZE_NAME = re.compile(r"[su][0-9]+")


@dataclasses.dataclass
class KernelFunction:
    """One `@triton.jit` function: its role, source (named `NAME`) and block parameters."""

    role: str               # "main", "looped", "partial" or "combine"
    text: str
    blocks: list            # constexpr block parameters, e.g. ["XBLOCK", "RBLOCK"]
    name: str = ""          # the final name, set when the module is assembled


@dataclasses.dataclass
class LaunchSpec:
    """What the runtime needs to launch a kernel plan's functions."""

    kind: str               # "pointwise", "tiled", "reduction", "split", "scatter", "combo"
    xnumel: int             # "combo": its programs
    ynumel: int = 1
    rnumel: int = 1
    split: int = 1
    chunk: int = 0          # split: reduction elements per partial program
    outer_contiguous: bool = False
    strategy: str = ""      # reduction: the strategy of the "main" function
    workspaces: list = dataclasses.field(default_factory=list)   # dtypes, xnumel*split each
    status: bool = False    # the functions report errors through a status word
    even: tuple = ()        # blocks that must divide their extent: their axis has no mask
    programmatic: bool = False  # launched with `launch_pdl` (each function waits first)
    num_warps: int = 0      # "combo" (`combo.py`): the warps of its one configuration
    # symbolic row: the longest a persistent block takes (`Tiling.row_limit`; 0: no limit)
    row_limit: int = dataclasses.field(default=0, repr=False)


class Lines:
    """Indented Python lines."""

    def __init__(self, depth: int = 1):
        self.lines: list[str] = []
        self.depth = depth

    def add(self, *texts: str) -> None:
        for text in texts:
            self.lines.append("    " * self.depth + text)


# An axis whose extent is a power of two or a multiple of this loses its mask: every block size
# the autotuner tries for it is then cut to a divisor of the extent (`LaunchSpec.even`). A
# runtime mask that is always true still costs: the split sum over the first dim of a
# 16384 x 4096 bfloat16 tensor moved 0.83 of an H100's copy bandwidth with its row mask and
# 0.93 without (`benchmarks/experiments/diag_streaming.py --cases sum_generated`).
EVEN_EXTENT = 1024


def divisible(extent) -> bool:
    """Whether every power-of-two block up to min(extent, EVEN_EXTENT) divides `extent` (never
    for a symbolic extent: its axis keeps its mask)."""
    if not isinstance(extent, int):
        return False
    return extent > 0 and (extent & (extent - 1) == 0 or extent % EVEN_EXTENT == 0)


def product(sizes):
    """The product of `sizes`: an int, or a sympy expression where a size is symbolic."""
    result = 1
    for size in sizes:
        if isinstance(size, sympy.Basic) and not size.is_Integer:
            result = sympy.sympify(result) * size
        else:
            result *= int(size)
    return result


def size_text(size) -> str:
    """An extent as Triton text: an int as itself, a symbolic one parenthesised."""
    if isinstance(size, int) or (isinstance(size, sympy.Basic) and size.is_Integer):
        return str(int(size))
    text = index_text(size)
    return text if text.isidentifier() else f"({text})"


def loop_steps(sizes: list) -> list:
    """The step of each loop of a flat index over `sizes` (the last loop moves fastest): ints
    for static sizes (a zero-size loop, whose grid is empty, keeps the others' steps), sympy
    products where a later size is symbolic."""
    total = product(sizes)
    if isinstance(total, int):
        steps, stride = [], total
        for size in sizes:
            stride //= int(size) or 1
            steps.append(stride)
        return steps
    return [product(sizes[position + 1:]) for position in range(len(sizes))]
