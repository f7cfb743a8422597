"""Stage "build" for framejit's native helpers (input: a `NativeHelper`, a C++ source built
against the installed torch or a C source built against Python only; output: the imported
extension module, or None with the reason logged once).

The one run-time mechanism for extensions that cannot be built when the package is installed:
the guard tensor matcher (`guards/native/tensor_match.cpp`) and inductor's allocation helpers
(`inductor/runtime/native.cpp`) need the *installed* torch's C++ headers, which pip's isolated
build environment does not have. (The frame hook and frame state need only Python's headers:
setuptools builds them at install time, pyproject.toml.) Each library lives at
`<root>/<folder>/<key>/<name><EXT_SUFFIX>`, where the root is `JIT_NATIVE_CACHE_DIR`, else
`JIT_CACHE_DIR`, else ~/.cache/framejit (inductor's helper: its `config.cache_dir`), and the key
hashes the source, torch's version, Python's version, the compiler and its flags. A library is
compiled under a temporary name and renamed into place, holding a file lock (`flock`) so that
concurrent processes build it once, and a thread lock within the process.

Helpers register themselves (`register`); when one must be built at its first use, every
registered helper that is missing and wanted is built alongside it (one compiler process each)
after one WARNING line on the `framejit` logger saying so (logging rather than `warnings.warn`:
under `-W error` or a test runner's warning filters a notice must not become an exception, and
logging's last-resort handler prints it to stderr when nothing is configured), then one
progress line on stderr naming each helper and its seconds so far (`show_progress`: updated in
place on a terminal, written once at the end elsewhere). `python -m dynamo
build` builds them all ahead of time (`build_all`). Where a helper cannot be built (no
compiler, no headers), its caller keeps a Python fallback; the reason is logged once on the
helper's channel.

`inductor` imports this module (and `guards.environment`) and nothing else of `guards`.
"""
from __future__ import annotations

import dataclasses
import fcntl
import functools
import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from types import ModuleType
from typing import Callable, Optional, Sequence

from guards.environment import Settings, default_cache_dir, setting

log = logging.getLogger("framejit")

BUILD_SECONDS = "30-60"
"""What the notice says a cold build takes: each helper costs 33-37 s of compiler CPU time on
the 2-core VM (2026-11-27), so two built at once on two free cores take about the longer one."""

AHEAD_COMMAND = "python -m dynamo build"


@dataclasses.dataclass
class NativeSettings(Settings):
    """The environment switches of native builds."""

    OWNER = "guards.native.build.settings"

    native_cache_dir: str = setting("", kind="path")
    """Root for native helpers only (`JIT_NATIVE_CACHE_DIR`): the benchmarks keep them across
    jobs whose kernel caches start empty. Empty: `cache_dir`."""

    cache_dir: str = setting(factory=default_cache_dir, kind="path")
    """framejit's cache (`JIT_CACHE_DIR`, the variable `inductor.config.cache_dir` reads)."""

    cxx: str = setting("g++", env=("JIT_CXX", "CXX"))
    """The C++ compiler of the guard matcher (`JIT_CXX`, else `CXX`; inductor's helper uses
    `inductor.config.cxx`)."""


settings = NativeSettings.from_environment()


def default_root() -> str:
    """`JIT_NATIVE_CACHE_DIR`, else `JIT_CACHE_DIR`, else ~/.cache/framejit."""
    return settings.native_cache_dir or settings.cache_dir


@dataclasses.dataclass(frozen=True)
class NativeHelper:
    """One extension built at run time: what to compile, where to keep it, what to say."""

    module: str
    """Its import name (`guards.native._tensor_match`); the last part names the file."""
    source: str
    """Path of a `.cpp` file (built against torch) or a `.c` file (against Python only)."""
    folder: str
    """Sub-folder of the cache root (`guards`, `native`)."""
    unavailable: str
    """The message logged once when it cannot be built, before the reason."""
    channel: str = "framejit"
    """Logger of that message."""
    root: Callable[[], str] = default_root
    compiler: Callable[[], str] = lambda: settings.cxx
    wanted: Callable[[], bool] = lambda: True
    """Whether to build it alongside another helper's first-use build."""
    headers: tuple = ()
    """Paths of the headers `source` includes (their text is part of the cache key)."""

    @property
    def against_torch(self) -> bool:
        return self.source.endswith(".cpp")


class FileLock:
    """An exclusive advisory lock (`flock`) on the file `path`, created if missing. Works
    between processes, and between threads too (each `acquire` opens its own descriptor).
    Inductor's kernel builds use it as well (`inductor/runtime/build.py`)."""

    def __init__(self, path: str):
        self.path = path
        self.descriptor = None

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; non-blocking: False, without waiting, when someone else holds it."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(descriptor)
            return False
        except BaseException:
            os.close(descriptor)
            raise
        self.descriptor = descriptor
        return True

    def release(self) -> None:
        if self.descriptor is not None:
            descriptor, self.descriptor = self.descriptor, None
            fcntl.flock(descriptor, fcntl.LOCK_UN)
            os.close(descriptor)


_registry: dict[str, NativeHelper] = {}
_modules: dict[str, ModuleType] = {}
_errors: dict[str, str] = {}
_lock = threading.RLock()


def register(helper: NativeHelper) -> NativeHelper:
    """Add `helper` to those built together and by `build_all` (again: replaced)."""
    _registry[helper.module] = helper
    return helper


def registered() -> list[NativeHelper]:
    return list(_registry.values())


def _torch_flags() -> tuple[list[str], list[str]]:
    import torch
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    includes = [os.path.join(torch_dir, "include"),
                os.path.join(torch_dir, "include", "torch", "csrc", "api", "include")]
    library_dir = os.path.join(torch_dir, "lib")
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return ([f"-D_GLIBCXX_USE_CXX11_ABI={abi}", *(f"-I{path}" for path in includes)],
            [f"-L{library_dir}", "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python",
             f"-Wl,-rpath,{library_dir}"])


def compile_command(helper: NativeHelper, output: str) -> list[str]:
    """The compiler's command line building `helper` into `output`."""
    python_include = f"-I{sysconfig.get_paths()['include']}"
    if not helper.against_torch:
        return [helper.compiler(), "-x", "c", "-std=c11", "-O2", "-shared", "-fPIC", "-w",
                python_include, helper.source, "-o", output]
    before, after = _torch_flags()
    return [helper.compiler(), "-O2", "-std=c++20", "-shared", "-fPIC", "-w", *before,
            python_include, helper.source, "-o", output, *after]


@functools.lru_cache(maxsize=8)
def compiler_version(compiler: str) -> str:
    """The first line of `compiler --version` (part of every key)."""
    try:
        output = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown compiler"
    return output.splitlines()[0] if output else compiler


def cache_key(helper: NativeHelper) -> str:
    """Hash of the source, torch's and Python's versions, the compiler and its flags."""
    digest = hashlib.sha256()
    for path in (helper.source, *helper.headers):
        with open(path, "rb") as handle:
            digest.update(handle.read())
    parts = [sys.version, compiler_version(helper.compiler()),
             " ".join(compile_command(helper, "out"))]
    if helper.against_torch:
        import torch
        parts += [torch.__version__, str(getattr(torch.version, "git_version", ""))]
    for part in parts:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:24]


def library_path(helper: NativeHelper) -> str:
    """Where `helper`'s library for this torch, Python and compiler lives (built or not)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    name = helper.module.rpartition(".")[2]
    return os.path.join(helper.root(), helper.folder, cache_key(helper), name + suffix)


def load(helper: NativeHelper) -> Optional[ModuleType]:
    """`helper`'s module, building it (and the other wanted helpers missing) on first use;
    None when it cannot be had (the reason logged once)."""
    module = _modules.get(helper.module)
    if module is not None or helper.module in _errors:
        return module
    with _lock:
        if helper.module not in _modules and helper.module not in _errors:
            _load_locked(helper)
    return _modules.get(helper.module)


def _load_locked(helper: NativeHelper) -> None:
    try:
        path = library_path(helper)
        if not os.path.exists(path):
            others = [other for other in registered() if other.module != helper.module
                      and other.module not in _errors and other.module not in _modules
                      and other.wanted()]
            _build([helper] + others, notice=True)
        if helper.module not in _errors:
            _modules[helper.module] = _import(helper, path)
    except Exception as error:  # an unreadable source, an incompatible torch...
        _fail(helper, f"{type(error).__name__}: {error}")


def unavailable_reason(helper: NativeHelper) -> Optional[str]:
    """Why `helper` could not be loaded (after `load` failed), else None."""
    return _errors.get(helper.module)


def forget(helper: NativeHelper) -> None:
    """Drop what this process remembers of `helper` (tests: the next `load` starts afresh;
    a module already imported stays imported)."""
    with _lock:
        _modules.pop(helper.module, None)
        _errors.pop(helper.module, None)


def build_all(helpers: Optional[Sequence[NativeHelper]] = None,
              progress: bool = False) -> dict[str, str]:
    """Build every registered helper (or `helpers`) now, at once, and load each; module name
    -> the path of its library, or `not built: <reason>`. `progress`: the progress line on
    stderr while compilers run (`python -m dynamo build`)."""
    helpers = registered() if helpers is None else list(helpers)
    with _lock:
        for helper in helpers:
            forget(helper)
        _build(helpers, notice=False, progress=progress)
        return {helper.module: library_path(helper) if load(helper) is not None
                else f"not built: {_errors[helper.module]}" for helper in helpers}


def main() -> int:
    """Build every registered helper, print each one's library (or why not); 0 if all built."""
    begun = time.perf_counter()
    results = build_all(progress=True)
    for name, result in results.items():
        print(f"{name}: {result}")
    failed = [name for name in results if name in _errors]
    print(f"{len(results) - len(failed)} of {len(results)} native helpers ready "
          f"({time.perf_counter() - begun:.1f} s)")
    return 1 if failed else 0


def _fail(helper: NativeHelper, reason: str) -> None:
    _errors[helper.module] = reason
    logging.getLogger(helper.channel).warning("%s: %s", helper.unavailable, reason)


class _Build:
    """One helper's compiler process, holding the file lock of its folder until `finish`."""

    def __init__(self, helper: NativeHelper, path: str, lock) -> None:
        self.helper, self.path, self.lock = helper, path, lock
        # unique while the lock is held; the linker creates it with the usual permissions
        self.temporary = os.path.join(os.path.dirname(path), f".build-{os.getpid()}.so")
        self.begun = time.perf_counter()
        self.seconds: Optional[float] = None  # how long the compiler ran, once it has ended
        self.messages: Optional[str] = None
        self.process = subprocess.Popen(compile_command(helper, self.temporary),
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)

    def wait(self, seconds: float) -> bool:
        """Wait up to `seconds` for the compiler, reading its output; whether it has ended."""
        if self.messages is None:
            try:
                self.messages, _ = self.process.communicate(timeout=seconds)
            except subprocess.TimeoutExpired:
                return False
            self.seconds = time.perf_counter() - self.begun
        return True

    def finish(self) -> None:
        try:
            if self.messages is None:
                self.messages, _ = self.process.communicate(timeout=600)
            messages = self.messages
            if self.process.returncode != 0:
                raise RuntimeError(f"compiler failed:\n{messages[-3000:]}")
            os.replace(self.temporary, self.path)
        except Exception as error:
            self.process.kill()
            _fail(self.helper, f"{type(error).__name__}: {error}")
        finally:
            if os.path.exists(self.temporary):
                os.unlink(self.temporary)
            self.lock.release()


def _build(helpers: Sequence[NativeHelper], notice: bool, progress: bool = False) -> None:
    """Build the missing libraries of `helpers` concurrently, each under its folder's lock
    (taken in order, so that two processes building the same set never deadlock)."""
    started, begun = [], time.perf_counter()
    try:
        for helper in helpers:
            build = _start(helper, notice and not started)
            if build is not None:
                started.append(build)
        if (notice or progress) and started:
            show_progress(started, begun, sys.stderr)
    finally:
        for build in started:
            build.finish()
    if started:
        names = ", ".join(build.helper.module for build in started)
        log.info("built %s in %.1f s", names, time.perf_counter() - begun)


def show_progress(builds: Sequence[_Build], begun: float, stream) -> None:
    """Until every compiler has ended, keep one line on `stream` (stderr) saying which helper is
    building and for how long: rewritten in place every second on a terminal; elsewhere (a log
    file, a CI job) written once, when all have ended."""
    terminal = hasattr(stream, "isatty") and stream.isatty()
    pending = list(builds)
    while pending:
        pending = [build for build in pending if not build.wait(1.0 / len(pending))]
        if terminal and pending:
            stream.write("\r" + progress_line(builds, begun))
            stream.flush()
    stream.write(("\r" if terminal else "") + progress_line(builds, begun) + "\n")
    stream.flush()


def progress_line(builds: Sequence[_Build], begun: float) -> str:
    """`framejit: building native helpers (once per machine, 12 s): guards.native._tensor_match
    12 s, inductor.runtime._native done in 9.8 s`."""
    now = time.perf_counter()
    parts = [f"{build.helper.module} " + (f"{now - build.begun:.0f} s" if build.seconds is None
                                          else f"done in {build.seconds:.1f} s")
             for build in builds]
    state = "built" if all(build.seconds is not None for build in builds) else "building"
    return (f"framejit: {state} native helpers (once per machine, {now - begun:.0f} s): "
            + ", ".join(parts))


def _start(helper: NativeHelper, notice: bool) -> Optional[_Build]:
    """Lock `helper`'s folder and start its compiler; None when its library exists (built
    meanwhile by another process) or it cannot be built (the reason recorded)."""
    try:
        path = library_path(helper)
        if shutil.which(helper.compiler()) is None:
            raise FileNotFoundError(f"no C++ compiler {helper.compiler()!r} "
                                    "(set JIT_CXX, or install g++)")
        lock = FileLock(os.path.join(os.path.dirname(path), ".lock"))
        lock.acquire()  # another process may be building the same file: wait for it
        if os.path.exists(path):
            lock.release()
            return None
        if notice:
            log.warning("building framejit's native helpers once (about %s s); later runs load "
                        "them from %s; run `%s` after installing to build them ahead",
                        BUILD_SECONDS, helper.root(), AHEAD_COMMAND)
        try:
            return _Build(helper, path, lock)
        except BaseException:
            lock.release()
            raise
    except Exception as error:
        _fail(helper, f"{type(error).__name__}: {error}")
        return None


def _import(helper: NativeHelper, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(helper.module, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
