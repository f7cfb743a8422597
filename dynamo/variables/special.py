"""Python functions given a meaning of their own instead of being traced into.

Some library functions answer questions about the tracer itself (`is_torchdynamo_compiling`:
yes, as in torch.compile, so libraries take their compile-friendly paths) or only write
output (logging calls at a disabled level do nothing, so they vanish).
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from dynamo.breaks import PRINT, Unsupported
from dynamo.variables.base import Variable
from dynamo.variables.constant import ConstantVariable

_COMPILING = {"is_torchdynamo_compiling", "is_torchdynamo_exporting", "is_compiling",
              "is_dynamo_compiling"}
_LOGGING_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
                   "warn": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
                   "exception": logging.ERROR, "warning_once": logging.WARNING,
                   "info_once": logging.INFO}


def special_function(tx, function: Any, args, kwargs) -> Optional[Variable]:
    module = getattr(function, "__module__", "") or ""
    name = getattr(function, "__name__", "")
    if name in _COMPILING and module.startswith(("transformers", "torch", "accelerate")):
        return ConstantVariable(name.endswith("compiling"))
    if module == "logging" or (name in _LOGGING_LEVELS and module.startswith("transformers")):
        return _logging_call(tx, function, name, args)
    return None


def _logging_call(tx, function, name: str, args) -> Optional[Variable]:
    level = _LOGGING_LEVELS.get(name)
    if level is None:
        return None
    logger = tx.real_value(args[0]) if args else None
    if isinstance(logger, logging.Logger) and not logger.isEnabledFor(level):
        return ConstantVariable(None)
    raise Unsupported(PRINT, f"logging.{name}()")
