"""Python's builtins on variables: `len`, `isinstance`, `getattr`, `min`, `range`, `zip`...

Pure builtins on constant arguments fold at trace time. The rest have a rule each in
`BUILTIN_RULES`; a builtin without a rule breaks the graph (`print` has its own break kind).
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import torch

from dynamo.breaks import PRINT, UNSUPPORTED_CALL, UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.base import NotConstant, Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import (DictVariable, ListVariable, SetVariable, TupleVariable,
                                         constant_copy, is_subclass_instance, new_container)
from dynamo.variables.symbolic import is_symbolic
from dynamo.variables.tensor import TensorVariable
from dynamo.breaks import SCALAR_OUT
from dynamo.variables import operators
from dynamo.variables.attributes import delete_attribute, store_attribute
from dynamo.variables.builtin_methods import NEW_FUNCTIONS, getter_rule, object_new, tuple_new
from dynamo.variables.construct import construct
from dynamo.variables.containers import DictViewVariable
from dynamo.variables.exceptions import ExceptionVariable, python_error
from dynamo.variables.functions import PartialVariable
from dynamo.variables.guarding import guard_identity, identity_used
from dynamo.variables.iterator_tools import HANDLED, itertools_iterator
from dynamo.variables.iterators import get_iterator, iterate_lazily, make_builtin_iterator
from dynamo.variables.modules import ModuleSliceVariable, ModuleVariable
from dynamo.variables.objects import ClassVariable, SuperVariable, tx_getattr, zero_argument_super
from dynamo.variables.operators import _UNKNOWN, binary, compare

# Builtins with no effects: folded when every argument is a constant.
PURE = {abs, all, any, ascii, bin, bool, callable, chr, complex, divmod, float, format, hash,
        hex, int, isinstance, issubclass, len, max, min, oct, ord, pow, repr, round, sorted, str,
        sum, tuple, type, zip, range, enumerate, reversed, frozenset, slice, getattr, hasattr,
        list, dict, set, iter, map, filter}
PURE |= {getattr(math, name) for name in dir(math) if callable(getattr(math, name))}
PURE |= {getattr(operator, name) for name in dir(operator) if not name.startswith("_")}

BUILTIN_RULES: dict[Callable, Callable] = {}


def rule(*functions):
    def register(implementation):
        for function in functions:
            BUILTIN_RULES[function] = implementation
        return implementation
    return register


@variable
class BuiltinVariable(Variable):
    """A builtin function or type (`len`, `int`), a `math` or `operator` function."""

    value: Any
    is_real: bool = True

    def python_type(self) -> type:
        return type(self.value)

    def as_constant(self) -> Any:
        return self.value

    def describe(self) -> str:
        return getattr(self.value, "__name__", repr(self.value))

    def call(self, tx, args, kwargs) -> Variable:
        implementation = BUILTIN_RULES.get(self.value)
        if implementation is not None:
            result = implementation(tx, *args, **kwargs)
            if result is not NotImplemented:
                return result
        if self.value in PURE:
            folded = _fold(tx, self.value, args, kwargs)
            if folded is not None:
                return folded
        if self.value is print:
            raise Unsupported(PRINT, "print()")
        if isinstance(self.value, type) and issubclass(self.value, BaseException):
            return construct(tx, self.value, list(args), dict(kwargs))
        raise Unsupported(UNSUPPORTED_CALL, f"{self.describe()}() with "
                          + (", ".join(arg.describe() for arg in args) or "no arguments"))

    def getattr(self, tx, name: str) -> Variable:
        return tx.wrap_result(getattr(self.value, name))


def _fold(tx, function, args, kwargs):
    try:
        values = [constant_copy(arg) for arg in args]
        keywords = {key: constant_copy(value) for key, value in kwargs.items()}
    except NotConstant:
        return None
    try:
        return tx.wrap_result(function(*values, **keywords))
    except (ArithmeticError, LookupError, TypeError, ValueError) as error:
        raise python_error(type(error), *map(str, error.args[:1])) from None
    except Exception as error:
        raise Unsupported(UNSUPPORTED_CALL, f"{getattr(function, '__name__', function)}() raised "
                          f"{type(error).__name__}: {error}") from None


# -- facts used by handlers ---------------------------------------------------------------
def python_type(tx, value: Variable) -> type:
    return value.python_type()


def truth(tx, value: Variable) -> bool:
    if isinstance(value, (ConstantVariable, TensorVariable, ListVariable, TupleVariable,
                          DictVariable, SetVariable)) and not is_subclass_instance(value):
        return value.truth(tx)
    method = tx.lookup_dunder(value, "__bool__") or tx.lookup_dunder(value, "__len__")
    if method is not None:
        result = method.call(tx, [], {})
        return bool(tx.constant(result, "__bool__/__len__ result"))
    return value.truth(tx)


def length(tx, value: Variable, builtin: bool = False) -> int:
    """`len(value)`; `builtin` skips a subclass's Python `__len__`."""
    if isinstance(value, (ListVariable, TupleVariable, DictVariable, SetVariable)):
        method = None if builtin or not is_subclass_instance(value) else \
            tx.lookup_dunder(value, "__len__")
        if method is not None:
            return tx.constant(method.call(tx, [], {}), "__len__ result")
        return len(value.items)
    if isinstance(value, DictViewVariable):
        return len(value.owner.items)
    if isinstance(value, TensorVariable):
        if value.example.dim() == 0:
            raise Unsupported(UNSUPPORTED_OBJECT, "len() of a 0-d tensor (TypeError)")
        return value.example.shape[0]
    try:
        return len(value.as_constant())
    except NotConstant:
        pass
    if isinstance(value, ModuleVariable) and value.is_container():
        return value.length()
    if isinstance(value, ModuleSliceVariable):
        return len(value.modules)
    method = tx.lookup_dunder(value, "__len__")
    if method is None:
        raise Unsupported(UNSUPPORTED_OBJECT, f"len() of {value.describe()}")
    return tx.constant(method.call(tx, [], {}), "__len__ result")


def format_value(tx, value: Variable, converter, spec: str) -> Variable:
    try:
        constant = value.as_constant()
    except NotConstant:
        raise Unsupported(UNSUPPORTED_OBJECT, f"formatting {value.describe()} into a string") \
            from None
    if converter is not None:
        constant = converter(constant)
    return ConstantVariable(format(constant, spec))


# -- rules ------------------------------------------------------------------------------
@rule(len)
def _len(tx, value):
    if isinstance(value, TensorVariable) and value.example.dim() and \
            is_symbolic(value.example.shape[0]):  # a node: the graph serves every size
        return tx.graph.call("call_method", "size", (value, 0), {})
    return ConstantVariable(length(tx, value))


@rule(isinstance)
def _isinstance(tx, value, classes):
    kinds = tx.constant(classes, "isinstance's second argument")
    actual = value.python_type()
    try:
        return ConstantVariable(issubclass(actual, kinds))
    except TypeError:
        return NotImplemented


@rule(issubclass)
def _issubclass(tx, value, classes):
    return ConstantVariable(issubclass(tx.constant(value, "issubclass's first argument"),
                                       tx.constant(classes, "issubclass's second argument")))


@rule(type)
def _type(tx, *args):
    if len(args) != 1:
        raise Unsupported(UNSUPPORTED_CALL, "type() with three arguments (creating a class)")
    value = args[0]
    kind = value.python_type()
    from guards.sources import TypeSource
    return ClassVariable(kind, source=None if value.source is None else TypeSource(value.source))


@rule(getattr)
def _getattr(tx, value, name, default=None):
    attribute = tx.constant(name, "getattr's name")
    if default is None or value.has_attribute(tx, attribute):
        return tx_getattr(tx, value, attribute)
    return default


@rule(hasattr)
def _hasattr(tx, value, name):
    return ConstantVariable(value.has_attribute(tx, tx.constant(name, "hasattr's name")))


@rule(setattr)
def _setattr(tx, value, name, new):
    store_attribute(tx, value, tx.constant(name, "setattr's name"), new)
    return ConstantVariable(None)


@rule(delattr)
def _delattr(tx, value, name):
    delete_attribute(tx, value, tx.constant(name, "delattr's name"))
    return ConstantVariable(None)


@rule(callable)
def _callable(tx, value):
    try:
        return ConstantVariable(callable(value.as_constant()))
    except NotConstant:
        pass
    kind = value.python_type()  # `__call__` looked up on the class, as CPython does
    return ConstantVariable(any("__call__" in klass.__dict__ for klass in kind.__mro__))


@rule(id)
def _id(tx, value):
    real = tx.real_value(value)
    if real is _UNKNOWN:
        raise Unsupported(UNSUPPORTED_CALL, f"id() of {value.describe()}")
    identity_used(tx, value)
    if value.source is not None:  # the id folds: it is that very object on later calls too
        guard_identity(tx, value)
    return ConstantVariable(id(real))


def _extreme(symbol: str):
    def choose(tx, *args, key=None, default=_MISSING):
        if not args:
            return NotImplemented
        items = iterate_lazily(tx, args[0]) if len(args) == 1 else iter(args)
        best = best_key = None
        for item in items:  # pulled, keyed and compared one at a time, as eager does
            item_key = item if key is None or _is_none(key) else key.call(tx, [item], {})
            if best is None or tx.truth(compare(tx, symbol, item_key, best_key)):
                best, best_key = item, item_key
        if best is None:
            if default is not _MISSING:
                return default
            raise python_error(ValueError, f"{'min' if symbol == '<' else 'max'}() arg is an "
                               "empty sequence")
        return best
    return choose


_MISSING = object()


def _is_none(value: Variable) -> bool:
    return value.is_constant() and value.as_constant() is None


BUILTIN_RULES[min] = _extreme("<")
BUILTIN_RULES[max] = _extreme(">")


def _container_rule(python_class):
    def build(tx, *args):
        items = tx.iterate(args[0]) if args else []
        return new_container(python_class, items)
    return build


for _class in (list, tuple, set, frozenset):
    BUILTIN_RULES[_class] = _container_rule(_class)


@rule(dict)
def _dict(tx, *args, **kwargs):
    # here, not at the top: variables.builder imports this module (a cycle)
    from dynamo.variables.builder import new_dict_from
    result = new_dict_from(tx, args[0]) if args else DictVariable.new({})
    result = DictVariable.new(result.items)
    result.items.update(kwargs)
    return result


def _text_rule(converter):
    def text(tx, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], ExceptionVariable):
            return args[0].text(tx, converter)
        return NotImplemented
    return text


BUILTIN_RULES[str] = _text_rule(str)
BUILTIN_RULES[repr] = _text_rule(repr)


@rule(bool)
def _bool(tx, *args):
    return ConstantVariable(tx.truth(args[0]) if args else False)


@rule(print)
def _print(tx, *args, **kwargs):
    raise Unsupported(PRINT, "print()")


@rule(sorted)
def _sorted(tx, iterable, *, key=None, reverse=None):
    items = tx.iterate(iterable)
    if key is None or _is_none(key):
        keys = [tx.constant(item, "an item sorted()") for item in items]
    else:
        keys = [tx.constant(key.call(tx, [item], {}), "a sort key") for item in items]
    descending = bool(tx.constant(reverse, "sorted's reverse")) if reverse is not None else False
    try:
        order = sorted(range(len(items)), key=keys.__getitem__, reverse=descending)
    except TypeError as error:
        raise Unsupported(UNSUPPORTED_CALL, f"sorted() raised TypeError: {error}") from None
    return ListVariable.new([items[index] for index in order])


@rule(sum)
def _sum(tx, iterable, start=None):
    total = start if start is not None else ConstantVariable(0)
    for item in iterate_lazily(tx, iterable):
        total = binary(tx, "+", total, item)
    return total


@rule(any)
def _any(tx, iterable):  # stops at the first true item, pulling no further
    return ConstantVariable(any(tx.truth(item) for item in iterate_lazily(tx, iterable)))


@rule(all)
def _all(tx, iterable):
    return ConstantVariable(all(tx.truth(item) for item in iterate_lazily(tx, iterable)))


@rule(abs)
def _abs(tx, value):
    if isinstance(value, TensorVariable):
        return tx.graph.call("call_function", torch.abs, (value,), {})
    return NotImplemented


@rule(int, float)
def _number(tx, *args):
    if args and isinstance(args[0], TensorVariable):
        raise Unsupported(SCALAR_OUT, "int()/float() of a tensor")
    return NotImplemented


@rule(iter)
def _iter(tx, value):
    return get_iterator(tx, value)


@rule(next)
def _next(tx, iterator, *default):
    item = get_iterator(tx, iterator).next_item(tx)
    if item is None:
        if default:
            return default[0]
        raise python_error(StopIteration)
    return item


@rule(super)
def _super(tx, *args):
    if not args:
        return zero_argument_super(tx)
    return SuperVariable(args[0], args[1])


def _iterator_rule(function):
    def build(tx, *args, **kwargs):
        return make_builtin_iterator(tx, function, list(args), kwargs)
    return build


for _function in (enumerate, zip, map, filter, reversed, __import__("itertools").chain):
    BUILTIN_RULES[_function] = _iterator_rule(_function)


def _itertools_rule(function):
    def build(tx, *args, **kwargs):
        return itertools_iterator(tx, function, list(args), kwargs)
    return build


def _register_itertools() -> None:
    for function in HANDLED:
        BUILTIN_RULES[function] = _itertools_rule(function)


@rule(__import__("functools").reduce)
def _reduce(tx, function, iterable, *initial):
    items = iterate_lazily(tx, iterable)
    total = initial[0] if initial else next(items, None)
    if total is None:
        raise Unsupported(UNSUPPORTED_CALL, "reduce() of an empty sequence (TypeError)")
    for item in items:
        total = function.call(tx, [total, item], {})
    return total


@rule(__import__("functools").partial)
def _partial(tx, function, *args, **kwargs):
    return PartialVariable(function, tuple(args), dict(kwargs))


@rule(__import__("warnings").warn)
def _warn(tx, *args, **kwargs):
    raise Unsupported(PRINT, "warnings.warn()", exact_frames=True)  # stacklevel counts frames


@rule(__import__("sys")._getframe)
def _getframe(tx, *args, **kwargs):  # inspect.currentframe(), inspect.stack() end here
    raise Unsupported(UNSUPPORTED_CALL, "sys._getframe()", exact_frames=True)


def _operator_rule(function):
    def apply(tx, *args, **kwargs):
        if kwargs or not any(isinstance(arg, TensorVariable) for arg in args):
            return NotImplemented
        return operators.apply(tx, function, *args)
    return apply


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "neg", "pos",
              "abs", "invert", "and_", "or_", "xor", "lshift", "rshift", "lt", "le", "eq", "ne",
              "gt", "ge", "getitem", "iadd", "isub", "imul", "itruediv"):
    BUILTIN_RULES[getattr(operator, _name)] = _operator_rule(getattr(operator, _name))


def _register_new_functions() -> None:
    for function in NEW_FUNCTIONS:
        BUILTIN_RULES[function] = object_new
    BUILTIN_RULES[tuple.__new__] = tuple_new
    BUILTIN_RULES[operator.itemgetter] = getter_rule("item")
    BUILTIN_RULES[operator.attrgetter] = getter_rule("attribute")
    BUILTIN_RULES[operator.methodcaller] = getter_rule("method")


_register_new_functions()
_register_itertools()
