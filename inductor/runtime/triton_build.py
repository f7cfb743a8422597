"""Stage "build" for Triton: generated module text becomes loaded `@triton.jit` functions,
and their compilations are started in parallel.

Input: a `TritonModule` (codegen/triton/source.py) and the device it runs on. Output: the
loaded Python module. The text is written once to `<cache_dir>/triton/<key[:2]>/<key>.py`
(the key hashes the text; written under a temporary name and renamed into place) and
imported from there, since Triton reads a function's source back from its file. Triton's
own compiled-kernel cache is pointed at `<cache_dir>/triton/compiled` unless the user set
`TRITON_CACHE_DIR`, so compiled kernels live under `JIT_CACHE_DIR` too, keyed by Triton on
the function's source hash. For CPU tensors the module is loaded for the interpreter
(`triton_interpret.py`).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import importlib.util
import logging
import os
import sys
import tempfile
import threading

from inductor.config import config

log = logging.getLogger("framejit.inductor")
_modules: dict = {}
_support: dict = {}         # device index -> programmatic launch works there
_lock = threading.Lock()


def module_path(text: str) -> str:
    key = hashlib.sha256(text.encode()).hexdigest()
    return os.path.join(config.cache_dir, "triton", key[:2], f"{key}.py")


def _write_once(path: str, text: str) -> None:
    if os.path.exists(path):
        return
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix="module-", suffix=".py", dir=directory)
    with os.fdopen(handle, "w") as stream:
        stream.write(text)
    os.replace(temporary, path)


def use_cache_directory() -> None:
    """Point Triton's compiled-kernel cache under `config.cache_dir` (once, unless the user
    chose a directory through TRITON_CACHE_DIR)."""
    if os.environ.get("TRITON_CACHE_DIR"):
        return
    directory = os.path.join(config.cache_dir, "triton", "compiled")
    try:
        from triton import knobs
        knobs.cache.dir = directory
    except (ImportError, AttributeError):  # triton before knobs: read from the environment
        os.environ["TRITON_CACHE_DIR"] = directory


def load(text: str, interpret: bool):
    """The module of `text`, loaded for the GPU or (`interpret`) for the CPU interpreter."""
    path = module_path(text)
    key = (path, interpret)
    with _lock:
        module = _modules.get(key)
        if module is not None:
            return module
        _write_once(path, text)
        name = f"framejit_triton_{'cpu_' if interpret else ''}" \
               f"{os.path.basename(path)[:24]}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        if interpret:
            from inductor.runtime.triton_interpret import (interpreting, libdevice_on_cpu,
                                                            tree_reduce)
            with interpreting():
                spec.loader.exec_module(module)
            module.libdevice = libdevice_on_cpu
            module.jit_reduce = tree_reduce
        else:
            use_cache_directory()
            spec.loader.exec_module(module)
        _modules[key] = module
        return module


def programmatic_launch(device) -> bool:
    """Whether kernels for `device` are printed to wait for their predecessors and launched
    with programmatic dependent launch: `config.triton_programmatic_launch`, an NVIDIA GPU of
    compute capability 9.0 or later (Hopper's `griddepcontrol`), and a Triton with both
    `gdc_wait` and the `launch_pdl` launch option (3.6 through 3.8 checked)."""
    import torch

    if not config.triton_programmatic_launch or device.type != "cuda" or \
            torch.version.hip is not None:
        return False
    key = device.index if device.index is not None else torch.cuda.current_device()
    if key not in _support:
        try:
            from triton.backends.nvidia.compiler import CUDAOptions
            from triton.language.extra.cuda import gdc_wait  # noqa: F401
            options = {field.name for field in dataclasses.fields(CUDAOptions)}
            _support[key] = "launch_pdl" in options and \
                torch.cuda.get_device_capability(key) >= (9, 0)
        except (ImportError, TypeError):
            _support[key] = False
    return _support[key]


def precompile(tasks: list, workers: int) -> None:
    """Run compilation tasks (callables, one per function: each compiles that function for
    all its configurations) on `workers` threads; the first failure is raised."""
    if not tasks:
        return
    if workers <= 1 or len(tasks) == 1:
        for task in tasks:
            task()
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for future in [pool.submit(task) for task in tasks]:
            future.result()
    log.info("compiled %d Triton function(s) on %d threads", len(tasks), workers)
