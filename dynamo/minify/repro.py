"""Stage "write" of the minifier: a minimized case as a standalone Python script.

Input: a shrunk `Case`, the backend it fails with, the failure, and where it came from.
Output: the text of a script that defines the graph as a `torch.nn.Module` (the graph's FX
code) and traces it with `torch.fx.symbolic_trace`, makes its inputs with the recorded
sizes, strides, storage offsets, dtypes and `requires_grad` (the recorded values where a
tensor's storage holds at most `EMBEDDED_ELEMENTS` elements, else random numbers from a fixed
seed), rebuilds the backend, runs the graph through the backend and through eager, prints the
difference, and exits with status 1 when the failure shows (0 when it does not).
"""
from __future__ import annotations

import functools
import os
import types
from typing import Callable

import torch

from dynamo.minify.compare import storage_extent, storage_key
from dynamo.minify.shrink import Case

EMBEDDED_ELEMENTS = 4096
_PREAMBLE_NAMES = {"torch", "inf", "nan", "device", "NoneType", "operator", "math",
                   "builtins", "fx_pytree", "pytree"}

_HEADER = '''"""framejit minifier repro ({label}, from {script}).

Failure ({kind}): {detail}
Source lines of the operations left: {locations}

Run: python {name}   (exit status 1: the failure shows; 0: it does not)
"""
import builtins
import functools
import importlib
import math
import operator
import runpy
import sys
from math import inf, nan

import torch
import torch.fx._pytree as fx_pytree
import torch.utils._pytree as pytree
from torch import device

from dynamo.minify.compare import check_graph

NoneType = type(None)
EXPECTED = {signature!r}
SCRIPT = {script!r}
'''

_MAKE_INPUT = '''

def make_input(shape, stride, offset, dtype, requires_grad=False, storage=None, seed=0,
               device="cpu"):
    """A tensor of the recorded layout: `storage` holds its storage's elements from offset 0
    (None: random numbers from `seed`)."""
    extent = offset + 1 + sum((size - 1) * step for size, step in zip(shape, stride)) \\
        if all(shape) else offset
    if storage is not None:
        base = torch.tensor(storage, dtype=dtype)
    else:
        generator = torch.Generator().manual_seed(seed)
        if dtype.is_complex:
            base = torch.randn(extent, generator=generator, dtype=dtype)
        elif dtype.is_floating_point:
            base = torch.randn(extent, generator=generator).to(dtype)
        elif dtype == torch.bool:
            base = torch.randint(0, 2, (extent,), generator=generator).bool()
        else:
            base = torch.randint(-5, 6, (extent,), generator=generator).to(dtype)
    value = base.to(device).as_strided(shape, stride, offset)
    return value.detach().requires_grad_(True) if requires_grad else value
'''

_MAIN = '''

def main():
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(Repro())
    print(gm.code)
    failure = check_graph(gm, make_inputs(), backend)
    if failure is None:
        print("no failure: the backend agrees with eager on this graph")
        return 0
    same = "the failure minimized" if failure.signature == EXPECTED else "another failure"
    print(f"reproduced ({same}): {failure.kind}: {failure.detail}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
'''


class ReproError(Exception):
    """The minimized graph holds something a script cannot rebuild (named in the message);
    the minifier still reports the failing graph's code."""


def render(case: Case, backend: Callable, failure, label: str, script: str,
           out_name: str) -> str:
    """The repro script's text."""
    gm = case.module()
    header = _HEADER.format(label=label, script=script, kind=failure.kind,
                            detail=failure.detail.replace('"""', "'''")[:500],
                            locations=", ".join(_locations(case)) or "unknown",
                            name=os.path.basename(out_name), signature=failure.signature)
    parts = [header, _imports_for(gm), _module_source(gm), _MAKE_INPUT,
             _inputs_source(case), _backend_source(backend, script), _MAIN]
    return "".join(parts)


def _locations(case: Case) -> list:
    found = []
    for node in case.graph.nodes:
        location = node.meta.get("location")
        if location and str(location) not in found:
            found.append(str(location))
    return found[:10]


def _imports_for(gm: torch.fx.GraphModule) -> str:
    """Lines binding the names the graph's code reads beyond the preamble's."""
    lines = []
    for name, value in gm.graph.python_code("self").globals.items():
        if name in _PREAMBLE_NAMES or name.startswith("__"):
            continue
        if isinstance(value, types.ModuleType):
            lines.append(f"{name} = importlib.import_module({value.__name__!r})")
            continue
        module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", "")
        if not module or not qualname or "<" in qualname or module == "__main__":
            raise ReproError(f"the graph calls {value!r}, which a script cannot import")
        lines.append(f"{name} = functools.reduce(getattr, {qualname.split('.')!r}, "
                     f"importlib.import_module({module!r}))")
    return "\n" + "\n".join(lines) + "\n" if lines else ""


def _module_source(gm: torch.fx.GraphModule) -> str:
    body = "\n".join(("    " + line) if line.strip() else "" for line in
                     gm.code.strip("\n").splitlines())
    return f"\n\nclass Repro(torch.nn.Module):\n{body}\n"


def _inputs_source(case: Case) -> str:
    """`make_inputs()`: tensors sharing a storage are views of one made storage."""
    values = case.input_list()
    shared = _shared_storages(values)
    lines = ["", "", "def make_inputs():"]
    for number, (key, (extent, value)) in enumerate(shared.items()):
        base = torch.as_strided(value.detach(), (extent,), (1,), 0)
        lines.append(f"    storage{number} = {_tensor_source(base, 100 + number)}")
    lines.append("    return [")
    names = {key: f"storage{number}" for number, key in enumerate(shared)}
    for seed, value in enumerate(values):
        key = storage_key(value)
        if key in names:
            lines.append(f"        {_view_source(names[key], value)},")
        else:
            lines.append(f"        {_value_source(value, seed)},")
    lines.append("    ]")
    return "\n".join(lines) + "\n"


def _shared_storages(values: list) -> dict:
    """storage key -> (extent, a tensor) for storages two or more inputs share."""
    found: dict = {}
    for value in values:
        key = storage_key(value)
        if key is not None:
            extent, count, _ = found.get(key, (0, 0, None))
            found[key] = (max(extent, storage_extent(value)), count + 1, value)
    return {key: (extent, value) for key, (extent, count, value) in found.items() if count > 1}


def _view_source(storage: str, value: torch.Tensor) -> str:
    view = (f"{storage}.as_strided({tuple(value.shape)}, {tuple(value.stride())}, "
            f"{value.storage_offset()})")
    return f"{view}.detach().requires_grad_(True)" if value.requires_grad else view


def _value_source(value, seed: int) -> str:
    if isinstance(value, torch.Tensor):
        return _tensor_source(value, seed)
    if isinstance(value, (bool, int, float, complex, str, type(None))):
        return repr(value)
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    raise ReproError(f"an input of type {type(value).__name__} cannot be written as Python")


def _tensor_source(value: torch.Tensor, seed: int) -> str:
    value = value.detach()
    place = f", device={str(value.device)!r}" if value.device.type != "cpu" else ""
    extent = storage_extent(value)
    storage = None
    if extent <= EMBEDDED_ELEMENTS and value.layout == torch.strided:
        storage = torch.as_strided(value, (extent,), (1,), 0).cpu().tolist()
    return (f"make_input({tuple(value.shape)}, {tuple(value.stride())}, "
            f"{value.storage_offset()}, torch.{str(value.dtype).split('.')[-1]}, "
            f"{value.requires_grad}, {storage!r}, {seed}{place})")


def _backend_source(backend: Callable, script: str) -> str:
    """Lines defining `backend` as the recorded one."""
    lines = ["", ""]
    mode = None
    if isinstance(backend, functools.partial):
        mode, backend = backend.keywords.get("mode"), backend.func
    module, qualname = getattr(backend, "__module__", None), getattr(backend, "__qualname__", "")
    if module is None or not qualname or "<" in qualname:
        raise ReproError(f"the backend {backend!r} cannot be rebuilt by a script: pass a "
                         f"module-level function (or a registered name) as the backend")
    path = qualname.split(".")
    if module == "__main__":  # defined in the user's script: load the script as a module
        lines.append("# the script's top level runs here; keep its program under "
                     "`if __name__ == \"__main__\":`")
        lines.append(f"backend = functools.reduce(getattr, {path[1:]!r}, "
                     f"runpy.run_path(SCRIPT, run_name='__framejit_minify__')[{path[0]!r}])")
    else:
        lines.append(f"sys.path.insert(0, {os.path.dirname(os.path.abspath(script))!r})")
        lines.append(f"backend = functools.reduce(getattr, {path!r}, "
                     f"importlib.import_module({module!r}))")
    if mode is not None:
        lines.append(f"backend = functools.partial(backend, mode={mode!r})")
    return "\n".join(lines) + "\n"
