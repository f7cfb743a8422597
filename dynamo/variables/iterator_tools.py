"""`itertools` on variables: lazy iterators for the infinite or consuming helpers (`count`,
`repeat`, `islice`, `takewhile`, `dropwhile`, `starmap`, `chain.from_iterable`), finite
results for the combinatoric ones (`product`, `combinations`, `permutations`, `pairwise`,
`accumulate`, `zip_longest`, `groupby`).

Input: an `itertools` function and variable arguments. Output: an `IteratorVariable`.
"""
from __future__ import annotations

import itertools
from typing import Optional

from dynamo.variables.side_effects import Box
from dynamo.variables.base import Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import TupleVariable
from dynamo.variables.iterators import (ChainIterator, IteratorVariable, SequenceIterator,
                                        get_iterator)
from dynamo.variables.operators import binary, compare


@variable
class CountIterator(IteratorVariable):
    """`itertools.count(start, step)`; `box.contents` is the next value (a variable)."""

    step: Variable = None

    def next_item(self, tx) -> Optional[Variable]:
        current = self.box.contents
        self.box.contents = binary(tx, "+", current, self.step)
        return current


@variable
class RepeatIterator(IteratorVariable):
    """`itertools.repeat(value[, times])`; `box.contents` is the count left (None: forever)."""

    value: Variable = None

    def next_item(self, tx) -> Optional[Variable]:
        left = self.box.contents
        if left is not None:
            if left <= 0:
                return None
            self.box.contents = left - 1
        return self.value


@variable
class SliceIterator(IteratorVariable):
    """`itertools.islice`: `box.contents` is [next index to yield, index of the source]."""

    source_iterator: IteratorVariable = None
    stop: Optional[int] = None
    step: int = 1

    def next_item(self, tx) -> Optional[Variable]:
        wanted, position = self.box.contents
        if self.stop is not None and wanted >= self.stop:
            return None
        while position < wanted:
            if self.source_iterator.next_item(tx) is None:
                self.box.contents = [wanted, position]
                return None
            position += 1
        item = self.source_iterator.next_item(tx)
        if item is None:
            return None
        self.box.contents = [wanted + self.step, position + 1]
        return item


@variable
class PredicateIterator(IteratorVariable):
    """`takewhile` / `dropwhile`: `box.contents` says whether the switch has happened."""

    predicate: Variable = None
    source_iterator: IteratorVariable = None
    take: bool = True

    def next_item(self, tx) -> Optional[Variable]:
        while True:
            item = self.source_iterator.next_item(tx)
            if item is None or (self.take and self.box.contents):
                return None
            if self.box.contents:
                return item
            holds = tx.truth(self.predicate.call(tx, [item], {}))
            if self.take:
                if holds:
                    return item
                self.box.contents = True
                return None
            if not holds:
                self.box.contents = True
                return item


@variable
class StarmapIterator(IteratorVariable):
    function: Variable = None
    source_iterator: IteratorVariable = None

    def next_item(self, tx) -> Optional[Variable]:
        item = self.source_iterator.next_item(tx)
        if item is None:
            return None
        return self.function.call(tx, tx.iterate(item), {})


def itertools_iterator(tx, function, args: list, kwargs: dict) -> Optional[IteratorVariable]:
    """The iterator for `function(*args, **kwargs)`, or None when `function` is not handled."""
    lazy = _LAZY.get(function)
    if lazy is not None:
        return lazy(tx, *args, **kwargs)
    finite = _FINITE.get(function)
    if finite is not None:
        return SequenceIterator.over(finite(tx, *args, **kwargs))
    return None


def _count(tx, start=None, step=None):
    return CountIterator(Box("iterator", start or ConstantVariable(0)),
                         step or ConstantVariable(1))


def _repeat(tx, value, times=None):
    left = None if times is None else tx.constant(times, "repeat's count")
    return RepeatIterator(Box("iterator", left), value)


def _islice(tx, iterable, *bounds):
    values = [None if bound is None else tx.constant(bound, "islice's bounds")
              for bound in bounds]
    start, stop, step = slice(*values).start or 0, slice(*values).stop, slice(*values).step or 1
    return SliceIterator(Box("iterator", [start, 0]), get_iterator(tx, iterable), stop, step)


def _takewhile(tx, predicate, iterable):
    return PredicateIterator(Box("iterator", False), predicate, get_iterator(tx, iterable), True)


def _dropwhile(tx, predicate, iterable):
    return PredicateIterator(Box("iterator", False), predicate, get_iterator(tx, iterable),
                             False)


def _starmap(tx, function, iterable):
    return StarmapIterator(Box("iterator", None), function, get_iterator(tx, iterable))


def _chain_from_iterable(tx, iterable):
    return ChainIterator(Box("iterator", [get_iterator(tx, item)
                                          for item in tx.iterate(iterable)]))


def _combinatoric(real_function):
    def finite(tx, iterable, r=None):
        pool = tx.iterate(iterable)
        size = None if r is None else tx.constant(r, f"{real_function.__name__}'s r")
        arguments = (range(len(pool)),) if size is None else (range(len(pool)), size)
        return [TupleVariable(tuple(pool[i] for i in chosen))
                for chosen in real_function(*arguments)]
    return finite


def _pairwise(tx, iterable):
    items = tx.iterate(iterable)
    return [TupleVariable((a, b)) for a, b in zip(items, items[1:])]


def _accumulate(tx, iterable, function=None, *, initial=None):
    items = tx.iterate(iterable)
    if initial is not None and not (initial.is_constant() and initial.as_constant() is None):
        items = [initial, *items]
    result = []
    for item in items:
        if not result:
            result.append(item)
        elif function is None or (function.is_constant() and function.as_constant() is None):
            result.append(binary(tx, "+", result[-1], item))
        else:
            result.append(function.call(tx, [result[-1], item], {}))
    return result


def _zip_longest(tx, *iterables, fillvalue=None):
    pools = [tx.iterate(iterable) for iterable in iterables]
    fill = fillvalue or ConstantVariable(None)
    length = max((len(pool) for pool in pools), default=0)
    return [TupleVariable(tuple(pool[index] if index < len(pool) else fill for pool in pools))
            for index in range(length)]


def _groupby(tx, iterable, key=None):
    items = tx.iterate(iterable)
    groups: list = []
    for item in items:
        group_key = item if key is None else key.call(tx, [item], {})
        if groups and tx.truth(compare(tx, "==", groups[-1][0], group_key)):
            groups[-1][1].append(item)
        else:
            groups.append((group_key, [item]))
    return [TupleVariable((group_key, SequenceIterator.over(members)))
            for group_key, members in groups]


def _product(tx, *iterables, repeat=None):
    pools = [tx.iterate(iterable) for iterable in iterables]
    times = 1 if repeat is None else tx.constant(repeat, "product's repeat")
    pools = pools * times
    return [TupleVariable(tuple(pool[index] for pool, index in zip(pools, chosen)))
            for chosen in itertools.product(*(range(len(pool)) for pool in pools))]


_LAZY = {itertools.count: _count, itertools.repeat: _repeat, itertools.islice: _islice,
         itertools.takewhile: _takewhile, itertools.dropwhile: _dropwhile,
         itertools.starmap: _starmap, itertools.chain.from_iterable: _chain_from_iterable}
_FINITE = {itertools.product: _product, itertools.pairwise: _pairwise,
           itertools.accumulate: _accumulate, itertools.zip_longest: _zip_longest,
           itertools.groupby: _groupby,
           itertools.combinations: _combinatoric(itertools.combinations),
           itertools.permutations: _combinatoric(itertools.permutations),
           itertools.combinations_with_replacement:
               _combinatoric(itertools.combinations_with_replacement)}
HANDLED = tuple(_LAZY) + tuple(_FINITE)
