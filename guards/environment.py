"""Typed settings read from the environment (stage: configuration; input: the process
environment and assignments made at run time; output: typed option objects).

The one place framejit parses `JIT_*` variables. `dynamo.config` (dynamo/settings.py),
`inductor.config` (inductor/config.py) and the native-build switches (guards/native/build.py)
are dataclasses deriving from `Settings`; each field has a kind:

    bool    1/true/yes/on or 0/false/no/off (any case, spaces ignored)
    int     a decimal integer               float   a decimal number
    str     the text as it is               path    a file-system path (`~` expanded)
    choice  one of the field's `choices`

The kind comes from the field's annotation (`bool`, `int`, `float`, `str`) or from
`setting(default, kind="path")` / `setting(default, choices=(...))`. A field is read from
`JIT_<FIELD>` unless `setting(..., env=(...))` names its variables (the first one set wins).
A variable set to the empty string counts as not set. A bad value raises `SettingError`
naming the variable (from the environment) or the option (assigned at run time).
`read(variable, kind, default)` parses one switch without a settings class (`JIT_LOGS`).

This module sits in `guards` (the bottom package) so that `dynamo`, `guards` and `inductor`
share it; it imports nothing of framejit.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, ClassVar, Mapping, Optional, get_type_hints

PREFIX = "JIT_"
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
KINDS = ("bool", "int", "float", "str", "path", "choice")
_ANNOTATED = {bool: "bool", int: "int", float: "float", str: "str"}


def default_cache_dir() -> str:
    """`~/.cache/framejit`, where built kernels and native helpers live unless `JIT_CACHE_DIR`
    (or, for native helpers, `JIT_NATIVE_CACHE_DIR`) says otherwise."""
    return os.path.join(os.path.expanduser("~"), ".cache", "framejit")


class SettingError(ValueError):
    """An option got a value its kind cannot hold (`JIT_RECOMPILE_LIMIT=many`). The message
    names the environment variable or the option and the values it accepts: fix the variable
    (or unset it to keep the default) or assign a value of the option's kind."""


@dataclasses.dataclass(frozen=True)
class Option:
    """One typed field of a `Settings` class: its kind, its variables and its choices."""

    name: str
    kind: str
    variables: tuple[str, ...]
    choices: tuple = ()


def setting(default: Any = dataclasses.MISSING, *, factory: Optional[Callable[[], Any]] = None,
            kind: Optional[str] = None, choices: tuple = (), env: tuple[str, ...] = ()) -> Any:
    """A dataclass field with a kind other than its annotation's (`kind="path"`, `choices`),
    a default computed at creation (`factory`), or environment variables other than
    `JIT_<FIELD>` (`env`, the first one set wins)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown setting kind {kind!r}; known: {', '.join(KINDS)}")
    metadata = {"kind": "choice" if choices else kind, "choices": tuple(choices),
                "env": tuple(env)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def parse_bool(text: str) -> bool:
    """`1/true/yes/on` -> True, `0/false/no/off` -> False (any case); ValueError otherwise."""
    lowered = text.strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    raise ValueError(text)


def _expected(option: Option) -> str:
    if option.kind == "choice":
        return "one of " + ", ".join(repr(choice) for choice in option.choices)
    return {"bool": "a boolean (1/true/yes/on or 0/false/no/off)", "int": "an integer",
            "float": "a number", "str": "a string", "path": "a path"}[option.kind]


def _convert(option: Option, value: Any) -> Any:
    """`value` (text from the environment, or any assigned value) as the option's kind."""
    kind = option.kind
    if kind == "bool":
        if isinstance(value, str):
            return parse_bool(value) if value.strip() else False
        return bool(value)
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "path":
        return os.path.expanduser(os.fspath(value))
    if kind == "choice" and value not in option.choices:
        raise ValueError(value)
    return str(value)


def coerce(option: Option, value: Any, where: str) -> Any:
    """`value` converted to `option`'s kind; `SettingError` naming `where` when it cannot be."""
    try:
        return _convert(option, value)
    except (TypeError, ValueError, OverflowError):
        raise SettingError(f"{where}: expected {_expected(option)}, got {value!r}") from None


def _lookup(variables: tuple[str, ...], environ: Mapping[str, str]) -> Optional[tuple]:
    """(variable, text) of the first of `variables` set to a non-empty value, else None."""
    for variable in variables:
        text = environ.get(variable, "")
        if text.strip():
            return variable, text
    return None


def read(variable: str, kind: str, default: Any, environ: Optional[Mapping] = None,
         choices: tuple = ()) -> Any:
    """The value of one environment variable as `kind`, or `default` when it is not set."""
    option = Option(variable, "choice" if choices else kind, (variable,), tuple(choices))
    found = _lookup(option.variables, os.environ if environ is None else environ)
    if found is None:
        return default
    return coerce(option, found[1], f"{found[0]} in the environment")


class Settings:
    """Base of a typed settings dataclass: assignments are converted to the field's kind (or
    raise), unknown names raise, `from_environment()` reads each field's variables.

    Subclasses set `OWNER`, the name messages use (`"dynamo.config"`)."""

    OWNER: ClassVar[str] = "config"

    @classmethod
    def options(cls) -> dict[str, Option]:
        """The typed fields of this class by name (computed once per class)."""
        known = cls.__dict__.get("_options")
        if known is None:
            known = {field.name: _option(cls.__name__, field, hints)
                     for hints in [get_type_hints(cls)] for field in dataclasses.fields(cls)}
            cls._options = known
        return known

    def __setattr__(self, name: str, value: Any) -> None:
        option = self.options().get(name)
        if option is None:
            raise AttributeError(f"{self.OWNER} has no option {name!r}")
        object.__setattr__(self, name, coerce(option, value, f"{self.OWNER}.{name}"))

    def update(self, **changes: Any) -> None:
        """Set several options at once; unknown names raise `ValueError`."""
        for name, value in changes.items():
            if name not in self.options():
                raise ValueError(f"{self.OWNER} has no option {name!r}; "
                                 f"known options: {', '.join(sorted(self.options()))}")
            setattr(self, name, value)

    def snapshot(self) -> dict:
        """The current values, e.g. to restore them with `update(**saved)` after a test."""
        return dataclasses.asdict(self)

    @classmethod
    def from_environment(cls, environ: Optional[Mapping[str, str]] = None):
        """An instance with defaults overridden by the fields' environment variables."""
        environ = os.environ if environ is None else environ
        settings = cls()
        for option in cls.options().values():
            found = _lookup(option.variables, environ)
            if found is not None:
                where = f"{found[0]} in the environment"
                object.__setattr__(settings, option.name, coerce(option, found[1], where))
        return settings


def _option(owner: str, field: dataclasses.Field, hints: dict) -> Option:
    kind = field.metadata.get("kind") or _ANNOTATED.get(hints[field.name])
    if kind is None:
        raise TypeError(f"{owner}.{field.name}: annotate it bool, int, float or str, or give "
                        f"setting(kind=...) one of {', '.join(KINDS)}")
    variables = field.metadata.get("env") or (PREFIX + field.name.upper(),)
    return Option(field.name, kind, variables, field.metadata.get("choices", ()))
