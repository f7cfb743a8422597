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

With a native `ProgramBuilder` (see `guards.native.program`), reads of locals, globals,
attributes, items and types, and the simple conditions on them (exact type, identity, `is`,
length, constants, keys, tensor properties), become steps of one native program that runs
first; it returns the values the remaining Python conditions need, or None when a step fails.
The steps are listed as comments at the top of the function, in the same notation.
"""
from __future__ import annotations

import builtins
import itertools
import keyword
import linecache
import re
import weakref
from typing import Any, Callable

from guards.native import program as native_program
from guards.sources import (AttrSource, CallSource, ConstantSource, DictItemSource,
                            GlobalModuleSource, GlobalSource, GlobalsSource, ItemSource,
                            LocalSource, ObjectSource, Source, TypeSource)
from guards.sources import _ModuleMemberSource as ModuleMemberSource

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

    def __init__(self, program: native_program.ProgramBuilder | None = None) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {}
        self.program = program
        self._variables: dict[Source, str] = {}
        self._registers: dict[str, int] = {}   # variable -> register of the native program
        self._derived: dict[tuple, str] = {}   # (variable, step, operand) -> variable
        self._bound: dict[int, str] = {}
        self._pending_comment: str | None = None
        self._taken: set[str] = {"L", "G", "check", "values", "native_program",
                                 *dir(builtins), *keyword.kwlist}

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
        """The local variable holding `source`'s value, usable by Python conditions; emits its
        assignment the first time (exports it from the native program if it read it)."""
        return self.export(self.value(source))

    def export(self, variable: str) -> str:
        """`variable`, made available to Python conditions (returned by the native program if
        it reads it)."""
        register = self._registers.get(variable)
        if register is not None:
            self.program.export(register)
        return variable

    def value(self, source: Source) -> str:
        """The variable naming `source`'s value for the `check_*` methods: read by the native
        program where it can be, else assigned in Python."""
        variable = self._variables.get(source)
        if variable is not None:
            return variable
        if isinstance(source, ConstantSource):
            variable = self._native_constant(source) or \
                self.bind(source.value, _identifier(source.constant_name, "constant"))
        elif isinstance(source, ObjectSource):
            variable = self._held_object(source)
        elif isinstance(source, CallSource):
            function = self.bind(source.function, _identifier(
                getattr(source.function, "__name__", "function"), "function"))
            arguments = ", ".join(
                [self._argument(argument) for argument in source.arguments] +
                [f"{key}={self._argument(value)}" for key, value in source.keywords])
            variable = self.assign(f"{function}({arguments})", _source_hint(source))
        else:
            variable = self._native_read(source)
            if variable is None:
                base_code = "" if source.base is None else self.fetch(source.base)
                variable = self.assign(source.apply(base_code), _source_hint(source))
        self._variables[source] = variable
        return variable

    def _native_constant(self, source: ConstantSource) -> str | None:
        """A register holding a value bound into the check (the globals of a module whose
        function was inlined), so that reads from it run natively too; None without a native
        program."""
        if self.program is None:
            return None
        name = self.fresh(_identifier(source.constant_name, "constant"))
        self._flush_native_comment()
        self._registers[name] = self.program.read(native_program.CONSTANT, -1, source.value,
                                                  f"{name} = <{source.constant_name}>")
        return name

    def _held_object(self, source: ObjectSource) -> str:
        """A variable for an object bound into the check without keeping it alive: read
        through its weak reference (natively when there is a program)."""
        held = source.held
        hint = _identifier(source.object_name, "object")
        if self.program is None:
            if not held.weak:
                return self.bind(held.reference, hint)
            reference = self.bind(held.reference, hint + "_ref")
            return self.assign(f"{reference}()", hint)
        name = self.fresh(hint)
        self._flush_native_comment()
        operation = native_program.WEAK if held.weak else native_program.CONSTANT
        self._registers[name] = self.program.read(operation, -1, held.reference,
                                                  f"{name} = <{source.object_name}>")
        return name

    def _argument(self, value: Any) -> str:
        return repr(value) if _literal_argument(value) else self.bind(value, "argument")

    def _native_read(self, source: Source) -> str | None:
        steps = _native_steps(source) if self.program is not None else None
        if steps is None:
            return None
        base_code, register = "", -1
        if source.base is not None:
            base_code = self.value(source.base)
            register = self._registers.get(base_code, -1)
            if register < 0:
                return None
        name = self.fresh(_identifier(_source_hint(source), "value"))
        text = f"{name} = {source.apply(base_code)}"
        self._flush_native_comment()
        for index, (operation, operand) in enumerate(steps):
            register = self.program.read(operation, register, operand,
                                         text if index == len(steps) - 1 else "")
        self._registers[name] = register
        return name

    def native(self, variable: str) -> bool:
        """Whether the native program holds `variable` (so `check_*` conditions on it run
        natively)."""
        return variable in self._registers

    def derive(self, variable: str, step: str, operand: Any, hint: str) -> str:
        """A variable for `variable.<operand>` (step "attribute") or `variable[operand]`
        ("item"), read natively when `variable` is."""
        key = (variable, step, operand)
        known = self._derived.get(key)
        if known is not None:
            return known  # the checks run in order: an earlier read of it stands
        expression = (f"{variable}.{operand}" if step == "attribute"
                      else f"{variable}[{operand!r}]")
        register = self._registers.get(variable)
        if register is None:
            name = self.assign(expression, hint)
        else:
            name = self.fresh(_identifier(hint, "value"))
            self._flush_native_comment()
            operation = native_program.ATTRIBUTE if step == "attribute" else native_program.ITEM
            self._registers[name] = self.program.read(operation, register, operand,
                                                      f"{name} = {expression}")
        self._derived[key] = name
        return name

    # -- conditions that run natively when their variable is native --------------------------
    def _condition(self, variable: str, text: str, operation: int, operand: Any = None,
                   number: int = 0) -> None:
        register = self._registers.get(variable)
        if register is None:
            self.require([text])
            return
        self._flush_native_comment()
        self.program.check(operation, register, text, operand, number)

    def _flush_native_comment(self) -> None:
        if self._pending_comment is not None:
            self.program.lines.append("# " + self._pending_comment)
            self._pending_comment = None

    def check_type(self, variable: str, expected: type) -> None:
        """`type(variable) is expected`."""
        name = self.bind(expected, expected.__name__)
        self._condition(variable, f"type({variable}) is {name}", native_program.TYPE_IS,
                        expected)

    def check_type_id(self, variable: str, type_id: int, name: str) -> None:
        """`id(type(variable)) == type_id` (a class held weakly); `name` names the class in
        the listing."""
        register = self._registers.get(variable)
        if register is None:
            self.require([f"id(type({variable})) == {type_id}"])
            return
        self._flush_native_comment()
        self.program.check(native_program.TYPE_ID, register,
                           f"type({variable}) is <class {name}>", number=type_id)

    def check_partition(self, variables: list[str], labels: tuple, by_storage: bool,
                        text: str) -> None:
        """The values are one object (or share one tensor storage, `by_storage`) exactly where
        `labels` are equal; one native step when the program holds every variable."""
        registers = [self._registers.get(variable) for variable in variables]
        if self.program is not None and None not in registers:
            self._flush_native_comment()
            self.program.partition(registers, labels,
                                   native_program.BY_STORAGE if by_storage
                                   else native_program.BY_OBJECT, text)
            return
        from guards.kinds.aliasing import storage_labels, object_labels
        helper = self.bind(storage_labels if by_storage else object_labels,
                           "storage_labels" if by_storage else "object_labels")
        arguments = ", ".join(self.export(variable) for variable in variables)
        self.require([f"{helper}({arguments}) == {labels!r}"])

    def check_identity(self, variable: str, object_id: int) -> None:
        """`id(variable) == object_id`."""
        self._condition(variable, f"id({variable}) == {object_id}", native_program.IDENTITY,
                        number=object_id)

    def check_is(self, variable: str, expected: Any, text: str, negate: bool = False) -> None:
        """`variable is expected` (`is not` with `negate`); `text` names `expected`."""
        self._condition(variable, f"{variable} is {'not ' if negate else ''}{text}",
                        native_program.IS_NOT if negate else native_program.IS, expected)

    def check_same(self, variable: str, other: str) -> None:
        """`variable is other`, natively when the program holds both."""
        first, second = self._registers.get(variable), self._registers.get(other)
        if first is None or second is None:
            self.require([f"{self.export(variable)} is {self.export(other)}"])
            return
        self._flush_native_comment()
        self.program.same(first, second, f"{variable} is {other}")

    def check_length(self, variable: str, length: int) -> None:
        """`len(variable) == length`."""
        self._condition(variable, f"len({variable}) == {length}", native_program.LENGTH,
                        number=length)

    def check_falsy(self, variable: str) -> None:
        """`not variable`."""
        self._condition(variable, f"not {variable}", native_program.FALSY)

    def check_falsy_items(self, variable: str, keys: tuple) -> None:
        """`not variable[key]` for each of `keys`: natively one step, where each would be a read
        and a check (a module's four empty hook dicts: 8 of its ~10 snapshot steps)."""
        register = self._registers.get(variable)
        if register is None or len(keys) < 2:
            for key in keys:
                self.check_falsy(self.derive(variable, "item", key, f"{variable}_{key}"))
            return
        self._flush_native_comment()
        self.program.check(native_program.FALSY_ITEMS, register,
                           " and ".join(f"not {variable}[{key!r}]" for key in keys),
                           tuple(keys))

    def check_contains(self, variable: str, key: Any, present: bool) -> None:
        """`key in variable` (`not in` unless `present`): an instance dict has, or lacks, a
        name."""
        self._condition(variable, f"{key!r} {'in' if present else 'not in'} {variable}",
                        native_program.CONTAINS, key, int(bool(present)))

    def check_keys(self, variable: str, keys: tuple) -> None:
        """`tuple(variable) == keys`."""
        self._condition(variable, f"tuple({variable}) == {self.bind(keys, 'keys')}",
                        native_program.KEYS, keys)

    def check_constant(self, variable: str, expected: Any) -> bool:
        """Check natively that `variable` is the int, str, bytes or float `expected` (exact type;
        floats as `guards.kinds.constants` compares them); returns False, writing nothing,
        where the program cannot."""
        kind = type(expected)
        if not self.native(variable) or (kind not in native_program.EQUAL_TYPES and
                                         kind is not float):
            return False
        name = self.bind(kind, kind.__name__)
        self._condition(variable, f"type({variable}) is {name} and {variable} == {expected!r}",
                        native_program.FLOAT if kind is float else native_program.EQUAL,
                        expected)
        return True

    def check_tensors(self, variables: list[str], specs: list[tuple], text: str) -> bool:
        """Match every variable's tensor against its spec in one native step; returns False,
        writing nothing, unless every variable is native."""
        if not variables or not all(self.native(variable) for variable in variables):
            return False
        self.program.tensors([self._registers[variable] for variable in variables], specs, text)
        return True

    def check_sizes(self, variables: list[str], reads: tuple, relations: tuple,
                    text: str) -> bool:
        """Check natively that the sizes read off the variables' tensors satisfy `relations`
        (`guards.kinds.shapes`); returns False, writing nothing, unless every variable is
        native."""
        if not variables or not all(self.native(variable) for variable in variables):
            return False
        self._flush_native_comment()
        self.program.sizes([self._registers[variable] for variable in variables], reads,
                           relations, text)
        return True

    def check_state(self, spec: tuple, text: str) -> bool:
        """Check natively that torch's global state equals the snapshot `spec` (one step of the
        program, no Python-level getter calls); returns False, writing nothing, without a
        native program that has the step."""
        if self.program is None:
            return False
        pending = self._pending_comment
        self._flush_native_comment()
        if self.program.state(spec, text):
            return True
        if pending is not None:  # not taken: the comment goes with the Python conditions
            self.program.lines.pop()
            self._pending_comment = pending
        return False

    def assign(self, expression: str, hint: str) -> str:
        """Emit `name = expression` into a fresh local and return the name."""
        name = self.fresh(_identifier(hint, "value"))
        self._flush_comment()
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
        """A comment line in the generated code (what the next condition guards), placed with
        that condition: in the Python part or in the native program's listing."""
        self._flush_comment()
        self._pending_comment = text.replace("\n", " ")

    def _flush_comment(self) -> None:
        if self._pending_comment is not None:
            self.lines.append("# " + self._pending_comment)
            self._pending_comment = None

    def require(self, conditions: list[str]) -> None:
        """Emit a statement that returns False unless every condition holds."""
        if not conditions:
            return
        self._flush_comment()
        joined = " and ".join(conditions)
        if len(_INDENT) + len(joined) + 12 > _WRAP_COLUMN and len(conditions) > 1:
            separator = " and\n" + _INDENT + "        "
            joined = separator.join(conditions)
        self.lines.append(f"if not ({joined}):\n{_INDENT}    return False")

    def source_text(self) -> str:
        """The complete source of the check function."""
        self._flush_comment()
        lines = self._program_lines() + self.lines
        body = "\n".join(_INDENT + line for line in lines) or _INDENT + "pass"
        return ("def check(L, G):\n"
                "    try:\n"
                f"{body}\n"
                "    except Exception:\n"
                "        return False\n"
                "    return True\n")

    def _program_lines(self) -> list[str]:
        if self.program is None or not self.program.steps:
            return []
        names = {register: name for name, register in self._registers.items()}
        lines = [f"# native_program: {len(self.program.steps)} steps, in this order:"]
        lines += ["#   " + part for line in self.program.lines if line
                  for part in line.split("\n")]
        exported = [names[register] for register in self.program.exports]
        if not exported:
            return lines + [f"if native_program(L, G) is None:\n{_INDENT}    return False"]
        return lines + ["values = native_program(L, G)",
                        f"if values is None:\n{_INDENT}    return False",
                        f"{', '.join(exported)}, = values"]

    def build(self) -> tuple[Callable[[dict, dict], bool], str]:
        """Execute the source once; returns the check function and its source text."""
        text = self.source_text()
        filename = f"<framejit guards check {next(_counter)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        namespace = dict(self.namespace)
        if self.program is not None and self.program.steps:
            namespace["native_program"] = self.program.build()
        exec(compile(text, filename, "exec"), namespace)
        check = namespace["check"]
        weakref.finalize(check, linecache.cache.pop, filename, None)
        return check, text


def _literal_argument(value: Any) -> bool:
    return type(value) in (int, str, bool, type(None)) or \
        (type(value) is float and value == value and abs(value) != float("inf"))


def _native_steps(source: Source) -> list[tuple] | None:
    """(operation, operand) steps reading `source` from its base, or None for kinds the native
    program does not read (closure cells, global state...)."""
    kind = type(source)
    if kind is LocalSource:
        return [(native_program.LOCAL, source.local)]
    if kind in (GlobalSource, GlobalModuleSource):
        return [(native_program.GLOBAL, source.global_name)]
    if kind is AttrSource:
        return [(native_program.ATTRIBUTE, source.attribute)]
    if kind is ItemSource:
        return [(native_program.ITEM, source.index)]
    if kind is DictItemSource:
        return [(native_program.ITEM, source.key)]
    if kind is TypeSource:
        return [(native_program.TYPE_OF, None)]
    if kind is GlobalsSource:
        return [(native_program.GLOBALS, None)]
    if isinstance(source, ModuleMemberSource):
        return [(native_program.ATTRIBUTE, source.registry),
                (native_program.ITEM, source.member)]
    return None


def _reject(L: dict, G: dict) -> bool:
    return False


REJECT_CODE = _reject.__code__
"""Code object swapped into a check whose guard set died: it rejects every frame."""
