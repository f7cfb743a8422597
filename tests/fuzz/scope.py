"""What the generator knows at a point of the program: the variables in scope and their state.

Stage: generation. Input: the statements generated so far (through the constructs that add and
mutate variables). Output: `Scope` queries (a variable of a slot, a list known to hold at least
k items) that keep each new statement valid.

A list or dict variable points to a shared state object (`ListState`, `DictState`), so that two
names bound to one list (`b = a`) see each other's mutations. Blocks work on a copy of the
scope (sharing preserved) and merge back conservatively: a list's known minimum length after
an `if` is the smaller of the two branches'. Inside a loop body nothing may shrink a container
that outlives the loop (the next iteration would read past the end), and a container being
iterated is frozen.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Callable, Optional

from tests.fuzz.slots import DictT, ListT, ScalarT, TensorT


@dataclasses.dataclass
class ListState:
    lo: int  # the list holds at least this many items here
    roots: set  # parameters whose tensors may be elements (in-place safety)
    frozen: bool = False  # being iterated: no length change
    born_in_loop: int = 0  # the loop depth at which the list was created


@dataclasses.dataclass
class DictState:
    keys: set  # keys certainly present
    maybe: set  # keys possibly present (cannot be read with d[k], may be popped with default)
    roots: set
    frozen: bool = False
    born_in_loop: int = 0


@dataclasses.dataclass
class Var:
    """A name bound in the generated program (a local, a parameter, a global, `self.a`)."""

    name: str
    slot: object
    roots: frozenset = frozenset()  # parameters (or local grad leaves) whose storage it may view
    state: object = None  # ListState / DictState for containers
    contiguous: bool = True
    rebindable: bool = True  # plain names may be rebound; loop variables may not
    is_global: bool = False
    grad_leaf: bool = False  # a leaf that may require grad: no in-place ops on it
    owner: str = ""  # the function that binds it (only the owner rebinds it)


@dataclasses.dataclass
class FuncCtx:
    """The function being generated: kind ("entry", "helper", "closure", "method", "init",
    "forward", "generator", "property"), names to declare global/nonlocal, depth of helper
    nesting."""

    kind: str
    name: str
    depth: int = 0
    globals_written: set = dataclasses.field(default_factory=set)
    nonlocals: set = dataclasses.field(default_factory=set)
    outer: Optional["Scope"] = None  # the enclosing function's scope, for closures
    cls: Optional[str] = None  # for methods: the class generated


class Scope:
    """Variables visible at a program point, plus where that point is (loops, try, with)."""

    def __init__(self, func: FuncCtx):
        self.func = func
        self.vars: dict = {}
        self.loop_depth = 0
        self.in_try = False
        self.in_with = False
        self.in_generator_loop = False
        self.may_raise = True  # False in constructors the inputs or module loading call

    # -- queries ---------------------------------------------------------------------------
    def all(self, predicate: Callable = lambda var: True) -> list:
        return [var for var in self.vars.values() if predicate(var)]

    def pick(self, rng, predicate: Callable = lambda var: True) -> Optional[Var]:
        found = self.all(predicate)
        return rng.choice(found) if found else None

    def tensors(self, predicate: Callable = lambda var: True) -> list:
        return self.all(lambda var: isinstance(var.slot, TensorT) and predicate(var))

    def float_tensors(self) -> list:
        return self.tensors(lambda var: var.slot.dtype == "float")

    def lists(self, min_len: int = 0, mutable: bool = False) -> list:
        return self.all(lambda var: isinstance(var.slot, ListT) and var.state.lo >= min_len
                        and (not mutable or self.may_resize(var)))

    def dicts(self, mutable: bool = False) -> list:
        return self.all(lambda var: isinstance(var.slot, DictT)
                        and (not mutable or self.may_resize(var)))

    def may_resize(self, var: Var) -> bool:
        """Whether a statement here may change the container's size: not while it is being
        iterated, and inside a loop only if the container was made in that loop."""
        state = var.state
        return not state.frozen and state.born_in_loop >= self.loop_depth

    def may_shrink(self, var: Var) -> bool:
        return self.may_resize(var)

    # -- changes ---------------------------------------------------------------------------
    def add(self, var: Var) -> Var:
        if not var.owner:
            var.owner = self.func.name
        self.vars[var.name] = var
        return var

    def owned(self, var: Var) -> bool:
        """Whether assigning the name here rebinds `var` (not a new local shadowing it)."""
        return var.owner == self.func.name and var.rebindable and not var.is_global

    def roots(self, expr) -> set:
        """The parameters (and local grad leaves) whose storage `expr`'s value may share."""
        while expr.view and expr.args:
            expr = expr.args[0]
        if expr.args or not expr.names:
            return set()
        var = self.vars.get(expr.fmt)
        if var is None:
            return set()
        found = set(var.roots)
        if var.state is not None:
            found |= var.state.roots
        return found

    def contiguous(self, expr) -> bool:
        if not expr.args and expr.fmt in self.vars:
            return self.vars[expr.fmt].contiguous
        return expr.contiguous

    def new_list_state(self, lo: int, roots=()) -> ListState:
        return ListState(lo, set(roots), born_in_loop=self.loop_depth)

    def new_dict_state(self, keys, roots=()) -> DictState:
        return DictState(set(keys), set(), set(roots), born_in_loop=self.loop_depth)

    def child(self) -> "Scope":
        """A copy for a nested block; container states are copied with sharing preserved."""
        other = Scope(self.func)
        other.vars = copy.deepcopy(self.vars)
        other.loop_depth = self.loop_depth
        other.in_try = self.in_try
        other.in_with = self.in_with
        other.in_generator_loop = self.in_generator_loop
        other.may_raise = self.may_raise
        return other

    def merge(self, *children: "Scope", skipped: bool = True) -> None:
        """After a block whose paths are `children` (plus, if `skipped`, the path that runs
        none of them): keep what holds on every path."""
        paths = list(children) + ([self.child()] if skipped else [])
        for name, var in self.vars.items():
            states = [path.vars[name].state for path in paths if name in path.vars]
            if isinstance(var.state, ListState):
                var.state.lo = min(state.lo for state in states)
                for state in states:
                    var.state.roots |= state.roots
            elif isinstance(var.state, DictState):
                present = set.intersection(*(state.keys for state in states))
                seen = set.union(*(state.keys | state.maybe for state in states))
                var.state.keys = present
                var.state.maybe = seen - present
                for state in states:
                    var.state.roots |= state.roots
            ints = [path.vars[name].slot for path in paths if name in path.vars]
            if isinstance(var.slot, ScalarT) and var.slot.kind == "int" and \
                    all(isinstance(slot, ScalarT) and slot.kind == "int" for slot in ints):
                var.slot = ScalarT("int", min(slot.lo for slot in ints),
                                   max(slot.hi for slot in ints))
            for path in paths:
                other = path.vars.get(name)
                if other is not None and other.slot == var.slot:
                    var.contiguous = var.contiguous and other.contiguous
                    var.grad_leaf = var.grad_leaf or other.grad_leaf
                    var.roots = var.roots | other.roots
