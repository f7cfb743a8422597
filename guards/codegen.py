"""Check code generation (stage: guard; input: ordered guards; output: straight-line Python source
and the function it defines).

`CheckWriter` is what guards write into. A guard asks for the variable holding a source's value
(`fetch`), binds objects it compares against into the function's globals (`bind`), and states
conditions that must hold (`require`). Each source is fetched once, into a local named after it
(`L['self'].lin.weight` -> `self_lin_weight`); constants become module-level names of the
generated code. The result reads like code a person would write:

    def check(L, G):
        try:
            x = L['x']
            # L['x']: Tensor(torch.float32, cpu, size=[4, 3], stride=[3, 1])
            if not (type(x) is Tensor and x.dtype is float32 and ...):
                return False
        except Exception:
            return False
        return True
"""
from __future__ import annotations

import builtins
import itertools
import keyword
import linecache
import re
import weakref
from typing import Any, Callable

from guards.sources import ConstantSource, Source

_WRAP_COLUMN = 100
_INDENT = "        "
_counter = itertools.count()


def _identifier(text: str, fallback: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_")
    if not name or name[0].isdigit():
        name = f"{fallback}_{name}" if name else fallback
    return name


def _source_hint(source: Source) -> str:
    """A short identifier-ish hint for a source: `L['self'].lin.weight` -> `self_lin_weight`."""
    text = source.name()
    text = re.sub(r"\._(?:modules|parameters|buffers)\[", "[", text)
    text = re.sub(r"^[LG]\[(['\"])(.*?)\1\]", r"\2", text)
    text = text.replace("type(", "type_of_")
    return _identifier(text, "value")


class CheckWriter:
    """Collects the body of one check function and the globals its code refers to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {}
        self._variables: dict[Source, str] = {}
        self._bound: dict[int, str] = {}
        self._taken: set[str] = {"L", "G", "check", *dir(builtins), *keyword.kwlist}

    def fresh(self, hint: str) -> str:
        """A local or global name not used yet in this check, derived from `hint`."""
        base = hint if not keyword.iskeyword(hint) else hint + "_"
        name = base
        for number in itertools.count(1):
            if name not in self._taken:
                break
            name = f"{base}_{number}"
        self._taken.add(name)
        return name

    def fetch(self, source: Source) -> str:
        """The local variable holding `source`'s value; emits its assignment the first time."""
        variable = self._variables.get(source)
        if variable is not None:
            return variable
        if isinstance(source, ConstantSource):
            variable = self.bind(source.value, _identifier(source.constant_name, "constant"))
        else:
            base_code = "" if source.base is None else self.fetch(source.base)
            variable = self.assign(source.apply(base_code), _source_hint(source))
        self._variables[source] = variable
        return variable

    def assign(self, expression: str, hint: str) -> str:
        """Emit `name = expression` into a fresh local and return the name."""
        name = self.fresh(_identifier(hint, "value"))
        self.lines.append(f"{name} = {expression}")
        return name

    def bind(self, value: Any, hint: str) -> str:
        """A global name of the generated code bound to `value` (one name per object).

        Builtins (`int`, `len`, `list`) are referred to by their own names.
        """
        name = self._bound.get(id(value))
        if name is not None:
            return name
        if getattr(builtins, getattr(value, "__name__", ""), None) is value:
            return value.__name__
        name = self.fresh(_identifier(hint, "constant"))
        self.namespace[name] = value
        self._bound[id(value)] = name
        return name

    def comment(self, text: str) -> None:
        """A comment line in the generated code (what the next condition guards)."""
        self.lines.append("# " + text.replace("\n", " "))

    def require(self, conditions: list[str]) -> None:
        """Emit a statement that returns False unless every condition holds."""
        if not conditions:
            return
        joined = " and ".join(conditions)
        if len(_INDENT) + len(joined) + 12 > _WRAP_COLUMN and len(conditions) > 1:
            separator = " and\n" + _INDENT + "        "
            joined = separator.join(conditions)
        self.lines.append(f"if not ({joined}):\n{_INDENT}    return False")

    def source_text(self) -> str:
        """The complete source of the check function."""
        body = "\n".join(_INDENT + line for line in self.lines) or _INDENT + "pass"
        return ("def check(L, G):\n"
                "    try:\n"
                f"{body}\n"
                "    except Exception:\n"
                "        return False\n"
                "    return True\n")

    def build(self) -> tuple[Callable[[dict, dict], bool], str]:
        """Execute the source once; returns the check function and its source text."""
        text = self.source_text()
        filename = f"<framejit guards check {next(_counter)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        namespace = dict(self.namespace)
        exec(compile(text, filename, "exec"), namespace)
        check = namespace["check"]
        weakref.finalize(check, linecache.cache.pop, filename, None)
        return check, text


def _reject(L: dict, G: dict) -> bool:
    return False


REJECT_CODE = _reject.__code__
"""Code object swapped into a check whose guard set died: it rejects every frame."""
