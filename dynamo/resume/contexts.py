"""Stage "resume", part 5: `with` blocks that a graph break cuts in two.

Input: the exit callables CPython keeps on the stack inside a `with` block. Output: real
callables that the rewritten frame can keep on its stack, and that a region (or an exception
in the frame itself) calls to leave the block exactly as eager code would.

Grad-mode blocks are re-entered by the glue (it sets the mode the block had at the break)
and left by `RestoreGradMode`, which puts back the mode from before the block.
"""
from __future__ import annotations

import torch


class RestoreGradMode:
    """The `__exit__` of a grad-mode block resumed after a graph break."""

    __slots__ = ("previous",)

    def __init__(self, previous: bool):
        self.previous = previous

    def __call__(self, *exc_info) -> bool:
        torch._C._set_grad_enabled(self.previous)
        return False

    def __repr__(self) -> str:
        return f"RestoreGradMode({self.previous})"


def exit_nothing(*exc_info) -> bool:
    """The `__exit__` of a block that restores nothing (`nullcontext`)."""
    return False
