"""Methods of lists, dicts, sets and tuples, applied to their boxes at trace time.

Reads answer with variables; writes change the box (and mark pre-existing boxes for replay).
"""
from __future__ import annotations

from dynamo.breaks import UNSUPPORTED_CALL, Unsupported
from dynamo.variables.base import NotConstant, Variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.exceptions import ExceptionVariable, RaisedInTrace, python_error
from dynamo.variables.containers import (DictVariable, ListVariable, SetVariable, TupleVariable,
                                         constant_key, key_variable)
from dynamo.variables import operators
from dynamo.variables.builder import new_dict_from
from dynamo.variables.builtins import length
from dynamo.variables.containers import DictViewVariable
from dynamo.variables.iterators import SequenceIterator
from dynamo.variables.operators import compare

NONE = ConstantVariable(None)


def _key_error(key):
    return RaisedInTrace(ExceptionVariable.new(KeyError, (key_variable(key),)))


def call_container_method(tx, owner: Variable, name: str, args: list, kwargs: dict) -> Variable:
    """The builtin behaviour of `owner.name(*args, **kwargs)` (overrides of subclasses are not
    consulted: callers inline those first)."""
    if kwargs and name not in ("sort", "pop", "update", "get", "setdefault", "__init__"):
        raise Unsupported(UNSUPPORTED_CALL, f"{name}() with keyword arguments")
    shared = _protocol_method(tx, owner, name, args, kwargs)
    if shared is not None:
        return shared
    try:
        if isinstance(owner, ListVariable):
            return _list_method(tx, owner, name, args, kwargs)
        if isinstance(owner, DictVariable):
            return _dict_method(tx, owner, name, args, kwargs)
        if isinstance(owner, SetVariable):
            return _set_method(tx, owner, name, args)
        if isinstance(owner, TupleVariable):
            return _sequence_query(tx, owner.items, name, args)
    except (IndexError, KeyError) as error:
        # the operation on the box raised what the real one raises (`[].pop()`): raised in
        # the traced code, where a `try` may catch it and an uncaught one makes the frame
        # run eagerly (it escaped the tracer as an internal error, and the mutations before
        # it were lost)
        raise python_error(type(error), *map(str, error.args[:1])) from None
    raise Unsupported(UNSUPPORTED_CALL, f"{owner.describe()}.{name}")


def _index_of(tx, items, value: Variable) -> int:
    for index, item in enumerate(items):
        if compare(tx, "==", item, value).truth(tx):
            return index
    raise python_error(ValueError, "list.index(x): x not in list")


def _sequence_query(tx, items, name: str, args: list) -> Variable:
    if name == "index":
        return ConstantVariable(_index_of(tx, items, args[0]))
    if name == "count":
        return ConstantVariable(sum(compare(tx, "==", item, args[0]).truth(tx) for item in items))
    raise Unsupported(UNSUPPORTED_CALL, f"tuple.{name}")


def _list_method(tx, owner: ListVariable, name: str, args: list, kwargs: dict) -> Variable:
    items, box = owner.items, owner.box
    if name in ("index", "count"):
        return _sequence_query(tx, items, name, args)
    if name == "copy":
        return ListVariable.new(items)
    box.touch()
    if name == "append":
        items.append(args[0])
    elif name == "extend":
        items.extend(tx.iterate(args[0]))
    elif name == "insert":
        items.insert(args[0].as_constant(), args[1])
    elif name == "pop":
        return items.pop(args[0].as_constant() if args else -1)
    elif name == "remove":
        del items[_index_of(tx, items, args[0])]
    elif name == "clear":
        items.clear()
    elif name == "reverse":
        items.reverse()
    elif name == "sort":
        _sort(items, kwargs)
    else:
        raise Unsupported(UNSUPPORTED_CALL, f"list.{name}")
    return NONE


def _sort(items: list, kwargs: dict) -> None:
    try:
        reverse = kwargs.pop("reverse", ConstantVariable(False)).as_constant()
        if kwargs:
            raise NotConstant("key=")
        values = [item.as_constant() for item in items]
    except NotConstant:
        raise Unsupported(UNSUPPORTED_CALL, "list.sort of non-constant items or with key=") \
            from None
    order = sorted(range(len(values)), key=values.__getitem__, reverse=reverse)
    items[:] = [items[index] for index in order]


def _dict_method(tx, owner: DictVariable, name: str, args: list, kwargs: dict) -> Variable:
    items, box = owner.items, owner.box
    if name in ("get", "__getitem__"):
        key = constant_key(args[0])
        if key in items:
            return items[key]
        if name == "__getitem__":
            return _missing(tx, owner, key)
        return args[1] if len(args) > 1 else kwargs.get("default", NONE)
    if name == "__contains__":
        return ConstantVariable(constant_key(args[0]) in items)
    if name in ("keys", "values", "items") and not args and not kwargs:
        return DictViewVariable(owner, name)
    if name == "copy":
        return DictVariable.new(items, python_class=owner.python_class,
                                default_factory=owner.default_factory)
    box.touch()
    if name == "update":
        other = new_dict_from(tx, args[0]).items if args else {}
        items.update(other)
        items.update({key: value for key, value in kwargs.items()})
    elif name == "pop":
        key = constant_key(args[0])
        if key in items:
            return items.pop(key)
        if len(args) > 1:
            return args[1]
        raise _key_error(key)
    elif name == "setdefault":
        key = constant_key(args[0])
        return items.setdefault(key, args[1] if len(args) > 1 else NONE)
    elif name == "clear":
        items.clear()
    elif name == "popitem":
        key, value = items.popitem()
        return TupleVariable((key_variable(key), value))
    elif name == "move_to_end":
        key = constant_key(args[0])
        items[key] = items.pop(key)
    else:
        raise Unsupported(UNSUPPORTED_CALL, f"dict.{name}")
    return NONE


def _missing(tx, owner: DictVariable, key) -> Variable:
    if owner.default_factory is None:
        raise _key_error(key)
    value = owner.default_factory.call(tx, [], {})
    owner.box.touch()
    owner.items[key] = value
    return value


def _set_method(tx, owner: SetVariable, name: str, args: list) -> Variable:
    items, box = owner.items, owner.box
    if name in ("union", "intersection", "difference", "issubset", "issuperset", "copy"):
        others = [{constant_key(item): item for item in tx.iterate(arg)} for arg in args]
        if name == "copy":
            return SetVariable.new(items.values())
        if name in ("issubset", "issuperset"):
            return ConstantVariable(getattr(set(items), name)(set(others[0])))
        result = dict(items)
        for other in others:
            keys = getattr(set(result), name)(set(other))
            merged = {**other, **result}
            result = {key: merged[key] for key in keys}
        return SetVariable.new(result.values())
    box.touch()
    if name in ("add", "discard", "remove"):
        key = constant_key(args[0])
        if name == "add":
            items.setdefault(key, args[0])
        elif key in items:
            del items[key]
        elif name == "remove":
            raise _key_error(key)
    elif name == "update":
        for arg in args:
            for item in tx.iterate(arg):
                items.setdefault(constant_key(item), item)
    elif name == "clear":
        items.clear()
    else:
        raise Unsupported(UNSUPPORTED_CALL, f"set.{name}")
    return NONE


def _protocol_method(tx, owner: Variable, name: str, args: list, kwargs: dict):
    """Dunder methods of the builtin containers, as `super().__setitem__(...)` or
    `dict.__init__(self, ...)` call them."""
    if not isinstance(owner, (ListVariable, DictVariable, SetVariable, TupleVariable)):
        return None
    if name == "__len__":
        return ConstantVariable(length(tx, owner, builtin=True))
    if name == "__iter__":
        return SequenceIterator.over(owner.iterate(tx) if not isinstance(owner, DictVariable)
                                     else [key_variable(key) for key in owner.items])
    if name == "__contains__" and not isinstance(owner, DictVariable):
        return ConstantVariable(operators.contains(tx, owner, args[0], builtin=True))
    if name == "__getitem__" and not isinstance(owner, DictVariable):
        return operators.subscript(tx, owner, args[0], builtin=True)
    if name == "__setitem__":
        operators.store_subscript(tx, owner, args[0], args[1], builtin=True)
        return NONE
    if name == "__delitem__":
        operators.delete_subscript(tx, owner, args[0], builtin=True)
        return NONE
    if name == "__init__":
        return _initialise(tx, owner, args, kwargs)
    return None


def _initialise(tx, owner: Variable, args: list, kwargs: dict) -> Variable:
    """`dict.__init__(self, ...)`, `list.__init__(self, iterable)`: fills the new box."""
    owner.box.touch()
    if isinstance(owner, DictVariable):
        if args:
            owner.items.update(new_dict_from(tx, args[0]).items)
        owner.items.update(kwargs)
    elif isinstance(owner, ListVariable):
        owner.items[:] = tx.iterate(args[0]) if args else []
    elif isinstance(owner, SetVariable):
        owner.items.clear()
        for item in (tx.iterate(args[0]) if args else []):
            owner.items.setdefault(constant_key(item), item)
    return NONE
