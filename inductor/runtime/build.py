"""Stage "build": C++ sources become loaded entry points, through an on-disk cache.

Input: C++ translation units (each exporting `jit_entry_<n>` functions). Output: ctypes
functions taking data pointers and returning an int status, each with the address of its
`jit_entry_<n>_packed` twin (`packed_address`, None where the source has none), which the
wrapper calls through `runtime/native.py`'s `launch`. A built library lives at
`<cache_dir>/cpp/<key[:2]>/<key>.so`, where the key hashes the source, the compiler and its
version, the flags and the host CPU's instruction-set flags; a hit skips the compiler. Missing
libraries build in parallel (one compiler process per source, up to `compile_workers` at a
time), are written under a temporary name and renamed into place, so concurrent processes
never load a half-written file, and each is built by one process sharing the cache (a file lock
per library: `FileLock` of `guards/native/build.py`, which builds framejit's native helpers).
Loading goes through ctypes: no Python-version-specific glue.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Optional, Sequence

from guards.native.build import FileLock
from inductor.config import config
from inductor.runtime.locks import write_atomically

log = logging.getLogger("framejit.inductor")

PACKED_SUFFIX = "_packed"    # an entry's twin taking (pointers, sizes) arrays (cpp/source.py)
_loaded: dict = {}          # cache key -> loaded library
_loaded_lock = threading.Lock()


class BuildError(RuntimeError):
    """The C++ compiler rejected a generated source. This is a bug in inductor's code
    generator; the message holds the compiler's output and the path of the source. Set
    `inductor.config.fallback_only = True` (JIT_FALLBACK_ONLY=1) to run graphs eagerly."""


@functools.lru_cache(maxsize=8)
def compiler_version(cxx: str) -> str:
    """`cxx --version`, first line (part of every cache key)."""
    try:
        output = subprocess.run([cxx, "--version"], capture_output=True, text=True,
                                check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise BuildError(f"cannot run the C++ compiler {cxx!r}: {error}") from None
    return output.splitlines()[0] if output else cxx


@functools.lru_cache(maxsize=1)
def cpu_flags() -> str:
    """The host CPU's feature flags (kernels are built with -march=native)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


@functools.lru_cache(maxsize=1)
def has_vector_math() -> bool:
    """Whether glibc's vector math library (libmvec) can be linked."""
    for directory in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64",
                      "/usr/lib64", "/usr/lib"):
        if os.path.exists(os.path.join(directory, "libmvec.so")):
            return True
    return False


@functools.lru_cache(maxsize=1)
def vml_library() -> Optional[ctypes.CDLL]:
    """torch's CPU library where it holds MKL's vector math functions (`vmsExp`, ...), which
    eager's float kernels call (`inductor/vml.py`); None elsewhere (a torch built without MKL,
    aarch64): kernels then compute those functions with libm/libmvec, one ulp away at times."""
    import torch
    if not torch.backends.mkl.is_available():
        return None
    try:
        library = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib",
                                           "libtorch_cpu.so"))
    except OSError:
        return None
    return library if hasattr(library, "vmsExp") and hasattr(library, "vmdExp") else None


@ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)
def _vml_symbol(name: bytes) -> Optional[int]:
    try:
        return ctypes.cast(getattr(vml_library(), name.decode()), ctypes.c_void_p).value
    except AttributeError:
        return None


def compile_flags() -> list[str]:
    """Every flag passed to the compiler (part of the cache key)."""
    # -ffp-contract=off: g++ fuses `a * b + c` into one rounding by default, even in C++17
    # mode, where eager rounds the product and the sum (separate kernels); the lowering asks
    # for a fused multiply-add by name (`ops.fma`) exactly where eager's kernels fuse.
    flags = ["-shared", "-fPIC", "-std=c++17", "-fopenmp", "-fwrapv", "-ffp-contract=off", "-w"]
    # g++ merges sin(x) and cos(x) of one value into a scalar sincosf call, which libmvec has
    # no vector variant of: the whole loop then ran scalar (tests/inductor/
    # test_vector_math_symbols.py). Not builtins, they stay two vectorisable calls.
    flags += [f"-fno-builtin-{name}{suffix}" for name in ("sin", "cos") for suffix in ("", "f")]
    flags += config.cxx_flags.split()
    if "avx512f" in cpu_flags().split():
        flags.append("-mprefer-vector-width=512")
    if has_vector_math():
        flags.append("-DJIT_VECTOR_MATH")
    if vml_library() is not None:
        flags.append("-DJIT_VML")
    return flags


def link_flags() -> list[str]:
    return ["-lmvec", "-lm"] if has_vector_math() else ["-lm"]


def cache_key(source: str) -> str:
    """The hash naming the library built from `source` with the current settings."""
    digest = hashlib.sha256()
    for part in (source, config.cxx, compiler_version(config.cxx), " ".join(compile_flags()),
                 " ".join(link_flags()), cpu_flags()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def library_path(key: str) -> str:
    return os.path.join(config.cache_dir, "cpp", key[:2], f"{key}.so")


def _start_build(source: str, path: str, flags: Optional[tuple] = None) -> tuple:
    """Start compiling `source` into a temporary folder next to `path`; `flags`: (compile
    flags, link flags), by default those of kernels."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    work = tempfile.mkdtemp(prefix="build-", dir=directory)
    source_path = os.path.join(work, "kernel.cpp")
    with open(source_path, "w") as handle:
        handle.write(source)
    output = os.path.join(work, "kernel.so")
    before, after = flags if flags is not None else (compile_flags(), link_flags())
    command = [config.cxx, *before, source_path, "-o", output, *after]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    return process, work, output, source_path


def _finish_build(process, work: str, output: str, source_path: str, path: str) -> None:
    messages, _ = process.communicate()
    if process.returncode != 0:
        kept = path.replace(".so", ".failed.cpp")
        with open(source_path) as handle:
            write_atomically(kept, handle.read())
        shutil.rmtree(work, ignore_errors=True)
        raise BuildError(f"C++ compilation failed (source kept at {kept}):\n{messages[-4000:]}")
    os.replace(output, path)
    shutil.rmtree(work, ignore_errors=True)


def build(units: Sequence) -> list:
    """For each translation unit (with `.source` and `.entries`, a list of (symbol, argument
    count)), its entry points as ctypes functions, building what the cache lacks.

    Each missing library is built by one process: the builder holds `<key>.lock` next to it
    (`guards.native.build.FileLock`); a library another process is building is waited for,
    after this process's own builds, and built here only if that process failed."""
    keys = [cache_key(unit.source) for unit in units]
    missing = {}
    for key, unit in zip(keys, units):
        if key not in _loaded and key not in missing and not os.path.exists(library_path(key)):
            missing[key] = unit.source
    elsewhere = _build_missing(missing, blocking=False)
    if elsewhere:
        _build_missing({key: missing[key] for key in elsewhere}, blocking=True)
    if missing:
        log.info("built %d kernel librar%s", len(missing), "y" if len(missing) == 1 else "ies")
    return [_entries(key, unit.entries) for key, unit in zip(keys, units)]


def _build_missing(missing: dict, blocking: bool) -> list:
    """Build `missing` (key -> source) in parallel, each under its file lock; return the keys
    whose lock another process held (non-blocking only)."""
    workers = config.compile_workers or os.cpu_count() or 1
    pending, running, elsewhere = list(missing.items()), [], []
    try:
        while pending or running:
            while pending and len(running) < workers:
                key, source = pending.pop(0)
                lock = FileLock(library_path(key) + ".lock")
                if not lock.acquire(blocking):
                    elsewhere.append(key)
                    continue
                if os.path.exists(library_path(key)):     # built meanwhile by another process
                    lock.release()
                    continue
                try:
                    started = _start_build(source, library_path(key))
                except BaseException:
                    lock.release()
                    raise
                running.append((key, lock, started))
            if running:
                key, lock, started = running.pop(0)
                try:
                    _finish_build(*started, library_path(key))
                finally:
                    lock.release()
    finally:
        for _key, lock, started in running:     # a failed build: stop the others
            started[0].kill()
            started[0].communicate()
            shutil.rmtree(started[1], ignore_errors=True)
            lock.release()
    return elsewhere


def _entries(key: str, entries) -> list:
    with _loaded_lock:
        library = _loaded.get(key)
        if library is None:
            library = ctypes.CDLL(library_path(key))
            _bind_vml(library, key)
            _loaded[key] = library
    functions = []
    for symbol, argument_count in entries:
        function = getattr(library, symbol)
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_void_p] * argument_count
        # the address of its `(pointers, sizes)` twin (codegen/cpp/source.py, `_packed_entry`),
        # which wrappers call through `runtime/native.py`'s `launch` where it builds
        packed = getattr(library, symbol + PACKED_SUFFIX, None)
        function.packed_address = None if packed is None else \
            ctypes.cast(packed, ctypes.c_void_p).value
        functions.append(function)
    return functions


def _bind_vml(library, key: str) -> None:
    """Hand a library the VML functions its source calls (`jit_vml_bind`, prelude.h)."""
    if not hasattr(library, "jit_vml_bind"):
        return
    bind = library.jit_vml_bind
    bind.restype = ctypes.c_int
    bind.argtypes = [type(_vml_symbol)]
    if not bind(_vml_symbol):
        raise BuildError(f"kernel library {library_path(key)} calls MKL VML functions that "
                         "torch's CPU library lacks")
