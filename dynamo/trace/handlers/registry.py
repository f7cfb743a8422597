"""The opcode-handler table: which function traces each normalised opcode.

Input: functions decorated with `@handler`, named like the opcode they trace, with optional
version bounds (`since=(3, 12)`, `until=(3, 12)`): Python-version differences live in
registration, not in handler bodies. Output: `HANDLERS`, opcode name -> handler, for the
running interpreter. Registration is checked at import: the name must be an opcode of the
running Python (`dis.opmap`) or one that decoding produces (`NORMALISED_NAMES`), and no
opcode may get two handlers.
"""
from __future__ import annotations

import dis
import sys
from typing import Callable, Optional

from dynamo.instructions import NORMALISED_NAMES

HANDLERS: dict[str, Callable] = {}


class HandlerRegistrationError(Exception):
    """A handler names no opcode of the running Python, or an opcode that has a handler
    already. Cause: a typo in the function's name (or `name=`), or a missing version bound.
    Fix: name the function exactly like the opcode (`dis.opmap`), or give `since`/`until`."""


def handler(since: Optional[tuple] = None, until: Optional[tuple] = None, name: str = "",
            table: Optional[dict] = None):
    """Register the decorated function as the handler of the opcode it is named after (or
    `name`), on Pythons in [`since`, `until`); `table`: another table than `HANDLERS`."""
    def register(function: Callable) -> Callable:
        version = sys.version_info[:2]
        if (since is None or version >= since) and (until is None or version < until):
            _add(HANDLERS if table is None else table, name or function.__name__, function)
        return function
    return register


def _add(table: dict, opname: str, function: Callable) -> None:
    where = f"{function.__module__}.{function.__qualname__}"
    if opname not in dis.opmap and opname not in NORMALISED_NAMES:
        raise HandlerRegistrationError(
            f"{where}: {opname!r} is not an opcode of Python "
            f"{sys.version_info[0]}.{sys.version_info[1]} (nor one decoding produces)")
    if opname in table:
        previous = table[opname]
        raise HandlerRegistrationError(
            f"{where}: {opname!r} has a handler already, "
            f"{previous.__module__}.{previous.__qualname__}")
    table[opname] = function
