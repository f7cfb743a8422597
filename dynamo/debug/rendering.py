"""Debug dump, rendering: compiled-frame artefacts as text for people.

Input: code objects, FX graph modules and guard sets. Output: text — a dis listing, a
Python-like rendering of bytecode, an FX graph table, the guards as a tree by source.

The Python-like rendering is not a decompiler: it replays the stack of each instruction in
order (no control-flow recovery), printing assignments, calls, returns and stores as Python
statements, conditional and unconditional jumps as `if ...: goto L<offset>` / `goto
L<offset>` with `L<offset>:` labels at jump targets, and any other instruction (loops,
exception handling, `with`) as a `# OPNAME argument` comment, its stack effect kept with
`<?>` placeholders. Nested code objects are rendered after their parent.
"""
from __future__ import annotations

import dis
import io
import types

_NULL = "<NULL>"
_SELF = "<self>"
_SKIPPED = {"RESUME", "NOP", "CACHE", "PRECALL", "EXTENDED_ARG", "MAKE_CELL",
            "COPY_FREE_VARS"}
_LOADS = {"LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_NAME", "LOAD_FAST_CHECK",
          "LOAD_FAST_AND_CLEAR", "LOAD_GLOBAL", "LOAD_CLASSDEREF"}
_STORES = {"STORE_FAST", "STORE_DEREF", "STORE_GLOBAL", "STORE_NAME"}


def disassembly(code: types.CodeType) -> str:
    """`dis.dis` of `code` and the code objects it holds."""
    text = io.StringIO()
    dis.dis(code, file=text)
    return text.getvalue()


def python_like(code: types.CodeType) -> str:
    """The rendering the module docstring describes, for `code` and its nested code."""
    parts = []
    for each in _with_nested(code):
        lines = _Renderer(each).render()
        head = f"def {each.co_name}({', '.join(each.co_varnames[:_arity(each)])}):"
        parts.append("\n".join([f"# code object {each.co_qualname} "
                                f"({each.co_filename}:{each.co_firstlineno})", head] +
                               [f"    {line}" for line in lines]))
    return "\n\n".join(parts) + "\n"


def _arity(code: types.CodeType) -> int:
    flags = code.co_flags
    return code.co_argcount + code.co_kwonlyargcount + bool(flags & 0x04) + bool(flags & 0x08)


def _with_nested(code: types.CodeType) -> list:
    found = [code]
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            found += _with_nested(constant)
    return found


def _constant(value) -> str:
    if isinstance(value, types.CodeType):
        return f"<code {value.co_qualname}>"
    if callable(value):
        return f"<{getattr(value, '__qualname__', type(value).__name__)}>"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Renderer:
    """Replays one code object's stack instruction by instruction (see the module docstring)."""

    def __init__(self, code: types.CodeType):
        self.code = code
        self.stack: list = []
        self.lines: list = []
        self.keywords: tuple = ()
        self.unpacked = 0

    def render(self) -> list:
        for instruction in dis.get_instructions(self.code):
            if instruction.is_jump_target:
                self.lines.append(f"L{instruction.offset}:")
            if instruction.opname in _SKIPPED:
                continue
            try:
                handled = self.step(instruction)
            except IndexError:  # the stack of another path: keep going from here
                handled = False
            if not handled:
                self.unknown(instruction)
        return self.lines

    def pop(self) -> str:
        return self.stack.pop()

    def popn(self, count: int) -> list:
        if count == 0:
            return []
        values = self.stack[-count:]
        if len(values) < count:
            raise IndexError("stack underflow")
        del self.stack[-count:]
        return values

    def unknown(self, instruction) -> None:
        argument = f" {instruction.argrepr}" if instruction.argrepr else ""
        self.lines.append(f"# {instruction.opname}{argument}")
        try:
            effect = dis.stack_effect(instruction.opcode, instruction.arg, jump=False)
        except ValueError:
            effect = 0
        if effect < 0:
            del self.stack[max(0, len(self.stack) + effect):]
        self.stack += ["<?>"] * max(effect, 0)

    def step(self, instruction) -> bool:
        name, value = instruction.opname, instruction.argval
        if name in _LOADS:
            if name == "LOAD_GLOBAL" and instruction.arg & 1:
                self.stack.append(_NULL)
            self.stack.append(str(value))
        elif name == "LOAD_CONST":
            self.stack.append(_constant(value))
        elif name == "RETURN_CONST":
            self.lines.append(f"return {_constant(value)}")
        elif name == "PUSH_NULL":
            self.stack.append(_NULL)
        elif name in ("LOAD_ATTR", "LOAD_METHOD"):
            self.load_attribute(instruction)
        elif name == "KW_NAMES":
            self.keywords = tuple(self.code.co_consts[instruction.arg])
        elif name == "CALL":
            self.call(instruction.arg)
        elif name in _STORES:
            self.lines.append(f"{value} = {self.pop()}")
        elif name in ("DELETE_FAST", "DELETE_DEREF", "DELETE_GLOBAL"):
            self.lines.append(f"del {value}")
        else:
            return self.operation(instruction)
        return True

    def load_attribute(self, instruction) -> None:
        owner = self.pop()
        method = instruction.opname == "LOAD_METHOD" or (
            instruction.opname == "LOAD_ATTR" and instruction.arg & 1 and
            "NULL|self" in instruction.argrepr)
        self.stack.append(f"{owner}.{instruction.argval}")
        if method:
            self.stack.append(_SELF)

    def call(self, count: int) -> None:
        arguments = self.popn(count)
        second, first = self.pop(), self.pop()
        if first == _NULL:
            function = second
        elif second == _SELF:
            function = first
        else:
            function, arguments = first, [second] + arguments
        keywords, self.keywords = self.keywords, ()
        positional = arguments[:len(arguments) - len(keywords)]
        named = [f"{key}={argument}" for key, argument in
                 zip(keywords, arguments[len(positional):])]
        self.stack.append(f"{function}({', '.join(positional + named)})")

    def operation(self, instruction) -> bool:
        name, text = instruction.opname, instruction.argrepr
        if name in ("BINARY_OP", "COMPARE_OP", "IS_OP", "CONTAINS_OP"):
            right, left = self.pop(), self.pop()
            symbol = {"IS_OP": ("is", "is not"), "CONTAINS_OP": ("in", "not in")}.get(name)
            symbol = symbol[instruction.arg] if symbol else text
            self.stack.append(f"({left} {symbol} {right})")
        elif name == "BINARY_SUBSCR":
            key, container = self.pop(), self.pop()
            self.stack.append(f"{container}[{key}]")
        elif name == "STORE_SUBSCR":
            key, container, value = self.pop(), self.pop(), self.pop()
            self.lines.append(f"{container}[{key}] = {value}")
        elif name == "STORE_ATTR":
            owner, value = self.pop(), self.pop()
            self.lines.append(f"{owner}.{instruction.argval} = {value}")
        elif name in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET"):
            items = self.popn(instruction.arg)
            opening, closing = {"BUILD_TUPLE": "()", "BUILD_LIST": "[]",
                                "BUILD_SET": "{}"}[name]
            comma = "," if name == "BUILD_TUPLE" and len(items) == 1 else ""
            self.stack.append(f"{opening}{', '.join(items)}{comma}{closing}")
        elif name == "UNPACK_SEQUENCE":
            temporary = f"_unpacked{self.unpacked}"
            self.unpacked += 1
            self.lines.append(f"{temporary} = {self.pop()}")
            self.stack += [f"{temporary}[{index}]" for index in reversed(range(instruction.arg))]
        else:
            return self.stack_or_flow(instruction)
        return True

    def stack_or_flow(self, instruction) -> bool:
        name = instruction.opname
        if name == "POP_TOP":
            value = self.pop()
            if "(" in value:
                self.lines.append(value)
        elif name == "COPY":
            value = self.stack[-instruction.arg]
            if "(" in value:  # a call computed once, read twice: name it
                temporary = f"_value{self.unpacked}"
                self.unpacked += 1
                self.lines.append(f"{temporary} = {value}")
                self.stack[-instruction.arg] = value = temporary
            self.stack.append(value)
        elif name == "SWAP":
            self.stack[-1], self.stack[-instruction.arg] = \
                self.stack[-instruction.arg], self.stack[-1]
        elif name == "RETURN_VALUE":
            self.lines.append(f"return {self.pop()}")
        elif name in ("UNARY_NOT", "UNARY_NEGATIVE", "UNARY_INVERT"):
            symbol = {"UNARY_NOT": "not ", "UNARY_NEGATIVE": "-", "UNARY_INVERT": "~"}[name]
            self.stack.append(f"({symbol}{self.pop()})")
        elif "JUMP" in name and "IF" in name:
            condition = self.pop()
            test = name.rpartition("IF_")[2].lower().replace("_", " ")
            self.lines.append(f"if {condition} is {test}: goto L{instruction.argval}")
        elif name in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_ABSOLUTE", "JUMP",
                      "JUMP_BACKWARD_NO_INTERRUPT"):
            self.lines.append(f"goto L{instruction.argval}")
        else:
            return False
        return True


def graph_table(graph_module) -> str:
    """The FX graph as a table: opcode, name, target, args, kwargs (print_tabular's columns,
    without its `tabulate` dependency)."""
    rows = [("opcode", "name", "target", "args", "kwargs")]
    for node in graph_module.graph.nodes:
        target = getattr(node.target, "__name__", None) if callable(node.target) else None
        rows.append((node.op, node.name, str(target or node.target), str(node.args),
                     str(node.kwargs)))
    widths = [min(60, max(len(row[column]) for row in rows)) for column in range(5)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines) + "\n"


def guard_tree(check, described: list) -> str:
    """The guards of a compiled entry grouped by source, a source under the one it is read
    from (`L['self']` above `L['self'].lin.weight`); `described` (one line per guard) where
    the check carries no guard set."""
    guard_set = getattr(check, "guard_set", None)
    if guard_set is None:
        return "\n".join(described) + "\n"
    groups: dict = {}  # the chain of source names -> the guards on that source, in order
    for guard in guard_set.ordered():
        chain = tuple(str(step) for step in _chain(getattr(guard, "source", None)))
        groups.setdefault(chain, []).append(guard.describe())
    lines, shown = [], set()
    for chain in sorted(groups, key=lambda chain: [list(groups).index(key) for key in groups
                                                   if key[:1] == chain[:1]][0]):
        for depth in range(len(chain)):
            if chain[:depth + 1] not in shown:
                shown.add(chain[:depth + 1])
                lines.append(f"{'  ' * depth}{chain[depth]}")
        lines += [f"{'  ' * len(chain)}- {described}" for described in groups[chain]]
    text = "\n".join(lines)
    source_text = getattr(check, "source_text", "")
    if source_text:
        text += "\n\n# the compiled check\n" + source_text
    return text + "\n"


def _chain(source) -> list:
    if source is None:
        return []
    try:
        return list(source.chain())
    except Exception:  # noqa: BLE001  (a source without a chain: itself)
        return [source]
