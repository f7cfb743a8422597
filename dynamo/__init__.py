"""framejit's frame capture: `dynamo.jit` compiles PyTorch programs just in time.

    import dynamo

    @dynamo.jit
    def step(x, w):
        return torch.relu(x @ w).sum(-1)

Public names only; the stages live in subpackages (`hook`, `rewrite`, `backends`, ...).
Names are loaded on first use, so `python -m dynamo nop-rewrite` never imports torch.
"""
import importlib

from dynamo import logs as _logs
from dynamo.settings import config as config  # re-exported: `dynamo.config` is public API

_PUBLIC = {
    "jit": "dynamo.api",
    "disable": "dynamo.api",
    "reset": "dynamo.api",
    "is_jitted": "dynamo.api",
    "set_stance": "dynamo.stance",
    "RecompileError": "dynamo.stance",
    "list_backends": "dynamo.backends",
    "register_backend": "dynamo.backends",
    "CountingBackend": "dynamo.backends",
    "explain": "dynamo.explanation",
    "ExplainReport": "dynamo.explanation",
    "GraphBreakError": "dynamo.breaks",
    "mark_dynamic": "dynamo.shapes",
    "mark_static": "dynamo.shapes",
}

__all__ = sorted([*_PUBLIC, "config"])

_logs.enable_from_environment()


def __getattr__(name):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'dynamo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
