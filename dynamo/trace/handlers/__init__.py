"""Opcode handlers, one function per normalised opcode, named like the opcode.

`@handler` registers a function for the running interpreter, with optional version bounds
(`since=(3, 12)`, `until=(3, 12)`), so that version differences live in registration rather
than in handler bodies. Each handler takes the tracer and the instruction.
"""
from __future__ import annotations

import sys
from typing import Callable, Optional

HANDLERS: dict[str, Callable] = {}


def handler(since: Optional[tuple] = None, until: Optional[tuple] = None, name: str = ""):
    """Register the decorated function as the handler of the opcode it is named after."""
    def register(function: Callable) -> Callable:
        version = sys.version_info[:2]
        if (since is None or version >= since) and (until is None or version < until):
            HANDLERS[name or function.__name__] = function
        return function
    return register


from dynamo.trace.handlers import (builders, calls, control, exceptions,  # noqa: E402,F401
                                   loads, operations, stack)
