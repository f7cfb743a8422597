"""Native tensor matching (stage: guard; input: the `TensorProperties` of a guard set's tensor
guards; output: one callable that checks all their tensors in a single call, or None).

Torch's Python getters (`x.dtype`, `x.shape`, `x.stride()`, `x.is_neg()`...) cost 40-90 ns each,
about 0.5 us per tensor; read from the tensor's C++ implementation the same facts cost ~10 ns.
`tensor_match.cpp` does that. It needs torch's C++ headers, which only the installed torch has,
so it is compiled on first use with the system C++ compiler and cached on disk at
`<JIT_CACHE_DIR or ~/.cache/framejit>/guards/<key>/`, where the key hashes the source, torch's
version, Python's version and the compiler; later processes load it at once. Concurrent
processes wait on a file lock rather than build twice.

When it cannot be built (no compiler, no headers) or `JIT_NATIVE_GUARDS=0`, checks keep the
generated Python conditions: the same answers, only slower. The reason is logged once on the
`framejit.guards` channel.

`python -m guards.native` builds it ahead of time and prints where it lives.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import logging
import os
import subprocess
import sys
import sysconfig
import tempfile
import threading
from types import ModuleType
from typing import Callable, Optional, Sequence

import torch

log = logging.getLogger("framejit.guards")

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensor_match.cpp")
MODULE_NAME = "guards.native._tensor_match"

_enabled = os.environ.get("JIT_NATIVE_GUARDS", "1").strip().lower() not in ("0", "false", "no",
                                                                             "off")
_lock = threading.Lock()
_state: dict = {}  # "module" (loaded), "error" (why not)


def enabled() -> bool:
    """Whether guard sets compile their tensor checks to the native matcher when it loads."""
    return _enabled


def set_enabled(flag: bool) -> None:
    """Switch the native matcher on or off for guard sets compiled from now on."""
    global _enabled
    _enabled = bool(flag)


def cache_root() -> str:
    """`JIT_NATIVE_CACHE_DIR` (native libraries only: the benchmarks keep them across jobs
    whose kernel caches start empty), else `JIT_CACHE_DIR`, else ~/.cache/framejit."""
    return os.environ.get("JIT_NATIVE_CACHE_DIR") or os.environ.get("JIT_CACHE_DIR") or \
        os.path.join(os.path.expanduser("~"), ".cache", "framejit")


def _compiler() -> str:
    return os.environ.get("JIT_CXX") or os.environ.get("CXX") or "g++"


def _compile_command(output: str) -> list[str]:
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    includes = [os.path.join(torch_dir, "include"),
                os.path.join(torch_dir, "include", "torch", "csrc", "api", "include"),
                sysconfig.get_paths()["include"]]
    library_dir = os.path.join(torch_dir, "lib")
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return [_compiler(), "-O2", "-std=c++20", "-shared", "-fPIC", "-w",
            f"-D_GLIBCXX_USE_CXX11_ABI={abi}", *(f"-I{path}" for path in includes), SOURCE,
            "-o", output, f"-L{library_dir}", "-lc10", "-ltorch", "-ltorch_cpu",
            "-ltorch_python", f"-Wl,-rpath,{library_dir}"]


def _key() -> str:
    try:
        compiler = subprocess.run([_compiler(), "--version"], capture_output=True, text=True,
                                  timeout=60).stdout.splitlines()[:1]
    except (OSError, subprocess.SubprocessError):
        compiler = ["unknown compiler"]
    digest = hashlib.sha256()
    with open(SOURCE, "rb") as handle:
        digest.update(handle.read())
    for part in (torch.__version__, str(getattr(torch.version, "git_version", "")),
                 sys.version, *compiler, " ".join(_compile_command("out")[1:])):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:24]


def library_path() -> str:
    """Where the built matcher for this torch, Python and compiler lives."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return os.path.join(cache_root(), "guards", _key(), "_tensor_match" + suffix)


def _build(path: str) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same file
        if os.path.exists(path):
            return
        log.info("building the native guard matcher (once per torch version): %s", path)
        handle, temporary = tempfile.mkstemp(suffix=".so", dir=directory)
        os.close(handle)
        try:
            result = subprocess.run(_compile_command(temporary), capture_output=True, text=True,
                                    timeout=600)
            if result.returncode != 0:
                raise RuntimeError(f"compiler failed:\n{result.stderr[-3000:]}")
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)


def _import(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load() -> Optional[ModuleType]:
    """The native module, building it on first use; None when it cannot be had (logged once)."""
    if "module" in _state or "error" in _state:
        return _state.get("module")
    with _lock:
        if "module" not in _state and "error" not in _state:
            try:
                path = library_path()
                if not os.path.exists(path):
                    _build(path)
                _state["module"] = _import(path)
            except Exception as error:  # no compiler, no headers, an incompatible torch...
                _state["error"] = f"{type(error).__name__}: {error}"
                log.warning("native guard checks unavailable, using Python checks: %s",
                            _state["error"])
    return _state.get("module")


def unavailable_reason() -> Optional[str]:
    """Why the native matcher could not be loaded (after `load()` failed), else None."""
    return _state.get("error")


def tensor_matcher(properties: Sequence) -> Optional[Callable[..., bool]]:
    """A callable `matcher(t0, t1, ...) -> bool` checking each tensor against the matching
    `TensorProperties`, or None when native checks are off or unavailable."""
    if not _enabled or not properties:
        return None
    module = load()
    if module is None:
        return None
    try:
        return module.TensorMatcher([tensor_spec(item) for item in properties])
    except (TypeError, ValueError, OverflowError) as error:  # e.g. a symbolic (nested) size
        log.debug("tensor guards kept in Python: %s", error)
        return None


def tensor_spec(properties) -> tuple:
    """The native form of a `TensorProperties` (what `TensorMatcher` and `GuardProgram` read)."""
    return (properties.tensor_type, properties.dtype, properties.device,
            properties.requires_grad, properties.layout, properties.sizes, properties.strides,
            properties.inference, properties.neg, properties.conj)
