"""Iterators: over containers, `range`, `enumerate`, `zip`, `map`, `filter`, `reversed`,
`itertools`, and generators (traced lazily: a generator's frame pauses at each `yield`).

An iterator's position is mutable, so it lives in a `Box`; `next_item(tx)` returns the next
variable, or None when exhausted.
"""
from __future__ import annotations

import itertools
from typing import Optional

from dynamo.breaks import UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.side_effects import Box
from dynamo.variables.base import NotConstant, Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import (DictVariable, ListVariable, SetVariable, TupleVariable,
                                         is_subclass_instance)
from dynamo.variables.tensor import TensorVariable
from dynamo.variables.exceptions import RaisedInTrace
from dynamo.variables.functions import PartialVariable


@variable
class IteratorVariable(Variable):
    """Base: `box.contents` holds the iterator's mutable state."""

    box: Box

    def python_type(self) -> type:
        return type(iter(()))

    def next_item(self, tx) -> Optional[Variable]:
        raise NotImplementedError

    def iterate(self, tx) -> list[Variable]:
        items = []
        while (item := self.next_item(tx)) is not None:
            items.append(item)
        return items

    def getattr(self, tx, name: str) -> Variable:
        if name == "__next__":
            # here, not at the top: variables.builtins imports this module (a cycle)
            from dynamo.variables.builtins import BuiltinVariable
            return PartialVariable(BuiltinVariable(next), (self,), {})
        raise Unsupported(UNSUPPORTED_OBJECT, f"iterator attribute {name!r}")


@variable
class SequenceIterator(IteratorVariable):
    @staticmethod
    def over(items) -> "SequenceIterator":
        return SequenceIterator(Box("iterator", [list(items), 0]))

    def next_item(self, tx) -> Optional[Variable]:
        items, position = self.box.contents
        if position >= len(items):
            return None
        self.box.contents[1] = position + 1
        return items[position]

    def rebuild(self, plan) -> str:
        """An iterator over the items not yet consumed (a graph break keeps it on the stack)."""
        items, position = self.box.contents
        return f"iter(({''.join(plan.reconstruct(item) + ', ' for item in items[position:])}))"


@variable
class MapIterator(IteratorVariable):
    function: Variable = None
    iterators: tuple = ()

    def next_item(self, tx) -> Optional[Variable]:
        values = [iterator.next_item(tx) for iterator in self.iterators]
        if any(value is None for value in values):
            return None
        return self.function.call(tx, values, {})


@variable
class FilterIterator(IteratorVariable):
    function: Variable = None
    source_iterator: IteratorVariable = None

    def next_item(self, tx) -> Optional[Variable]:
        while (item := self.source_iterator.next_item(tx)) is not None:
            keep = item if self.function is None else self.function.call(tx, [item], {})
            if tx.truth(keep):
                return item
        return None


@variable
class ZipIterator(IteratorVariable):
    iterators: tuple = ()
    strict: bool = False

    def next_item(self, tx) -> Optional[Variable]:
        values = [iterator.next_item(tx) for iterator in self.iterators]
        if all(value is not None for value in values):
            return TupleVariable(tuple(values))
        if self.strict and any(value is not None for value in values):
            raise Unsupported(UNSUPPORTED_OBJECT, "zip(strict=True) of unequal lengths")
        return None

    def rebuild(self, plan) -> str:
        parts = [plan.reconstruct(iterator) for iterator in self.iterators]
        return f"zip({', '.join(parts)}{', strict=True' if self.strict else ''})"


@variable
class EnumerateIterator(IteratorVariable):
    source_iterator: IteratorVariable = None

    def next_item(self, tx) -> Optional[Variable]:
        item = self.source_iterator.next_item(tx)
        if item is None:
            return None
        index = self.box.contents
        self.box.contents = index + 1
        return TupleVariable((ConstantVariable(index), item))

    def rebuild(self, plan) -> str:
        return f"enumerate({plan.reconstruct(self.source_iterator)}, {self.box.contents!r})"


@variable
class ChainIterator(IteratorVariable):
    """`itertools.chain`; `box.contents` is the list of remaining iterators."""

    def next_item(self, tx) -> Optional[Variable]:
        remaining = self.box.contents
        while remaining:
            item = remaining[0].next_item(tx)
            if item is not None:
                return item
            remaining.pop(0)
        return None


@variable
class SubscriptIterator(IteratorVariable):
    """`iter(obj)` for an object with a Python `__getitem__` and no `__iter__`: items 0, 1,
    ... until `__getitem__` raises IndexError (or StopIteration)."""

    getitem: Variable = None

    def next_item(self, tx) -> Optional[Variable]:
        index = self.box.contents
        if index is None:
            return None
        try:
            item = self.getitem.call(tx, [ConstantVariable(index)], {})
        except RaisedInTrace as raised:
            if not issubclass(raised.exception.python_type(), (IndexError, StopIteration)):
                raise
            self.box.contents = None
            return None
        self.box.contents = index + 1
        return item


@variable
class GeneratorVariable(IteratorVariable):
    """A generator created during the trace: its frame is a paused child tracer."""

    def python_type(self) -> type:
        import types
        return types.GeneratorType

    def next_item(self, tx) -> Optional[Variable]:
        tracer = self.box.contents
        if tracer is None:
            return None
        try:
            value = tracer.resume()
        except RaisedInTrace:
            self.box.contents = None  # a generator that raised is finished
            raise
        if value is None:
            self.box.contents = None
            self.box.returned = tracer.returned
        return value

    def returned_value(self) -> Optional[Variable]:
        """What the generator returned (`x = yield from generator`), once it is finished."""
        return getattr(self.box, "returned", None)


def get_iterator(tx, value: Variable) -> IteratorVariable:
    """`iter(value)`."""
    if isinstance(value, IteratorVariable):
        return value
    if is_subclass_instance(value):
        method = tx.lookup_dunder(value, "__iter__")
        if method is not None:
            return get_iterator(tx, method.call(tx, [], {}))
    if isinstance(value, (TupleVariable, ListVariable, SetVariable)):
        return SequenceIterator.over(value.iterate(tx))
    if isinstance(value, (DictVariable, TensorVariable)):
        return SequenceIterator.over(value.iterate(tx))
    try:
        constant = value.as_constant()
    except NotConstant:
        constant = None
    else:
        try:
            return SequenceIterator.over([tx.wrap_result(item) for item in constant])
        except TypeError:
            raise Unsupported(UNSUPPORTED_OBJECT, f"{value.describe()} is not iterable") from None
    method = tx.lookup_dunder(value, "__iter__")
    if method is not None:
        return get_iterator(tx, method.call(tx, [], {}))
    getitem = tx.lookup_dunder(value, "__getitem__")
    if getitem is not None:
        return SubscriptIterator(Box("iterator", 0), getitem)
    return SequenceIterator.over(value.iterate(tx))


def iterate_all(tx, value: Variable) -> list[Variable]:
    """Every item of a finite iterable."""
    if isinstance(value, (TupleVariable, ListVariable)) and not is_subclass_instance(value):
        return list(value.items)
    return get_iterator(tx, value).iterate(tx)


def iterate_lazily(tx, value: Variable):
    """The items of an iterable one at a time, each pulled when the consumer asks for it: a
    generator's body runs between the consumer's steps, as in eager (`sum(gen())` where the
    generator updates the tensor it yields; `any(...)` stopping at the first true item)."""
    if isinstance(value, (TupleVariable, ListVariable)) and not is_subclass_instance(value):
        yield from list(value.items)
        return
    iterator = get_iterator(tx, value)
    while (item := iterator.next_item(tx)) is not None:
        yield item


def make_builtin_iterator(tx, function, args, kwargs) -> Optional[IteratorVariable]:
    """`enumerate`, `zip`, `map`, `filter`, `reversed` and `itertools` helpers."""
    if function is enumerate:
        start = tx.constant(kwargs.get("start", args[1] if len(args) > 1 else
                                       ConstantVariable(0)), "enumerate's start")
        return EnumerateIterator(Box("iterator", start), get_iterator(tx, args[0]))
    if function is zip:
        strict = tx.constant(kwargs.get("strict", ConstantVariable(False)), "zip's strict")
        return ZipIterator(Box("iterator", None),
                           tuple(get_iterator(tx, arg) for arg in args), strict)
    if function is map:
        return MapIterator(Box("iterator", None), args[0],
                           tuple(get_iterator(tx, arg) for arg in args[1:]))
    if function is filter:
        predicate = None if args[0].is_constant() and args[0].as_constant() is None else args[0]
        return FilterIterator(Box("iterator", None), predicate, get_iterator(tx, args[1]))
    if function is reversed:
        method = tx.lookup_dunder(args[0], "__reversed__")
        if method is not None:
            return get_iterator(tx, method.call(tx, [], {}))
        return SequenceIterator.over(list(reversed(iterate_all(tx, args[0]))))
    if function is itertools.chain:
        return ChainIterator(Box("iterator", [get_iterator(tx, arg) for arg in args]))
    return None
