"""Opcode handlers, one function per normalised opcode, named like the opcode.

The handlers live in family modules (`builders`, `calls`, `control`, `exceptions`, `loads`,
`operations`, `stack`) and register themselves in `registry.HANDLERS` with `@handler`
(optional version bounds). Importing this package imports every family, so `HANDLERS` is
complete; each handler takes the tracer and the instruction.
"""
from __future__ import annotations

from dynamo.trace.handlers import (builders, calls, control, exceptions,  # noqa: F401
                                   loads, operations, stack)
from dynamo.trace.handlers.registry import HANDLERS, handler

__all__ = ["HANDLERS", "handler"]
