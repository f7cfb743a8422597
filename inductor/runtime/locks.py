"""Stages "build" and "run": the locks that keep inductor correct under threads and processes.

Input: compilations, builds and interpreted launches started from any thread or process.
Output: the same results as one at a time. Three locks, each for a named piece of shared state:

- `compile_lock` (re-entrant, per process) around every compilation (`pipeline.compile_fx`,
  `compile_aten` and whatever calls them): tracing and code generation use process-wide state
  that is not thread-safe. torch.fx's tracer keeps one patcher (`CURRENT_PATCHER is None in
  finally block` when two threads trace), `make_fx` one decomposition table, and inductor's
  loop IR one stack of graphs under construction (`ir/nodes.py`, `building`) and one stack of
  `ops` handlers (`ir/ops.py`): two threads lowering at once registered a realized buffer in
  the other thread's graph, so a wrapper named a buffer it never allocated (`NameError: name
  'buf2' is not defined`), and printed one thread's body with the other's handler (wrong values,
  `'object' object has no attribute 'name'`). torch.compile has one such lock too.
- `interpreter_lock` (per process) around every launch through Triton's interpreter: it patches
  `triton.language` for the duration of a launch and keeps the program index in one global
  builder, so two threads launching at once ran with each other's index or with the language
  unpatched (`Did you forget to add @triton.jit ?`).
- across processes sharing `JIT_CACHE_DIR`: `FileLock(path)` (`guards/native/build.py`, the
  one native-build mechanism, which inductor may import), an advisory `flock` on a lock file,
  held while a library that must be built once is built. Files in the cache are written
  under a temporary name and renamed into place (`os.replace`, `write_atomically` below), so
  readers never see half a file whether or not they took the lock.
"""
from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import threading
from typing import Callable

compile_lock = threading.RLock()
interpreter_lock = threading.RLock()


def serialized(function: Callable) -> Callable:
    """`function` run while holding `compile_lock` (one compilation at a time per process;
    re-entrant, so a compilation may start another, as training compiles its forward)."""
    @functools.wraps(function)
    def run(*args, **kwargs):
        with compile_lock:
            return function(*args, **kwargs)
    return run


def write_atomically(path: str, data, mode: str = "w") -> None:
    """Write `data` to `path` through a temporary file in the same folder and `os.replace`,
    so that a concurrent reader sees the old file, no file, or the whole new one."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(handle, mode) as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
