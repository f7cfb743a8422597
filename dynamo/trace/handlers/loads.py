"""Handlers that load and store names, attributes and constants."""
from __future__ import annotations

import builtins

from dynamo.breaks import UNSUPPORTED_BYTECODE, UNSUPPORTED_OBJECT
from dynamo.trace.handlers.registry import handler
from dynamo.variables.base import NULL
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.lazy import check_bound, is_unbound
from dynamo.variables.objects import tx_getattr
from dynamo.variables.attributes import delete_attribute, store_attribute
from dynamo.variables.guarding import guard_builtin_lookup
from dynamo.variables.objects import SuperVariable, globals_box, load_method


def _name(arg) -> str:
    return getattr(arg, "name", arg)


@handler()
def LOAD_CONST(tx, instruction):
    tx.push(tx.wrap_result(instruction.arg))


@handler()
def LOAD_FAST(tx, instruction):
    name = instruction.arg
    value = tx.read_local(name)
    if value is None:
        raise tx.unsupported(UNSUPPORTED_OBJECT, f"local {name!r} read before assignment "
                             "(UnboundLocalError)")
    if tx.unbound_marker is not None:  # a resumed region: its locals may be unbound
        check_bound(tx, value, tx.unbound_marker, name)
    tx.push(value)  # lazy values stay lazy until an operation uses them


@handler(since=(3, 12))
def LOAD_FAST_AND_CLEAR(tx, instruction):
    value = tx.take_local(instruction.arg)
    if value is not None and tx.unbound_marker is not None and \
            is_unbound(tx, value, tx.unbound_marker):  # a region's unbound local: NULL
        value = None
    tx.push(NULL if value is None else value)


@handler()
def STORE_FAST(tx, instruction):
    value = tx.pop_raw()
    if value is NULL:  # 3.12 inlined comprehensions restore an unset local
        tx.delete_local(instruction.arg)
    else:
        tx.set_local(instruction.arg, value)


@handler()
def DELETE_FAST(tx, instruction):
    tx.delete_local(instruction.arg)


@handler()
def LOAD_GLOBAL(tx, instruction):
    name = instruction.arg
    if instruction.push_null:
        tx.push(NULL)
    tx.push(load_global(tx, name))


def load_global(tx, name: str):
    box = tx.side_effects.box_for(tx.f_globals)
    if box is not None and name in box.contents:
        return box.contents[name]
    if name in tx.f_globals:
        return tx.wrap(tx.f_globals[name], tx.globals_entry_source(name))
    builtins_dict = tx.f_globals.get("__builtins__", builtins)
    builtins_dict = getattr(builtins_dict, "__dict__", builtins_dict)
    if name in builtins_dict:
        guard_builtin_lookup(tx, name)  # no global of that name may appear later
        return tx.wrap(builtins_dict[name], None)
    raise tx.unsupported(UNSUPPORTED_OBJECT, f"name {name!r} is not defined (NameError)")


@handler()
def STORE_GLOBAL(tx, instruction):
    box = globals_box(tx, tx.f_globals, tx.globals_source)
    box.touch()
    box.contents[instruction.arg] = tx.pop()


@handler()
def DELETE_GLOBAL(tx, instruction):
    raise tx.unsupported(UNSUPPORTED_BYTECODE, "`del` of a global")


@handler()
def LOAD_DEREF(tx, instruction):
    name = _name(instruction.arg)
    cell = tx.cells.get(name)
    value = None if cell is None else cell.contents(tx)
    if value is None:
        raise tx.unsupported(UNSUPPORTED_OBJECT, f"free variable {name!r} read before "
                             "assignment (NameError)")
    tx.push(value)


@handler()
def STORE_DEREF(tx, instruction):
    tx.cells[_name(instruction.arg)].store(tx.pop())


@handler()
def LOAD_CLOSURE(tx, instruction):
    tx.push(tx.cells[_name(instruction.arg)])


@handler()
def DELETE_DEREF(tx, instruction):
    raise tx.unsupported(UNSUPPORTED_BYTECODE, "`del` of a closure variable")


@handler()
def LOAD_ATTR(tx, instruction):
    owner = tx.pop()
    name = instruction.arg
    if instruction.method:
        method, self_value = load_method(tx, owner, name)
        tx.push(method)
        tx.push(self_value)
    else:
        tx.push(tx_getattr(tx, owner, name))


@handler(since=(3, 12))
def LOAD_SUPER_ATTR(tx, instruction):
    self_value = tx.pop()
    class_value = tx.pop()
    super_function = tx.pop()
    bound = SuperVariable(class_value, self_value)
    if instruction.method:
        tx.push(bound.getattr(tx, instruction.arg))
        tx.push(NULL)
        tx.stack[-1], tx.stack[-2] = tx.stack[-2], tx.stack[-1]
    else:
        tx.push(bound.getattr(tx, instruction.arg))
    del super_function


@handler()
def STORE_ATTR(tx, instruction):
    owner = tx.pop()
    value = tx.pop()
    store_attribute(tx, owner, instruction.arg, value)


@handler()
def DELETE_ATTR(tx, instruction):
    delete_attribute(tx, tx.pop(), instruction.arg)


@handler()
def IMPORT_NAME(tx, instruction):
    fromlist = tx.pop()
    level = tx.pop()
    import importlib
    level_value = tx.constant(level, "import level")
    if level_value != 0:
        raise tx.unsupported(UNSUPPORTED_BYTECODE, "relative import inside a compiled function")
    module = importlib.import_module(instruction.arg)
    top = module if tx.constant(fromlist, "import list") else \
        importlib.import_module(instruction.arg.split(".")[0])
    tx.push(tx.wrap(top, None))


@handler()
def IMPORT_FROM(tx, instruction):
    module = tx.peek()
    tx.push(module.getattr(tx, instruction.arg))


@handler()
def LOAD_ASSERTION_ERROR(tx, instruction):
    tx.push(tx.wrap(AssertionError, None))


@handler(until=(3, 12))
def LOAD_CLASSDEREF(tx, instruction):
    raise tx.unsupported(UNSUPPORTED_BYTECODE, "class-body closure lookup")


def _none():
    return ConstantVariable(None)
