"""User functions (inlined when called), closures, bound methods and `functools.partial`.

A call of a Python function the tracer can see into is inlined: its arguments are bound the way
CPython binds them (defaults, keyword-only, `*args`, `**kwargs`) and its code is traced in a
child tracer sharing the graph, guards and side effects.
"""
from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Optional

from dynamo.breaks import UNSUPPORTED_CALL, UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables import registry
from dynamo.variables.side_effects import Box
from dynamo.variables.base import Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import DictVariable, TupleVariable
from guards.sources import AttrSource, ClosureCellSource, ConstantSource, ItemSource, Source
from dynamo import skips
from dynamo.variables.attributes import preexisting_box
from dynamo.variables.disabled import disabled_call
from dynamo.variables.optimizers import optimizer_call


@variable
class CellVariable(Variable):
    """A closure cell; `box.contents` is its current value (None: empty)."""

    box: Box

    @staticmethod
    def new(contents: Optional[Variable]) -> "CellVariable":
        return CellVariable(Box("cell", contents))

    @staticmethod
    def preexisting(cell, source: Optional[Source], read) -> "CellVariable":
        """A real cell; `read()` wraps its current contents (installing guards) on demand."""
        return CellVariable(Box("cell", _Lazy(read), source=source, real=cell))

    def contents(self, tx) -> Optional[Variable]:
        value = self.box.contents
        if isinstance(value, _Lazy):
            value = self.box.contents = value.read()
        return value

    def store(self, value: Variable) -> None:
        self.box.contents = value
        self.box.touch()


class _Lazy:
    __slots__ = ("read",)

    def __init__(self, read):
        self.read = read


def bind_arguments(code: types.CodeType, name: str, args: list, kwargs: dict,
                   defaults: tuple, kwdefaults: dict) -> dict[str, Variable]:
    """CPython's argument binding, on variables. Raises Unsupported on a TypeError."""
    names = code.co_varnames
    positional = code.co_argcount
    kwonly = code.co_kwonlyargcount
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    bound: dict[str, Variable] = {}
    for parameter, value in zip(names[:positional], args):
        bound[parameter] = value
    extra = args[positional:]
    if extra and not has_varargs:
        _type_error(name, f"takes {positional} positional arguments but {len(args)} were given")
    index = positional + kwonly
    if has_varargs:
        bound[names[index]] = TupleVariable(tuple(extra))
        index += 1
    leftover = {}
    posonly = set(names[:code.co_posonlyargcount])
    for key, value in kwargs.items():
        if key in names[:positional + kwonly] and key not in posonly:
            if key in bound:
                _type_error(name, f"got multiple values for argument {key!r}")
            bound[key] = value
        else:
            leftover[key] = value
    if leftover and not has_varkw:
        _type_error(name, f"got an unexpected keyword argument {next(iter(leftover))!r}")
    if has_varkw:
        bound[names[index]] = DictVariable.new(leftover)
    first_default = positional - len(defaults)
    for position, parameter in enumerate(names[:positional]):
        if parameter not in bound:
            if position < first_default:
                _type_error(name, f"missing required argument {parameter!r}")
            bound[parameter] = defaults[position - first_default]
    for parameter in names[positional:positional + kwonly]:
        if parameter not in bound:
            if parameter not in kwdefaults:
                _type_error(name, f"missing required keyword-only argument {parameter!r}")
            bound[parameter] = kwdefaults[parameter]
    return bound


def _type_error(name: str, text: str):
    raise Unsupported(UNSUPPORTED_CALL, f"{name}() {text} (TypeError)")


def inline_function(tx, code: types.CodeType, f_globals: dict, globals_source,
                    name: str, args, kwargs, defaults, kwdefaults, closure,
                    function: Any = None, direct: bool = False) -> Variable:
    """Trace a call of a Python function with the given pieces (`function`: the real
    function object, when there is one, and `direct`, the call is what the caller's CALL
    instruction calls (`Tracer.call_directly`): a graph break can then resume inside it)."""
    if skips.is_own(code) and not registry.traceable_own_code(code):  # never itself
        raise Unsupported(UNSUPPORTED_CALL, f"{name}, a function of framejit itself")
    bound = bind_arguments(code, name, list(args), dict(kwargs), tuple(defaults),
                           dict(kwdefaults))
    cells = dict(zip(code.co_freevars, closure))
    return tx.inline(code, f_globals, bound, cells, globals_source, function=function,
                     direct=direct)


def globals_source_for(tx, f_globals: dict) -> Optional[Source]:
    """How guards reach another module's globals: the dict is bound into the check by name."""
    if f_globals is tx.state.root_globals:
        return None
    module = f_globals.get("__name__", "module")
    return ConstantSource(f"globals of {module}", f_globals)


@variable
class UserFunctionVariable(Variable):
    """A real Python function object."""

    value: types.FunctionType
    is_real: bool = True

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"function {self.value.__qualname__}"

    def call(self, tx, args, kwargs) -> Variable:
        # here, not at the top: variables.special imports this module (a cycle)
        from dynamo.variables.special import special_function
        direct = tx.take_direct(self, self.value)
        special = special_function(tx, self.value, args, kwargs)
        if special is None:  # torch.optim's step() and zero_grad(): captured, not traced into
            special = optimizer_call(tx, self.value, args, kwargs)
        if special is not None:
            return special
        function = self.value
        disabled = disabled_call(function, args, kwargs)  # dynamo/torch.compiler.disable
        if disabled is not None:
            return disabled
        defaults = self._defaults(tx)
        kwdefaults = {key: tx.wrap(value, None if self.source is None else
                                   _kwdefault_source(self.source, key))
                      for key, value in (function.__kwdefaults__ or {}).items()}
        closure = self._closure(tx)
        return inline_function(tx, function.__code__, function.__globals__,
                               globals_source_for(tx, function.__globals__),
                               function.__qualname__, args, kwargs, defaults, kwdefaults, closure,
                               function=function, direct=direct)

    def _defaults(self, tx) -> list[Variable]:
        values = self.value.__defaults__ or ()
        base = None if self.source is None else AttrSource(self.source, "__defaults__")
        return [tx.wrap(value, None if base is None else ItemSource(base, index))
                for index, value in enumerate(values)]

    def _closure(self, tx) -> list[Variable]:
        cells = self.value.__closure__ or ()
        result = []
        for index, cell in enumerate(cells):
            source = None if self.source is None else ClosureCellSource(self.source, index)
            box = tx.side_effects.box_for(cell)
            result.append(CellVariable(box) if box is not None else _track_cell(tx, cell, source))
        return result

    def getattr(self, tx, name: str) -> Variable:
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantVariable(getattr(self.value, name))
        source = None if self.source is None else AttrSource(self.source, name)
        if name in _FUNCTION_ATTRIBUTES:  # read for real; guarded through the source
            return tx.wrap(getattr(self.value, name), source)
        box = tx.side_effects.box_for(self.value)
        if box is not None and name in box.contents:
            return box.contents[name]
        if name in self.value.__dict__:
            return tx.wrap(self.value.__dict__[name], source)
        raise Unsupported(UNSUPPORTED_OBJECT, f"attribute {name!r} of {self.describe()} "
                          "(AttributeError)")

    def has_attribute(self, tx, name: str) -> bool:
        box = tx.side_effects.box_for(self.value)
        return (box is not None and name in box.contents) or hasattr(self.value, name)

    def attribute_box(self, tx):
        return preexisting_box(tx, self.value, self.source)

    def real_object(self) -> Any:
        return self.value


_FUNCTION_ATTRIBUTES = {"__code__", "__defaults__", "__kwdefaults__", "__globals__",
                        "__closure__", "__annotations__", "__dict__", "__wrapped__",
                        "__signature__", "__type_params__"}


def _kwdefault_source(source: Source, key: str) -> Source:
    from guards.sources import DictItemSource
    return DictItemSource(AttrSource(source, "__kwdefaults__"), key)


def _track_cell(tx, cell, source) -> CellVariable:
    def read():
        try:
            contents = cell.cell_contents
        except ValueError:
            return None
        return tx.wrap(contents, source)
    variable_ = CellVariable.preexisting(cell, source, read)
    tx.side_effects.track(variable_.box)
    return variable_


@variable
class NestedFunctionVariable(Variable):
    """A function created by MAKE_FUNCTION during the trace (a closure or a lambda)."""

    code: types.CodeType
    f_globals: dict
    globals_source: Optional[Source]
    defaults: Optional[TupleVariable]
    kwdefaults: Optional[DictVariable]
    closure: tuple
    annotations: Any = None

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"function {self.code.co_qualname}"

    def call(self, tx, args, kwargs) -> Variable:
        defaults = self.defaults.items if self.defaults is not None else ()
        kwdefaults = self.kwdefaults.items if self.kwdefaults is not None else {}
        direct = tx.take_direct(self, None)
        return inline_function(tx, self.code, self.f_globals, self.globals_source,
                               self.code.co_qualname, args, kwargs, defaults, kwdefaults,
                               self.closure, direct=direct)

    def getattr(self, tx, name: str) -> Variable:
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(self.code.co_name if name == "__name__"
                                    else self.code.co_qualname)
        if name == "__code__":
            return ConstantVariable(self.code)
        raise Unsupported(UNSUPPORTED_OBJECT, f"attribute {name!r} of a nested function")

    def rebuild(self, plan) -> str:
        """A real function object (a comprehension or closure a graph break keeps alive); its
        cells must be cells of the compiled frame itself."""
        cells = []
        for cell in self.closure:
            name = plan.frame_cells.get(id(getattr(cell, "box", None)))
            if name is None:
                raise Unsupported(UNSUPPORTED_OBJECT, "a closure over a cell of an inlined call "
                                  "kept across a graph break")
            cells.append(plan.cell(name))
        if self.kwdefaults is not None and self.kwdefaults.items:
            raise Unsupported(UNSUPPORTED_OBJECT, "a nested function with keyword-only "
                              "defaults kept across a graph break")
        function = plan.bind(types.FunctionType, "FunctionType")
        namespace = "G" if self.f_globals is plan.frame_globals else \
            plan.bind(self.f_globals, "globals")
        defaults = plan.reconstruct(self.defaults) if self.defaults is not None else "None"
        closure = "(" + "".join(cell + ", " for cell in cells) + ")" if cells else "None"
        return f"{function}({plan.bind(self.code, 'code')}, {namespace}, " \
               f"{self.code.co_name!r}, {defaults}, {closure})"


@variable
class BoundMethodVariable(Variable):
    """`obj.method` where `method` is a Python function: calls pass `obj` first."""

    function: Variable
    owner: Variable

    def python_type(self) -> type:
        return types.MethodType

    def describe(self) -> str:
        return f"method {self.function.describe()} of {self.owner.describe()}"

    def call(self, tx, args, kwargs) -> Variable:
        tx.pass_direct(self, self.function)
        return self.function.call(tx, [self.owner, *args], kwargs)

    def getattr(self, tx, name: str) -> Variable:
        if name == "__self__":
            return self.owner
        if name == "__func__":
            return self.function
        return self.function.getattr(tx, name)

    def rebuild(self, plan) -> str:
        method = plan.bind(types.MethodType, "MethodType")
        return f"{method}({plan.reconstruct(self.function)}, {plan.reconstruct(self.owner)})"


@variable
class PartialVariable(Variable):
    """`functools.partial(function, *args, **kwargs)`."""

    function: Variable
    args: tuple
    keywords: dict

    def python_type(self) -> type:
        return functools.partial

    def call(self, tx, args, kwargs) -> Variable:
        tx.pass_direct(self, self.function)
        return self.function.call(tx, [*self.args, *args], {**self.keywords, **kwargs})

    def getattr(self, tx, name: str) -> Variable:
        if name == "func":
            return self.function
        if name == "args":
            return TupleVariable(tuple(self.args))
        if name == "keywords":
            return DictVariable.new(self.keywords)
        raise Unsupported(UNSUPPORTED_OBJECT, f"attribute {name!r} of a partial")
