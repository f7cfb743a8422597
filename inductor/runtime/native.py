"""Native host-side helpers for generated wrappers (stage: run; input: the arguments of a
wrapper's per-call work; output: its tensors).

`native.cpp` is a small Python extension built on first use against the installed torch's
headers (about 10 s, once per torch, Python and compiler) into `<JIT_NATIVE_CACHE_DIR or
cache_dir>/native/<key>/_native<suffix>`, where the key hashes the source, torch's and Python's
versions and the compiler; it is compiled by `build.py`'s machinery for kernels (temporary
folder, atomic rename) under a file lock, so concurrent processes build it once (`guards/native`
builds its matcher alike, but inductor imports nothing from guards). Entry points:
`empty_strided(sizes, strides, dtype, device)`, the tensor `torch.empty_strided` returns,
through `at::empty_strided` but without torch's Python argument parser (a wrapper allocates each
buffer it does not reuse on every call); `storages_shared(values)`, whether two tensors of a
sequence share a storage (the per-call aliasing check of graphs that write into inputs).

`empty_strided()` returns that function, or a Python function calling `torch.empty_strided`
where the extension cannot be built (no compiler or headers; logged once on
`framejit.inductor`) or `config.native_allocation` is off.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import logging
import os
import sys
import sysconfig
import threading
from typing import Callable

import torch

log = logging.getLogger("framejit.inductor")

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native.cpp")
_lock = threading.Lock()
_state: dict = {}


def _python_empty_strided(sizes, strides, dtype, device):
    return torch.empty_strided(sizes, strides, dtype=dtype, device=device)


def _flags() -> tuple:
    """(compile flags, link flags) of a Python extension against the installed torch."""
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    includes = [os.path.join(torch_dir, "include"),
                os.path.join(torch_dir, "include", "torch", "csrc", "api", "include"),
                sysconfig.get_paths()["include"]]
    library_dir = os.path.join(torch_dir, "lib")
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return (["-O2", "-std=c++20", "-shared", "-fPIC", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
             *(f"-I{path}" for path in includes)],
            [f"-L{library_dir}", "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python",
             f"-Wl,-rpath,{library_dir}"])


def library_path() -> str:
    """Where the extension for this torch, Python and compiler lives (built or not)."""
    from inductor.config import config
    from inductor.runtime.build import compiler_version
    digest = hashlib.sha256()
    with open(SOURCE, "rb") as handle:
        digest.update(handle.read())
    compile_flags, link_flags = _flags()
    for part in (torch.__version__, sys.version, compiler_version(config.cxx),
                 " ".join(compile_flags + link_flags)):
        digest.update(part.encode() + b"\0")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    root = os.environ.get("JIT_NATIVE_CACHE_DIR") or config.cache_dir
    return os.path.join(root, "native", digest.hexdigest()[:24], "_native" + suffix)


def _build(path: str) -> None:
    """Compile through `runtime/build.py` (temporary folder, atomic rename), holding a file
    lock so that concurrent processes build it once."""
    from inductor.runtime.build import _finish_build, _start_build
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(os.path.join(os.path.dirname(path), ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            return
        log.info("building inductor's native helpers (once per torch version): %s", path)
        with open(SOURCE) as handle:
            started = _start_build(handle.read(), path, _flags())
        _finish_build(*started, path)


def _import(path: str):
    spec = importlib.util.spec_from_file_location("inductor.runtime._native", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load():
    with _lock:
        if "module" not in _state and "error" not in _state:
            try:
                path = library_path()
                if not os.path.exists(path):
                    _build(path)
                _state["module"] = _import(path)
            except Exception as error:  # no compiler, no headers, an incompatible torch...
                _state["error"] = f"{type(error).__name__}: {error}"
                log.warning("native allocation unavailable, wrappers call torch.empty_strided: "
                            "%s", _state["error"])
    return _state.get("module")


def empty_strided() -> Callable:
    """`empty_strided(sizes, strides, dtype, device)` for generated wrappers."""
    from inductor.config import config
    if not config.native_allocation:
        return _python_empty_strided
    module = _state.get("module") or _load()
    return module.empty_strided if module is not None else _python_empty_strided


def _python_storages_shared(values) -> bool:
    storages = [value.untyped_storage()._cdata for value in values
                if isinstance(value, torch.Tensor)]
    return len(set(storages)) != len(storages)


def storages_shared() -> Callable:
    """`storages_shared(values) -> bool`: the extension's, else a Python version."""
    module = _state.get("module") or _load()
    return module.storages_shared if module is not None else _python_storages_shared
