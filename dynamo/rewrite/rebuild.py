"""Rebuilding traced values after the graph has run, and replaying side effects.

Input: variables (the returned value, the new contents of mutated pre-existing objects).
Output: Python expressions and statements in a `GluePlan`. Values that existed before the frame
ran are fetched through their source, so identity is preserved (`return x` returns the caller's
object); new containers and objects are built afresh, once each.
"""
from __future__ import annotations

from collections import OrderedDict, defaultdict
from typing import Optional

import torch

from dynamo.breaks import UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.side_effects import Box
from dynamo.variables.base import NotConstant
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import (DictVariable, ListVariable, SetVariable, SliceVariable,
                                         TupleVariable, is_subclass_instance)
from dynamo.variables.tensor import TensorVariable
from guards.sources import LocalSource


def rebuild(plan, value) -> str:
    from dynamo.variables.objects import NewObjectVariable
    if isinstance(value, TensorVariable):
        if value.node.op == "placeholder":
            return plan.source(value.node.meta["source"])
        return plan.output(value)
    if isinstance(value, ConstantVariable):
        return plan.constant(value.value)
    if isinstance(value, TupleVariable):
        return _tuple(plan, value)
    if isinstance(value, (ListVariable, DictVariable, SetVariable)):
        return _container(plan, value)
    if isinstance(value, SliceVariable):
        return f"slice({', '.join(rebuild(plan, part) for part in value.parts)})"
    if isinstance(value, NewObjectVariable):
        return _new_object(plan, value)
    custom = getattr(value, "rebuild", None)  # variables that know how to rebuild themselves
    if custom is not None:
        return custom(plan)
    if getattr(value, "is_real", False):
        if value.source is not None:
            return plan.source(value.source)
        return plan.bind(value.value, type(value.value).__name__)
    try:
        return plan.constant(value.as_constant())
    except NotConstant:
        raise Unsupported(UNSUPPORTED_OBJECT, f"returning or storing {value.describe()} "
                          "(it cannot be rebuilt outside the graph)") from None


def _tuple(plan, value: TupleVariable) -> str:
    items = [rebuild(plan, item) for item in value.items]
    if value.python_class is tuple:
        return "(" + "".join(item + ", " for item in items) + ")"
    kind = plan.bind(value.python_class, value.python_class.__name__)
    if hasattr(value.python_class, "_fields"):
        return f"{kind}({', '.join(items)})"
    return f"{kind}(({''.join(item + ', ' for item in items)}))"


def _container(plan, value) -> str:
    box: Box = value.box
    if box.preexisting:
        return plan.source(box.source)
    existing = plan.rebuilt(id(box))
    if existing is not None:
        return existing
    if is_subclass_instance(value):
        return _subclass_instance(plan, value)
    if isinstance(value, ListVariable):
        expression = "[" + ", ".join(rebuild(plan, item) for item in value.items) + "]"
    elif isinstance(value, SetVariable):
        items = ", ".join(rebuild(plan, item) for item in value.items.values())
        expression = "{" + items + "}" if items else "set()"
        if value.python_class is frozenset:
            expression = f"frozenset({expression})"
    else:
        expression = _dict(plan, value)
    return plan.remember(id(box), expression)


def _dict(plan, value: DictVariable) -> str:
    pairs = ", ".join(f"{_key(plan, key)}: {rebuild(plan, item)}"
                      for key, item in value.items.items())
    literal = "{" + pairs + "}"
    if value.python_class is dict:
        return literal
    kind = plan.bind(value.python_class, value.python_class.__name__)
    if value.default_factory is not None:
        return f"{kind}({rebuild(plan, value.default_factory)}, {literal})"
    return f"{kind}({literal})"


def _subclass_instance(plan, value) -> str:
    """A new instance of a dict or list subclass (a `ModelOutput`...): allocated without
    running `__init__`, then filled through the builtin base class and `object.__setattr__`,
    so that Python overrides of the class do not run twice."""
    from dynamo.variables.construct import _builtin_base
    cls = value.python_class
    kind = plan.bind(cls, cls.__name__)
    base = plan.bind(_builtin_base(cls), _builtin_base(cls).__name__)
    name = plan.remember(id(value.box), f"{kind}.__new__({kind})")
    if isinstance(value, DictVariable):
        for key, item in value.items.items():
            plan.statements.append(f"{base}.__setitem__({name}, {_key(plan, key)}, "
                                   f"{rebuild(plan, item)})")
    else:
        items = ", ".join(rebuild(plan, item) for item in value.items)
        plan.statements.append(f"{base}.extend({name}, [{items}])")
    attributes = value.attributes.contents if value.attributes is not None else {}
    for attribute, item in attributes.items():
        plan.statements.append(f"object.__setattr__({name}, {attribute!r}, "
                               f"{rebuild(plan, item)})")
    return name


def _new_object(plan, value) -> str:
    existing = plan.rebuilt(id(value.box))
    if existing is not None:
        return existing
    kind = plan.bind(value.cls, value.cls.__name__)
    name = plan.remember(id(value.box), f"{kind}.__new__({kind})")
    for attribute, item in value.box.contents.items():
        plan.statements.append(f"object.__setattr__({name}, {attribute!r}, "
                               f"{rebuild(plan, item)})")
    return name


def replay_calls(plan, calls: list, into: Optional[list] = None) -> None:
    """Statements making the deferred calls, in program order, into `into` (by default the
    glue's statements after the mutations' replay; `plan.early` for the calls made before
    the graph). They run with no frame capture inside (as under `dynamo.disable`): they
    were traced already, and capturing their frames again would only find the reason they
    were deferred."""
    from dynamo import _C
    statements = plan.statements if into is None else into
    for function, arguments in calls:
        name = plan.bind(_C.ScopedCall(function, None), getattr(function, "__name__", "call"))
        before = len(plan.statements)
        text = ", ".join(rebuild(plan, value) for value in arguments)
        if into is not None and len(plan.statements) != before:  # built after the graph
            raise AssertionError(f"an early call's arguments ({text}) need the graph's results")
        statements.append(f"{name}({text})")


def write_frame_cells(plan, cells: dict, every: bool) -> None:
    """The compiled frame's own cells (its cell variables) get their traced contents: at a
    graph break every one the trace stored to (the regions after it read the real cells),
    else those a rebuilt closure refers to (a returned lambda reads them later)."""
    written: set = set()
    while True:
        names = [name for name, cell in cells.items()
                 if name not in written and cell.box.mutated and cell.box.contents is not None
                 and (every or name in plan.cell_parameters)]
        if not names:
            return
        for name in names:  # rebuilding a value may refer to more cells: go round again
            written.add(name)
            value = rebuild(plan, cells[name].box.contents)
            plan.statements.append(f"{plan.cell(name)}.cell_contents = {value}")


def replay(plan, boxes: list[Box]) -> None:
    """Statements applying the final contents of mutated pre-existing values."""
    for box in boxes:
        if box.kind == "list":
            _replay_list(plan, box)
        elif box.kind == "dict":
            _replay_dict(plan, box)
        elif box.kind == "object":
            _replay_object(plan, box)
        elif box.kind == "set":
            target = plan.remember(id(box) ^ 1, plan.source(box.source))
            items = ", ".join(rebuild(plan, item) for item in box.contents.values())
            contents = plan.temporary()
            plan.statements += [f"{contents} = [{items}]", f"{target}.clear()",
                                f"{target}.update({contents})"]
        elif box.kind == "globals":
            target = plan.remember(id(box) ^ 1, plan.source(box.source)) \
                if box.real is not plan.frame_globals else "G"
            for name, item in box.contents.items():
                plan.statements.append(f"{target}[{name!r}] = {rebuild(plan, item)}")
        elif box.kind == "cell":
            plan.statements.append(f"{_cell(plan, box)}.cell_contents = "
                                   f"{rebuild(plan, box.contents)}")
        else:
            raise Unsupported(UNSUPPORTED_OBJECT, f"replaying a change to a {box.kind}")


def _cell(plan, box: Box) -> str:
    if isinstance(box.source, LocalSource):  # a free variable of the compiled frame
        return plan.cell(box.source.local)
    from guards.sources import ClosureCellSource
    if isinstance(box.source, ClosureCellSource):
        return f"{plan.source(box.source.base)}.__closure__[{box.source.index}]"
    raise Unsupported(UNSUPPORTED_OBJECT, "changing a closure variable with no known cell")


def _replay_list(plan, box: Box) -> None:
    items = ", ".join(rebuild(plan, item) for item in box.contents)
    target = plan.source(box.source)
    if type(box.real) is list:
        plan.statements.append(f"{target}[:] = [{items}]")
    else:  # a subclass: its own __setitem__ must not run
        plan.statements.append(f"list.__setitem__({target}, slice(None), [{items}])")


def _replay_dict(plan, box: Box) -> None:
    target = plan.remember(id(box) ^ 1, plan.source(box.source))
    pairs = [(_key(plan, key), rebuild(plan, item)) for key, item in box.contents.items()]
    kind = type(box.real)
    literal = "{" + ", ".join(f"{key}: {item}" for key, item in pairs) + "}"
    contents = plan.temporary()  # read every item before the dict is cleared
    plan.statements.append(f"{contents} = {literal}")
    if kind in (dict, OrderedDict, defaultdict):
        plan.statements += [f"{target}.clear()", f"{target}.update({contents})"]
        return
    from dynamo.variables.construct import _builtin_base
    base = plan.bind(_builtin_base(kind), _builtin_base(kind).__name__)
    plan.statements += [f"{base}.clear({target})", f"for key, value in {contents}.items():",
                        f"    {base}.__setitem__({target}, key, value)"]


def _replay_object(plan, box: Box) -> None:
    from dynamo.variables.attributes import python_override
    target = plan.remember(id(box) ^ 1, plan.source(box.source))
    kind = type(box.real)
    raw_set = python_override(kind, "__setattr__") is not None and \
        not isinstance(box.real, torch.nn.Module)
    raw_delete = python_override(kind, "__delattr__") is not None
    for attribute, item in box.contents.items():
        value = rebuild(plan, item)
        if raw_set or not attribute.isidentifier():
            plan.statements.append(f"object.__setattr__({target}, {attribute!r}, {value})")
        else:
            plan.statements.append(f"{target}.{attribute} = {value}")
    for attribute in sorted(box.deleted):
        if raw_delete or not attribute.isidentifier():
            plan.statements.append(f"object.__delattr__({target}, {attribute!r})")
        else:
            plan.statements.append(f"del {target}.{attribute}")


def _key(plan, key) -> str:
    """A dict key's expression: a literal, a bound constant, or an identity-hashed object."""
    from dynamo.variables.containers import ObjectKey
    if isinstance(key, ObjectKey):
        return rebuild(plan, key.variable)
    return plan.constant(key)
