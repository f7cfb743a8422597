"""How inductor calls the FX graphs it compiles (every stage: decompose, autograd, pipeline).

Input: a graph module (or any callable) and its arguments. Output: what its `forward` returns.

A `torch.fx.GraphModule` called as a module goes through `nn.Module.__call__`, which runs the
user's global module hooks (`register_module_forward_hook` and its kin) on framejit's own graph
while it is traced, faked or run for eager's layouts: a hook mapping tuples to `()` made the
compiled graph return `()` (tests/repros/test_global_module_hooks_guarded.py). Inductor calls
`forward` instead, as eager would never have called such a module at all. Modules the graph
itself calls (`call_module` nodes of a symbolically traced model) are the user's and keep
their hooks.
"""
from __future__ import annotations

from typing import Any, Callable

import torch


def hookless(function: Any) -> Callable:
    """`function.forward` for a module (no module hooks run), else `function` itself."""
    return function.forward if isinstance(function, torch.nn.Module) else function
