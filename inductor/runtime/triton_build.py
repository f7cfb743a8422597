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
