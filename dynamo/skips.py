"""Which code objects the frame hook never hands to capture.

Input: a code object. Output: whether its frames run as is (and get the hook's skip mark), or
run with capture off together with everything they call (the compilers, `is_compiler`).
framejit's own packages and the `bytecode` package are always skipped; in capture mode so are
torch's and the standard library's own files, whose functions are inlined when user code calls
them rather than compiled as frames of their own. `allow()`-ed code objects (the function or
`forward` passed to `jit`) are captured even when they live in those files.

Compilers are different: a skipped frame's callees are still intercepted, a compiler's are not.
This module installs `is_compiler` as the hook's disable filter when it loads (before any
`jit` callback exists), so that the C hook marks a compiler's code objects DISABLE the first
time it meets one, whoever calls it: inductor's lazily compiled backward, called by the
autograd engine from the user's `loss.backward()`, runs (and compiles, with sympy and the rest)
with capture off by construction, as does a compilation another backend starts at run time.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from types import CodeType

import bytecode

from dynamo import hook


def _package_dir(module) -> str:
    return os.path.dirname(os.path.abspath(module.__file__)) + os.sep


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OWN = tuple(os.path.join(_ROOT, name) + os.sep for name in ("dynamo", "guards", "inductor"))
_OWN += (_package_dir(bytecode),)

_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_libraries: tuple = ()


def _library_dirs() -> tuple:
    global _libraries
    if not _libraries and "torch" in sys.modules:  # no torch code runs before torch loads
        _libraries = (_package_dir(sys.modules["torch"]), _STDLIB) + _TYPING_BACKPORT
    return _libraries or (_STDLIB,) + _TYPING_BACKPORT


# `typing_extensions`, the standard library's `typing` backported, counts as the standard
# library: torch's profiler ranges (`record_function`, run by every `optimizer.step()`) build
# `Optional[...]` through it, and its frames were captured after the step's graph break.
_TYPING_BACKPORT = tuple(spec.origin for spec in [importlib.util.find_spec("typing_extensions")]
                         if spec is not None and spec.origin)


_GENERATED = ("<framejit", "<eval_with_key>")

# The compilers (`is_compiler`): framejit's code generator and guard compiler, and torch's
# compile-time machinery, relative to torch's folder. Not `dynamo` itself: its compiling runs
# inside the hook's callback (capture off already), and its run-time helpers (glue, resume
# functions) call user code that must be captured. Not torch's transforms that run user
# functions eagerly (`torch.func`, `torch.cond`): only code that traces, compiles or reasons
# about sizes.
_COMPILER_PACKAGES = tuple(os.path.join(_ROOT, name) + os.sep for name in ("inductor", "guards"))
_TORCH_COMPILERS = (
    "_dynamo/", "_inductor/", "_compile.py",   # torch.compile; its disable wrapper
    "_functorch/_aot_autograd/", "_functorch/aot_autograd.py", "_functorch/partitioners.py",
    "_functorch/compile_utils.py", "_functorch/compilers.py",
    "_export/", "export/", "_subclasses/", "fx/experimental/", "fx/passes/",
    "_decomp/", "_refs/", "_prims/", "_prims_common/", "utils/_sympy/", "_guards.py",
    "_logging/",
)
# torch._dynamo's run-time helpers, which call user code: `disable(recursive=False)`'s wrapper
# (its callees are captured), hooks and polyfills that compiled code calls.
_TORCH_RUN_TIME = ("_dynamo/external_utils.py", "_dynamo/polyfills/")
_compilers: tuple = ()
_run_time: tuple = ()


# Libraries only compilers call: sympy (torch's size reasoning), Triton (kernel builds) and
# filelock (Triton's cache; its fork-safety audit runs when a kernel build forks, and was
# captured on the H100 during a backward compile: tests/hook/test_compiler_frames.py).
_COMPILER_LIBRARIES = ("sympy", "triton", "filelock")


def _library_dir(name: str) -> tuple:
    """The folders of package `name` (not imported here), or () where it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return ()
    return tuple(os.path.abspath(path) + os.sep for path in spec.submodule_search_locations)


def _compiler_prefixes() -> tuple:
    global _compilers, _run_time
    if not _compilers and "torch" in sys.modules:  # no torch code runs before torch loads
        torch_dir = _package_dir(sys.modules["torch"])
        _run_time = tuple(os.path.join(torch_dir, name) for name in _TORCH_RUN_TIME)
        libraries = tuple(_library_dir(name) for name in _COMPILER_LIBRARIES)
        _compilers = _COMPILER_PACKAGES + tuple(path for dirs in libraries for path in dirs) + \
            tuple(os.path.join(torch_dir, name) for name in _TORCH_COMPILERS)
    return _compilers or _COMPILER_PACKAGES


def is_compiler(code: CodeType) -> bool:
    """Code of a compiler: framejit's `inductor` and `guards`, torch's compile-time machinery
    (`torch._dynamo`, `torch._inductor`, aot_autograd, fake tensors, `make_fx`, symbolic
    shapes, decompositions, `torch._compile`'s never-compile wrapper), sympy, Triton and
    filelock, less
    `torch._dynamo`'s run-time helpers that call user code. Its frames, and everything they
    call, run with capture off (the hook's disable filter)."""
    filename = code.co_filename
    return filename.startswith(_compiler_prefixes()) and not filename.startswith(_run_time)


def is_own(code: CodeType) -> bool:
    """Code of framejit itself, of its `bytecode` dependency, or generated by either (glue,
    guard checks, FX graph modules)."""
    return code.co_filename.startswith(_OWN) or code.co_filename.startswith(_GENERATED)


def is_library(code: CodeType) -> bool:
    """Code of torch or the standard library (inlined, not captured as a frame)."""
    filename = code.co_filename
    return filename.startswith(_library_dirs()) or filename.startswith("<frozen ")


_SITE = tuple(os.path.abspath(path) + os.sep for path in
              {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})


def is_library_file(filename: str) -> bool:
    """Files of torch, the standard library or installed third-party packages."""
    return filename.startswith(_library_dirs() + _SITE) or filename.startswith("<frozen ")


def is_library_module(module) -> bool:
    """Library modules are trusted not to change their attributes while a program runs, so
    reads of their attributes and globals install no guards. A module is a library's when its
    file is (torch, the standard library, installed packages), when it is built into the
    interpreter or frozen, or when it is a namespace package whose folders all are. A module
    with no file otherwise (`types.ModuleType("cfg")`, a module made by `exec`) is the user's:
    its attributes are configuration a program may change, and reads of them are guarded."""
    filename = getattr(module, "__file__", None)
    if isinstance(filename, str):
        return is_library_file(os.path.abspath(filename))
    name = getattr(module, "__name__", None)
    if name in sys.builtin_module_names:
        return True
    spec = getattr(module, "__spec__", None)
    if getattr(spec, "origin", None) in ("built-in", "frozen"):
        return True
    paths = list(getattr(module, "__path__", None) or ())
    return bool(paths) and all(is_library_file(os.path.abspath(path) + os.sep) for path in paths)


def is_library_globals(f_globals: dict) -> bool:
    filename = f_globals.get("__file__")
    return filename is None and f_globals.get("__name__") in sys.builtin_module_names or \
        (filename is not None and is_library_file(os.path.abspath(filename)))


hook.set_disable_filter(is_compiler)
