"""Python functions given a meaning of their own instead of being traced into.

Some library functions answer questions about the tracer itself (`is_torchdynamo_compiling`:
yes, as in torch.compile, so libraries take their compile-friendly paths), only write output
(logging calls at a disabled level do nothing, so they vanish, guarded on the logger staying
disabled), or only inspect real objects (`inspect.signature` of a known function folds).
"""
from __future__ import annotations

import inspect
import logging
import types
from typing import Any, Optional

from dynamo.breaks import PRINT, UNSUPPORTED_CALL, Unsupported
from dynamo.variables.base import NotConstant, Variable
from dynamo.variables.constant import ConstantVariable
from guards import ConstantGuard
from guards.sources import AttrSource, ConstantSource
from dynamo.variables.copying import COPY_FUNCTIONS, copy_call
from dynamo.variables.functions import BoundMethodVariable
from dynamo.variables.operators import _UNKNOWN

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
        return _logging_call(tx, function, name, args, kwargs)
    if function in _INSPECTIONS:
        return _inspection(tx, function, args, kwargs)
    if function in COPY_FUNCTIONS:
        return copy_call(tx, function, args, kwargs)
    return None


_INSPECTIONS = {inspect.signature, inspect.isclass, inspect.isfunction, inspect.ismethod,
                inspect.isgeneratorfunction, inspect.iscoroutinefunction, inspect.getfullargspec,
                inspect.unwrap}


def _inspection(tx, function, args, kwargs) -> Optional[Variable]:
    """`inspect.signature(f)` and friends on real functions, methods and classes fold."""
    try:
        values = [real_value_of(tx, arg) for arg in args]
        keywords = {key: real_value_of(tx, arg) for key, arg in kwargs.items()}
    except NotConstant:
        return None  # trace into it
    try:
        result = function(*values, **keywords)
    except Exception as error:
        raise Unsupported(UNSUPPORTED_CALL, f"{function.__name__}() raised "
                          f"{type(error).__name__}: {error}") from None
    return tx.wrap(result, None)


def real_value_of(tx, value: Variable) -> Any:
    """The real Python object a variable stands for (functions, bound methods of real
    objects, classes, constants); raises NotConstant otherwise."""
    if isinstance(value, BoundMethodVariable):
        return types.MethodType(real_value_of(tx, value.function), real_value_of(tx, value.owner))
    real = tx.real_value(value)
    if real is not _unknown():
        return real
    return value.as_constant()


def _unknown():
    return _UNKNOWN


def _logging_call(tx, function, name: str, args, kwargs=None) -> Optional[Variable]:
    level = _LOGGING_LEVELS.get(name)
    if level is None:
        return None
    logger = tx.real_value(args[0]) if args else None
    if isinstance(logger, logging.Logger) and not logger.isEnabledFor(level):
        probe = ConstantSource(f"logger_{logger.name}_{name}", _LoggerProbe(logger, level))
        tx.guards.add(ConstantGuard(AttrSource(probe, "enabled"), False))
        return ConstantVariable(None)
    if name.endswith("_once") and isinstance(logger, logging.Logger) and not kwargs and \
            all(_is_plain_constant(value) for value in args[1:]):
        # transformers' `logger.warning_once(message)`: emits on its first call with these
        # arguments, then never again (an lru_cache). Made after the graph instead of
        # breaking it; the first call's message then follows the graph's work instead of
        # preceding it (models call it on every step: GPT-2's loss_function property).
        tx.side_effects.defer(function, list(args), len(tx.graph.graph.nodes))
        return ConstantVariable(None)
    raise Unsupported(PRINT, f"logging.{name}()", exact_frames=True)  # records its caller


def _is_plain_constant(value: Variable) -> bool:
    try:
        constant = value.as_constant()
    except NotConstant:
        return False
    return type(constant) in (str, int, float, bool, type(None))


class _LoggerProbe:
    """Whether a logger is enabled for a level, read by a guard: a folded-away logging call
    must compile again once the user turns that level on."""

    __slots__ = ("logger", "level")

    def __init__(self, logger: logging.Logger, level: int):
        self.logger = logger
        self.level = level

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(self.level)
