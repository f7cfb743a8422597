"""Python operators on variables: arithmetic, comparisons, identity, containment, subscripts.

Input: an operator and variable operands. Output: a variable. Tensors turn the operation into a
graph node; constants fold; containers, user objects and modules follow Python's own rules
(including `__add__`/`__getitem__` of user classes, which are inlined).
"""
from __future__ import annotations

import contextlib

import operator

from dynamo.breaks import UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.base import NotConstant, Variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.exceptions import python_error
from dynamo.variables.containers import (DictVariable, DictViewVariable, ListVariable,
                                         SetVariable, SliceVariable,
                                         TupleVariable, constant_key, is_subclass_instance,
                                         torch_size)
from dynamo.variables.symbolic import SymbolicVariable, graph_operation
from dynamo.variables.tensor import TensorVariable
from dynamo.variables.tensor_indexing import symbolic_view
from dynamo.variables.guarding import identity_by_source, identity_used
from dynamo.variables.modules import ModuleSliceVariable, ModuleVariable

BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
    ">>": operator.rshift,
}
INPLACE = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor, "<<=": operator.ilshift,
    ">>=": operator.irshift,
}
COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
           ">": operator.gt, ">=": operator.ge}
UNARY = {"-": operator.neg, "+": operator.pos, "~": operator.invert, "not": operator.not_}
_DUNDER = {
    operator.eq: ("__eq__", "__eq__"), operator.ne: ("__ne__", "__ne__"),
    operator.lt: ("__lt__", "__gt__"), operator.gt: ("__gt__", "__lt__"),
    operator.le: ("__le__", "__ge__"), operator.ge: ("__ge__", "__le__"),
    operator.getitem: ("__getitem__", None), operator.neg: ("__neg__", None),
    operator.pos: ("__pos__", None), operator.invert: ("__invert__", None),
    operator.abs: ("__abs__", None),
}
_DUNDER.update({function: (f"__{name}__", f"__r{name}__") for function, name in [
    (operator.add, "add"), (operator.sub, "sub"), (operator.mul, "mul"),
    (operator.truediv, "truediv"), (operator.floordiv, "floordiv"), (operator.mod, "mod"),
    (operator.pow, "pow"), (operator.matmul, "matmul"), (operator.and_, "and"),
    (operator.or_, "or"), (operator.xor, "xor"), (operator.lshift, "lshift"),
    (operator.rshift, "rshift")]})


def _constants(*values: Variable):
    return [value.as_constant() for value in values]


def apply(tx, function, *operands: Variable) -> Variable:
    """`function(*operands)` for an `operator` function."""
    if any(isinstance(value, DictViewVariable) for value in operands):
        if function in (operator.eq, operator.ne) and any(
                isinstance(value, DictViewVariable) and value.kind == "values"
                for value in operands):  # values views compare by identity
            same = operands[0] is operands[1]
            return ConstantVariable(same if function is operator.eq else not same)
        set_class = set if function in (operator.and_, operator.or_, operator.sub,
                                        operator.xor) else frozenset
        operands = tuple(value.snapshot(set_class) if isinstance(value, DictViewVariable)
                         else value for value in operands)
    if any(isinstance(value, TensorVariable) for value in operands):
        return tx.graph.call("call_function", function, operands, {})
    if any(isinstance(value, SymbolicVariable) for value in operands):
        kept = graph_operation(tx, function, operands)
        if kept is not None:
            return kept
    try:
        values = _constants(*operands)
    except NotConstant:
        return _apply_structured(tx, function, operands)
    try:
        return tx.wrap_result(function(*values))
    except _PYTHON_ERRORS as error:  # 1 / 0, "a" + 1, (1, 2)[5]: raised in the traced code
        raise python_error(type(error), *map(str, error.args[:1])) from None
    except Exception as error:
        raise Unsupported(UNSUPPORTED_OBJECT, f"{function.__name__} raised "
                          f"{type(error).__name__}: {error}") from None


_PYTHON_ERRORS = (ArithmeticError, LookupError, TypeError, ValueError)


def binary(tx, symbol: str, left: Variable, right: Variable) -> Variable:
    if symbol in INPLACE:
        return _inplace(tx, INPLACE[symbol], BINARY[symbol[:-1]], left, right)
    return apply(tx, BINARY[symbol], left, right)


def _inplace(tx, function, fallback, left: Variable, right: Variable) -> Variable:
    if isinstance(left, ListVariable) and function is operator.iadd:
        left.box.touch()
        left.items.extend(tx.iterate(right))
        return left
    if isinstance(left, DictVariable) and function is operator.ior:
        left.box.touch()
        left.items.update(right.items)
        return left
    if isinstance(left, SetVariable) and isinstance(right, SetVariable) and \
            left.python_class is set and function in (operator.ior, operator.iand,
                                                      operator.isub, operator.ixor):
        result = _set_operation(fallback, left, right)
        left.box.touch()
        left.items.clear()
        left.items.update(result.items)
        return left
    if isinstance(left, TensorVariable):
        return tx.graph.call("call_function", function, (left, right), {})
    method = tx.lookup_dunder(left, "__i" + _DUNDER[fallback][0][2:])
    if method is not None:  # a user class's `__iadd__`...
        result = method.call(tx, [right], {})
        if not (result.is_constant() and result.as_constant() is NotImplemented):
            return result
    return apply(tx, fallback, left, right)


def compare(tx, symbol: str, left: Variable, right: Variable) -> Variable:
    return apply(tx, COMPARE[symbol], left, right)


def unary(tx, symbol: str, value: Variable) -> Variable:
    if symbol == "not":
        return ConstantVariable(not tx.truth(value))
    return apply(tx, UNARY[symbol], value)


def identity(tx, left: Variable, right: Variable) -> bool:
    """`left is right` at trace time."""
    if left is right:
        return True
    if isinstance(left, TensorVariable) or isinstance(right, TensorVariable):
        if not (isinstance(left, TensorVariable) and isinstance(right, TensorVariable)):
            return False
        identity_used(tx, left, right)  # guarded: input tensors stay as distinct or shared
        return left.node is right.node or left.example is right.example
    box_left, box_right = getattr(left, "box", None), getattr(right, "box", None)
    if box_left is not None or box_right is not None:
        identity_used(tx, left, right)  # guarded: the objects stay as distinct or as shared
        return box_left is box_right
    real_left, real_right = tx.real_value(left), tx.real_value(right)
    if real_left is not _UNKNOWN and real_right is not _UNKNOWN:
        identity_used(tx, left, right)
        return real_left is real_right
    if _known_type(left) is not _known_type(right) and None not in (_known_type(left),
                                                                     _known_type(right)):
        return False  # objects of different types are never the same object
    same = identity_by_source(tx, left, right)  # tuples read from the frame: their objects
    if same is not None:
        return same
    try:
        a, b = _constants(left, right)
    except NotConstant:
        raise Unsupported(UNSUPPORTED_OBJECT, f"`is` between {left.describe()} and "
                          f"{right.describe()}") from None
    return a is b or (type(a) is type(b) and a == b and isinstance(a, (bool, type(None))))


_UNKNOWN = object()


def _known_type(value: Variable):
    try:
        return value.python_type()
    except Unsupported:
        return None


def _override(tx, value: Variable, name: str, builtin: bool):
    """A Python override of `name` on a subclass instance (None when `builtin` asks for the
    builtin behaviour, as `super().name(...)` does)."""
    if builtin or not is_subclass_instance(value):
        return None
    return tx.lookup_dunder(value, name)


def contains(tx, container: Variable, item: Variable, builtin: bool = False) -> bool:
    """`item in container` at trace time."""
    method = _override(tx, container, "__contains__", builtin)
    if method is not None:
        return tx.truth(method.call(tx, [item], {}))
    if isinstance(container, (DictVariable, SetVariable)):
        return constant_key(item) in container.items
    if isinstance(container, DictViewVariable):
        decided = container.contains(item)
        if decided is not None:
            return decided
        container = container.snapshot()
    if isinstance(container, (ListVariable, TupleVariable)):
        return any(tx.truth(compare(tx, "==", element, item)) for element in container.items)
    if isinstance(container, TensorVariable):
        return tx.truth(tx.graph.call("call_method", "__contains__", (container, item), {}))
    try:
        return operator.contains(*_constants(container, item))
    except NotConstant:
        method = tx.lookup_dunder(container, "__contains__")
        if method is None:
            raise Unsupported(UNSUPPORTED_OBJECT, f"`in` on {container.describe()}") from None
        return tx.truth(method.call(tx, [item], {}))


def subscript(tx, container: Variable, index: Variable, builtin: bool = False) -> Variable:
    """`container[index]`."""
    method = _override(tx, container, "__getitem__", builtin)
    if method is not None:
        return method.call(tx, [index], {})
    if isinstance(container, TensorVariable):
        view = symbolic_view(tx, container, index)
        if view is not None:
            return view
        return tx.graph.call("call_function", operator.getitem, (container, index), {})
    if isinstance(container, (ListVariable, TupleVariable)):
        return _sequence_item(container, index)
    if isinstance(container, DictVariable):
        # here, not at the top: variables.container_methods imports this module (a cycle)
        from dynamo.variables.container_methods import call_container_method
        return call_container_method(tx, container, "__getitem__", [index], {})
    if isinstance(container, ModuleVariable) and container.is_container():
        return container.item(tx, index)
    if isinstance(container, ModuleSliceVariable):
        return container.item(tx, index)
    if container.is_constant() and index.is_constant():
        return apply(tx, operator.getitem, container, index)
    generic = tx.real_value(container)
    if getattr(type(generic), "__module__", None) == "typing":  # `List[int]`: a type hint
        return tx.wrap_result(generic[tx.real_value(index) if tx.real_value(index) is not
                                      _UNKNOWN else tx.constant(index, "a type argument")])
    return _apply_structured(tx, operator.getitem, (container, index))


def _size_or_tuple(*operands: Variable) -> type:
    """The class of a slice, sum or repetition of tuples: `torch.Size` where an operand is
    one (its operators return sizes, `(1,) + size` too), else a plain tuple (namedtuples'
    do)."""
    size = torch_size()
    return size if any(getattr(operand, "python_class", None) is size for operand in operands) \
        else tuple


def _sequence_item(container, index: Variable) -> Variable:
    try:
        key = index.as_constant()
    except NotConstant:
        raise Unsupported(UNSUPPORTED_OBJECT, f"indexing a sequence with "
                          f"{index.describe()}") from None
    items = container.items
    try:
        if isinstance(key, slice):
            picked = items[key]
            if isinstance(container, ListVariable):
                return ListVariable.new(picked)
            return TupleVariable(tuple(picked), _size_or_tuple(container))
        return items[key.__index__()]
    except IndexError as error:
        raise python_error(IndexError, str(error)) from None
    except (TypeError, AttributeError) as error:
        raise Unsupported(UNSUPPORTED_OBJECT, f"indexing raised {type(error).__name__}") from None


def store_subscript(tx, container: Variable, index: Variable, value: Variable,
                    builtin: bool = False) -> None:
    """`container[index] = value`."""
    method = _override(tx, container, "__setitem__", builtin)
    if method is not None:
        method.call(tx, [index, value], {})
        return
    if isinstance(container, TensorVariable):
        view = symbolic_view(tx, container, index) if isinstance(value, TensorVariable) or (
            isinstance(value, ConstantVariable) and type(value.value) in (int, float, bool)) \
            else None
        if view is None:
            tx.graph.call("call_function", operator.setitem, (container, index, value), {})
        elif isinstance(value, TensorVariable):   # eager's setitem: the view, copied into
            tx.graph.call("call_method", "copy_", (view, value), {})
        else:
            tx.graph.call("call_method", "fill_", (view, value), {})
    elif isinstance(container, ListVariable):
        container.box.touch()
        key = index.as_constant()
        with _raised_in_trace():
            if isinstance(key, slice):
                container.items[key] = tx.iterate(value)
            else:
                container.items[key] = value
    elif isinstance(container, DictVariable):
        container.box.touch()
        container.items[constant_key(index)] = value
    else:
        method = tx.lookup_dunder(container, "__setitem__")
        if method is None:
            raise Unsupported(UNSUPPORTED_OBJECT, f"item assignment on {container.describe()}")
        method.call(tx, [index, value], {})


def delete_subscript(tx, container: Variable, index: Variable, builtin: bool = False) -> None:
    """`del container[index]`."""
    method = _override(tx, container, "__delitem__", builtin)
    if method is not None:
        method.call(tx, [index], {})
        return
    if isinstance(container, ListVariable):
        container.box.touch()
        with _raised_in_trace():
            del container.items[index.as_constant()]
    elif isinstance(container, DictVariable):
        container.box.touch()
        key = constant_key(index)
        with _raised_in_trace():
            del container.items[key]
    else:
        raise Unsupported(UNSUPPORTED_OBJECT, f"item deletion on {container.describe()}")


@contextlib.contextmanager
def _raised_in_trace():
    """An item store or deletion on a box that fails as the real one would (`del [][0]`,
    `[][0] = v`, a missing key, an extended slice of another length): the error is raised in
    the traced code, where a `try` may catch it and an uncaught one makes the frame run
    eagerly (it escaped the tracer as an internal error that looked like the user's, and the
    mutations before it were lost: fuzzer P12)."""
    try:
        yield
    except (IndexError, KeyError, ValueError) as error:
        raise python_error(type(error), *error.args[:1]) from None


_SET_OPERATORS = {operator.and_: "__and__", operator.or_: "__or__", operator.sub: "__sub__",
                  operator.xor: "__xor__", operator.le: "__le__", operator.lt: "__lt__",
                  operator.ge: "__ge__", operator.gt: "__gt__", operator.eq: "__eq__",
                  operator.ne: "__ne__"}


def _set_operation(function, left: SetVariable, right: SetVariable) -> Variable:
    """Set algebra and comparisons on sets of constants (items keep their variables)."""
    result = getattr(set(left.items), _SET_OPERATORS[function])(set(right.items))
    if isinstance(result, bool):
        return ConstantVariable(result)
    merged = {**right.items, **left.items}
    built = SetVariable.new([merged[key] for key in merged if key in result])
    return SetVariable(built.box, left.python_class)


def _apply_structured(tx, function, operands) -> Variable:
    left = operands[0]
    if len(operands) == 2 and function in _SET_OPERATORS and \
            isinstance(left, SetVariable) and isinstance(operands[1], SetVariable):
        return _set_operation(function, left, operands[1])
    if function is operator.or_ and len(operands) == 2 and isinstance(left, DictVariable) \
            and isinstance(operands[1], DictVariable) and not is_subclass_instance(left):
        return DictVariable.new({**left.items, **operands[1].items},
                                python_class=left.python_class,
                                default_factory=left.default_factory)
    if function is operator.add and len(operands) == 2:
        right = operands[1]
        if isinstance(left, ListVariable) and isinstance(right, ListVariable):
            return ListVariable.new(left.items + right.items)
        if isinstance(left, TupleVariable) and isinstance(right, TupleVariable):
            return TupleVariable(left.items + right.items, _size_or_tuple(left, right))
    if function is operator.mul and len(operands) == 2 and \
            isinstance(left, (ListVariable, TupleVariable)) and operands[1].is_constant():
        times = operands[1].as_constant()
        if isinstance(left, ListVariable):
            return ListVariable.new(left.items * times)
        return TupleVariable(left.items * times, _size_or_tuple(left))
    if function in (operator.eq, operator.ne) and len(operands) == 2:
        same = _structural_equal(tx, *operands)
        if same is not None:
            return ConstantVariable(same if function is operator.eq else not same)
    if function is operator.not_:
        return ConstantVariable(not tx.truth(left))
    return _dunder(tx, function, operands)


def _structural_equal(tx, left: Variable, right: Variable):
    sequences = (ListVariable, TupleVariable)
    if isinstance(left, sequences) and isinstance(right, sequences):
        if type(left) is not type(right) or len(left.items) != len(right.items):
            return False
        return all(tx.truth(compare(tx, "==", a, b)) for a, b in zip(left.items, right.items))
    if (left.is_constant() and right.python_type() is not type(left.as_constant())) or \
            (right.is_constant() and left.python_type() is not type(right.as_constant())):
        if left.python_type() in (int, float, bool) and right.python_type() in (int, float, bool):
            return None
        return identity(tx, left, right) if not (left.is_constant() and right.is_constant()) \
            else None
    return None


def _dunder(tx, function, operands) -> Variable:
    names = _DUNDER.get(function)
    if names is not None:
        method = tx.lookup_dunder(operands[0], names[0])
        if method is not None:
            result = method.call(tx, list(operands[1:]), {})
            if not (result.is_constant() and result.as_constant() is NotImplemented):
                return result
        if names[1] is not None and len(operands) == 2:
            method = tx.lookup_dunder(operands[1], names[1])
            if method is not None:
                return method.call(tx, [operands[0]], {})
    raise Unsupported(UNSUPPORTED_OBJECT, f"{getattr(function, '__name__', function)} on "
                      + ", ".join(operand.describe() for operand in operands))


def slice_of(start: Variable, stop: Variable, step: Variable) -> Variable:
    parts = (start, stop, step)
    if all(part.is_constant() for part in parts):
        return ConstantVariable(slice(*(part.as_constant() for part in parts)))
    return SliceVariable(parts)
