"""The one configuration object of `dynamo` and its environment overrides.

Every option is a typed field of `Config`; `JIT_<FIELD>` in the environment overrides its
default when `dynamo` is imported (`JIT_RECOMPILE_LIMIT=4`, `JIT_NOP_REWRITE=1`). Code reads
`dynamo.config.<field>` at the moment it needs a value, so assignments take effect at once.
`docs/api.md` lists every field.
"""
from __future__ import annotations

import dataclasses
import os
from typing import get_type_hints

ENV_PREFIX = "JIT_"


@dataclasses.dataclass
class Config:
    """Options of the frame capture. Assign attributes to change them at run time."""

    recompile_limit: int = 8
    """Compiled entries per code object; further guard misses run eagerly with one warning."""

    nop_rewrite: bool = False
    """Send every intercepted frame through decode -> insert NOPs -> assemble (a self-test)."""

    suppress_errors: bool = True
    """On an internal compiler error run the frame eagerly with one warning; False raises."""

    inline_depth: int = 32
    """How deep user function calls are inlined into one graph before the call breaks it."""

    verbose: bool = False
    """Attach the full internal traceback to warnings about fallbacks."""

    def update(self, **changes) -> None:
        """Set several options at once; unknown names raise `ValueError`."""
        for name, value in changes.items():
            if name not in _field_types():
                raise ValueError(f"dynamo.config has no option {name!r}; "
                                 f"known options: {', '.join(sorted(_field_types()))}")
            setattr(self, name, value)

    def __setattr__(self, name: str, value) -> None:
        types = _field_types()
        if name not in types:
            raise AttributeError(f"dynamo.config has no option {name!r}")
        object.__setattr__(self, name, _coerce(name, types[name], value))


def _field_types() -> dict[str, type]:
    return {name: kind for name, kind in get_type_hints(Config).items()}


def _coerce(name: str, kind: type, value):
    if kind is bool:
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(f"{ENV_PREFIX}{name.upper()}: expected a boolean, got {value!r}")
        return bool(value)
    if kind is int:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError(f"dynamo.config.{name}: expected an integer, got {value!r}") from None
    return kind(value)


def from_environment(environ=os.environ) -> Config:
    """A `Config` with defaults overridden by `JIT_<FIELD>` environment variables."""
    config = Config()
    for name in _field_types():
        key = ENV_PREFIX + name.upper()
        if key in environ:
            setattr(config, name, environ[key])
    return config


config = from_environment()
