"""The graph fuzzer's program: inputs, statements and outputs of one random graph.

Input: what the generator (`generator.py`) or the minimizer (`minimize.py`) decided. Output:
Python source of a function, the `torch.fx.GraphModule` that `symbolic_trace` makes of it (the
torch-level graph `dynamo` hands to a backend: methods, operators, torch functions), concrete
input tensors for a given call (aliasing and layouts as specified), and a standalone script.

Inputs are *roots* (fresh contiguous tensors made for each call) and *arguments* derived
from roots by an expression (`r`, `r.t()`, `r[:, ::2]`, `r.expand(3, 4)`), so two arguments
may share a root (the same tensor passed twice, or views of one tensor).
"""
from __future__ import annotations

import dataclasses
import operator
import re
from typing import Optional

import torch
import torch.fx

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
FLOAT_NAMES = ("float32", "float64", "float16", "bfloat16")
NAME_PATTERN = re.compile(r"\b[av]\d+\b")


@dataclasses.dataclass
class Root:
    """A fresh tensor per call: `kind` is "float", "int", "bool", "index" (integers in
    [0, high)) or "unique" (the same, never repeating along `dim`); `special` floats include
    zeros, infinities and NaN."""

    shape: tuple
    dtype: str
    kind: str
    high: int = 0
    special: bool = False
    scale: float = 1.0
    dim: int = 0            # "unique": no value repeats along this dimension


@dataclasses.dataclass
class Arg:
    """A graph input: `derive` is an expression over `r`, the root's tensor."""

    name: str
    root: int
    derive: str = "r"


@dataclasses.dataclass
class Stmt:
    """One or more lines of the function body defining `defines` and reading `uses`."""

    code: str
    defines: list
    uses: list


@dataclasses.dataclass
class Program:
    """A random graph: roots, arguments (placeholders in order), body, returned names."""

    roots: list
    args: list
    stmts: list
    outputs: list
    device: str = "cpu"

    def copy(self) -> "Program":
        return Program([dataclasses.replace(root) for root in self.roots],
                       [dataclasses.replace(arg) for arg in self.args],
                       [Stmt(stmt.code, list(stmt.defines), list(stmt.uses))
                        for stmt in self.stmts], list(self.outputs), self.device)

    def source(self, float64: bool = False) -> str:
        """The function's source; `float64`: every floating dtype named becomes float64
        (the reference the comparison judges rounding against)."""
        lines = [f"def f({', '.join(arg.name for arg in self.args)}):"]
        for stmt in self.stmts:
            lines.extend("    " + line for line in stmt.code.splitlines())
        lines.append(f"    return ({''.join(name + ', ' for name in self.outputs)})")
        text = "\n".join(lines) + "\n"
        if float64:
            text = re.sub(r"torch\.(float32|float16|bfloat16)\b", "torch.float64", text)
        return text

    def graph_module(self, float64: bool = False) -> torch.fx.GraphModule:
        """The traced function: the torch-level graph a backend receives from `dynamo`."""
        namespace = namespace_for(self.device, traced=True)
        exec(compile(self.source(float64), "<fuzz-graph>", "exec"), namespace)
        return trace(namespace["f"], namespace)

    def inputs(self, call: int, seed: int, float64: bool = False) -> list:
        """The argument tensors of call number `call` (values differ per call, layouts and
        aliasing do not); `float64` upcasts floating roots before deriving the arguments."""
        generator = torch.Generator().manual_seed(seed * 1000003 + call)
        roots = [make_root(root, generator, self.device) for root in self.roots]
        if float64:
            roots = [value.double() if value.is_floating_point() else value for value in roots]
        return derive_args(self.args, roots)

    def script(self, seed: int, note: str = "", backend: str = "cpp") -> str:
        """A standalone repro: builds the inputs, compiles with `inductor.compile_fx` and
        compares with eager."""
        from tests.fuzz.graphs.repro import script_for
        return script_for(self, seed, note, backend)


def derive_args(args: list, roots: list) -> list:
    values, cache = [], {}
    for arg in args:
        key = (arg.root, arg.derive)
        if key not in cache:  # the same expression twice passes the same tensor object
            cache[key] = eval(arg.derive, {"torch": torch}, {"r": roots[arg.root]})
        values.append(cache[key])
    return values


def make_root(root: Root, generator: torch.Generator, device: str) -> torch.Tensor:
    """A fresh root tensor (drawn on the CPU from `generator`, then moved to `device`)."""
    dtype = DTYPES[root.dtype]
    shape = tuple(root.shape)
    if root.kind == "bool":
        value = torch.rand(shape, generator=generator) < 0.5
    elif root.kind == "index":
        value = torch.randint(0, max(root.high, 1), shape, generator=generator)
    elif root.kind == "unique" and not shape:
        value = torch.randint(0, max(root.high, 1), shape, generator=generator)
    elif root.kind == "unique":
        drawn = list(shape)
        drawn[root.dim] = max(root.high, shape[root.dim])
        order = torch.rand(drawn, generator=generator).argsort(root.dim)
        value = order.narrow(root.dim, 0, shape[root.dim]).contiguous()
    elif root.kind == "int":
        low, high = (0, 16) if dtype == torch.uint8 else (-8, 9)
        value = torch.randint(low, high, shape, generator=generator)
    else:
        value = torch.randn(shape, generator=generator, dtype=torch.float64) * root.scale
        if root.special and value.numel():
            picks = torch.rand(shape, generator=generator)
            specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan")],
                                    dtype=torch.float64)
            choice = torch.randint(0, 5, shape, generator=generator)
            value = torch.where(picks < 0.15, specials[choice], value)
    return value.to(dtype).to(device)


FACTORIES = ("arange", "zeros", "ones", "full", "eye", "linspace", "tensor")
_tracers: list = []


def _recorded(function):
    """`function` as a graph node while a trace runs (symbolic tracing would run a factory
    without tensor arguments once and store its result as a constant, and cannot trace
    `__setitem__`; `dynamo` records both as `call_function` nodes)."""
    def record(*args, **kwargs):
        if _tracers:
            return _tracers[-1].create_proxy("call_function", function, args, kwargs)
        return function(*args, **kwargs)
    return record


def namespace_for(device: str, traced: bool = False) -> dict:
    """Globals of generated code: torch, functional, aten, the device, `setitem`; with `traced`,
    `torch` is a stand-in whose factories become graph nodes."""
    namespace = {"torch": torch, "F": torch.nn.functional, "DEVICE": torch.device(device),
                 "setitem": operator.setitem, "aten": torch.ops.aten}
    if traced:
        namespace["torch"] = _TracedTorch()
        namespace["setitem"] = _recorded(operator.setitem)
    return namespace


class _TracedTorch:
    """`torch` with its factories recorded as graph nodes during a trace."""

    def __getattr__(self, name):
        value = getattr(torch, name)
        return _recorded(value) if name in FACTORIES else value


def trace(function, namespace: Optional[dict] = None) -> torch.fx.GraphModule:
    """`torch.fx` symbolic tracing of `function`, factories and `setitem` as nodes."""
    tracer = torch.fx.Tracer()
    _tracers.append(tracer)
    try:
        graph = tracer.trace(function)
    finally:
        _tracers.pop()
    return torch.fx.GraphModule(tracer.root, graph, "f")


def names_in(code: str) -> list:
    """Value names (`a3`, `v12`) a piece of code mentions, in order, without repeats."""
    seen: list = []
    for name in NAME_PATTERN.findall(code):
        if name not in seen:
            seen.append(name)
    return seen


def rename(code: str, old: str, new: str) -> str:
    return re.sub(rf"\b{old}\b", new, code)


def root_dtype(program: Program, name: str) -> Optional[str]:
    for arg in program.args:
        if arg.name == name:
            return program.roots[arg.root].dtype
    return None
