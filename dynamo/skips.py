"""Which code objects the frame hook never hands to capture.

Input: a code object. Output: whether its frames run as is (and get the hook's skip mark).
framejit's own packages and the `bytecode` package are always skipped; in capture mode so are
torch's and the standard library's own files, whose functions are inlined when user code calls
them rather than compiled as frames of their own. `allow()`-ed code objects (the function or
`forward` passed to `jit`) are captured even when they live in those files.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from types import CodeType

import bytecode


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
        _libraries = (_package_dir(sys.modules["torch"]), _STDLIB)
    return _libraries or (_STDLIB,)


def is_own(code: CodeType) -> bool:
    """Code of framejit itself or of its `bytecode` dependency."""
    return code.co_filename.startswith(_OWN)


def is_library(code: CodeType) -> bool:
    """Code of torch or the standard library (inlined, not captured as a frame)."""
    filename = code.co_filename
    return filename.startswith(_library_dirs()) or filename.startswith("<frozen ")
