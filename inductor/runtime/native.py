"""Native host-side helpers for generated wrappers (stage: run; input: the arguments of a
wrapper's per-call work; output: its tensors).

`native.cpp` is a small Python extension built on first use against the installed torch's
headers by `guards/native/build.py` (the one mechanism for native helpers: key, cache, locks,
one notice, concurrent builds) into `<JIT_NATIVE_CACHE_DIR or config.cache_dir>/native/<key>/
_native<suffix>`, with `config.cxx`. Entry points:
`empty_strided(sizes, strides, dtype, device)`, the tensor `torch.empty_strided` returns,
through `at::empty_strided` but without torch's Python argument parser (a wrapper allocates each
buffer it does not reuse on every call); `storages_shared(values)`, whether two tensors of a
sequence share a storage (the per-call aliasing check of graphs that write into inputs);
`size_binder(reads, checks, exception)` and `bind_sizes(binder, *tensors)`, the size binding of
a wrapper compiled over symbolic sizes in one call (`size_binding`); `launch(address,
*values)`, a kernel entry's call with its tensors' data pointers (`launcher`);
`own_tensor(memory, sizes, strides, offset)` and `view_of(base, sizes, strides, offset)`, an
output over a buffer's memory that is no view, and a view (`output_geometry`);
`layout_differs(tensor, dims, strides, nbytes)`, the per-call check that an eager kernel's result
has the layout the kernels expect (`layout_check`); `program(...)` and `run_program(program,
*inputs)`, a wrapper made only of allocations and launches run in one call (`programs`,
`runtime/native_program.py`).

`empty_strided()` returns that function, or a Python function calling `torch.empty_strided`
where the extension cannot be built (no compiler or headers; logged once on
`framejit.inductor`) or `config.native_allocation` is off.
"""
from __future__ import annotations

import os
from typing import Callable, Optional

import torch

from guards.native import build
from inductor.config import config


def _root() -> str:
    return build.settings.native_cache_dir or config.cache_dir


HELPER = build.register(build.NativeHelper(
    module="inductor.runtime._native",
    source=os.path.join(os.path.dirname(os.path.abspath(__file__)), "native.cpp"),
    folder="native",
    unavailable="native allocation unavailable, wrappers call torch.empty_strided",
    channel="framejit.inductor", root=_root, compiler=lambda: config.cxx))


def _python_empty_strided(sizes, strides, dtype, device):
    return torch.empty_strided(sizes, strides, dtype=dtype, device=device)


def library_path() -> str:
    """Where the extension for this torch, Python and compiler lives (built or not)."""
    return build.library_path(HELPER)


def empty_strided() -> Callable:
    """`empty_strided(sizes, strides, dtype, device)` for generated wrappers."""
    if not config.native_allocation:
        return _python_empty_strided
    module = build.load(HELPER)
    return module.empty_strided if module is not None else _python_empty_strided


def _python_storages_shared(values) -> bool:
    storages = [value.untyped_storage()._cdata for value in values
                if isinstance(value, torch.Tensor)]
    return len(set(storages)) != len(storages)


def storages_shared() -> Callable:
    """`storages_shared(values) -> bool`: the extension's, else a Python version."""
    module = build.load(HELPER)
    return module.storages_shared if module is not None else _python_storages_shared


def size_binding(reads, checks, exception):
    """(bind_sizes, binder) for a wrapper compiled over symbolic sizes, or None where the
    extension is unavailable (the wrapper then reads sizes and compares strides in Python).
    `bind_sizes(binder, *inputs)` returns the symbols' values read as `reads` says
    ((position, 0 for a size or 1 for a stride, dim) per symbol), after checking that each
    input of `checks` ((position, strides)) has exactly those strides (as many dims; each a
    polynomial ((coefficient, (symbol index, ...)), ...) of the values), else raises
    `exception`."""
    module = build.load(HELPER)
    if module is None or not hasattr(module, "bind_sizes"):
        return None
    flat = [number for read in reads for number in read]
    return module.bind_sizes, module.size_binder(flat, checks, exception)


def launcher() -> Optional[Callable]:
    """`launch(entry_address, *tensors_then_ints) -> status`: calls a packed kernel entry
    (`codegen/cpp/source.py`) with each tensor's data pointer and each int, or None where the
    extension is unavailable (the wrapper then calls the ctypes entry with `data_ptr()`s)."""
    module = build.load(HELPER)
    return getattr(module, "launch", None) if module is not None else None


def _python_own_tensor(memory: torch.Tensor, size, stride, offset: int) -> torch.Tensor:
    """An output given a dead buffer's memory by `as_strided` or `.view` came back as a view of
    that buffer (`t1._base` a (4, 3) intermediate, and `t1[1:]._base` that buffer, not `t1`):
    this is a tensor of its own over that memory, as eager's fresh outputs (an inference
    tensor over an inference tensor's memory)."""
    if memory.is_inference():
        with torch.inference_mode():
            return torch.empty((0,), dtype=memory.dtype, device=memory.device).set_(
                memory.untyped_storage(), offset, size, stride)
    result = torch.empty((0,), dtype=memory.dtype, device=memory.device)
    with torch.autograd._unsafe_preserve_version_counter(result):   # `set_` counts as a write
        result.set_(memory.untyped_storage(), offset, size, stride)
    return result


def _python_view_of(base: torch.Tensor, size, stride, offset: int) -> torch.Tensor:
    return torch.as_strided(base, size, stride, base.storage_offset() + offset)


def output_geometry() -> tuple:
    """(own_tensor, view_of): `own_tensor(memory, sizes, strides, offset)`, a tensor over
    `memory`'s storage at `offset` that is no view (`_base` None, a version counter of its own
    at 0, as eager's fresh outputs); `view_of(base, sizes, strides, offset)`, `base`'s view
    `torch.as_strided(base, sizes, strides, base.storage_offset() + offset)`. The extension's
    (no Python argument parsing), else Python versions."""
    module = build.load(HELPER)
    if module is None or not hasattr(module, "own_tensor"):
        return _python_own_tensor, _python_view_of
    return module.own_tensor, module.view_of


def layout_check() -> Optional[Callable]:
    """`layout_differs(tensor, dims, strides, nbytes) -> bool`: whether `tensor`'s stride along
    `dims[i]` differs from `strides[i]` for some i, or (where nbytes >= 0) it does not start a
    storage of exactly `nbytes`; None where the extension is unavailable (the wrapper then
    compares in Python)."""
    module = build.load(HELPER)
    return getattr(module, "layout_differs", None) if module is not None else None


def programs() -> Optional[tuple]:
    """(program, run_program) of the extension (`runtime/native_program.py`), or None where it
    is unavailable or `config.native_allocation` is off."""
    if not config.native_allocation:
        return None
    module = build.load(HELPER)
    if module is None or not hasattr(module, "run_program"):
        return None
    return module.program, module.run_program
