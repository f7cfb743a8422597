"""The grammar: construct categories and the registry of expression and statement rules.

Stage: generation. Input: rules registered by the modules of `tests.fuzz.constructs`. Output:
weighted choices among the rules that apply at a program point.

An expression rule fills a slot kind ("tensor", "float", "int", "bool", "str"): it gets the
generator, the scope and the slot, and returns an `Expr` or None when it does not apply. A
statement rule returns a list of statements or None. Every rule belongs to a category; the
CLI switches categories off (`--exclude`) or keeps only some (`--only`), and `--weight
category=w` rescales one.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

CATEGORIES = {
    "tensor": "pointwise arithmetic, reductions, matmul, indexing reads, creation",
    "view": "views: view/reshape/transpose/permute/unsqueeze/slicing, read and kept",
    "inplace": "in-place ops: add_/mul_/clamp_/zero_/copy_, x[i] = ..., slice assignment, +=",
    "list": "lists built and mutated in place: append/pop/insert/reverse/del/extend/[i]=",
    "dict": "dicts built and mutated: d[k]=, update, pop, setdefault, get, items()",
    "tuple": "tuples packed, indexed, unpacked, swapped",
    "scalar": "Python int/float/bool arithmetic, len(), shape reads, builtins",
    "control": "if/else on Python values, for over range/lists/dicts/zip/enumerate, while",
    "helper": "top-level helper functions, several calls deep, defaults and keywords",
    "closure": "nested functions (nonlocal reads and writes), lambdas, functools.partial",
    "comprehension": "list/dict comprehensions, generator expressions, filters",
    "generator": "generator functions (yield) consumed by for/list/sum/next",
    "class": "user classes: __init__, properties, methods, class attributes, instances",
    "exception": "try/except/else/finally, raise of builtin and user exception classes",
    "with": "user context managers (classes and contextlib.contextmanager)",
    "grad": "no_grad/enable_grad/set_grad_enabled blocks and calls, detach, requires_grad",
    "print": "print() of strings, numbers, shapes and tensors (a graph break)",
    "item": ".item(), .tolist(), int()/bool() of tensors (a graph break)",
    "branch": "if/while on a tensor's value (a data-dependent graph break)",
    "global": "module globals read, rebound (global) and mutated; changed between calls",
    "namespace": "a types.ModuleType configuration read by attribute; changed between calls",
    "module": "nn.Module subclasses with parameters and buffers, train/eval, called",
    "training": "a model and optimizer (SGD/Adam/AdamW/RMSprop/Adagrad, LR scheduler) held "
                "globally; zero_grad, backward, clip, step in fn; lr/train/requires_grad knobs",
}

# categories a program gets only when asked for (`--only training` or `--weight training=W`):
# the seeds recorded before they existed keep their programs
OPT_IN = frozenset(["training"])


@dataclasses.dataclass
class Rule:
    name: str
    category: str
    weight: float
    build: Callable
    kind: str = ""  # slot kind for expression rules; "" for statements


EXPRESSIONS: dict = {}  # kind -> list[Rule]
STATEMENTS: list = []


def expression(kind: str, category: str, weight: float = 1.0):
    """Register `build(gen, scope, slot, depth) -> Expr | None` for slots of `kind`."""
    def register(build: Callable) -> Callable:
        assert category in CATEGORIES, category
        EXPRESSIONS.setdefault(kind, []).append(
            Rule(build.__name__, category, weight, build, kind))
        return build
    return register


def statement(category: str, weight: float = 1.0):
    """Register `build(gen, scope) -> list[Stmt] | None`."""
    def register(build: Callable) -> Callable:
        assert category in CATEGORIES, category
        STATEMENTS.append(Rule(build.__name__, category, weight, build))
        return build
    return register


@dataclasses.dataclass
class Settings:
    """Which categories are on and their weight multipliers (from the CLI)."""

    enabled: frozenset = frozenset(CATEGORIES) - OPT_IN
    scale: dict = dataclasses.field(default_factory=dict)
    min_statements: int = 5
    max_statements: int = 25
    size_sweep: bool = False  # calls change the batch size N every time, 1 and primes too

    def weight(self, rule: Rule) -> float:
        if rule.category not in self.enabled:
            return 0.0
        return rule.weight * self.scale.get(rule.category, 1.0)

    def on(self, category: str) -> bool:
        return category in self.enabled

    @classmethod
    def from_options(cls, only=(), exclude=(), weights=(), **sizes) -> "Settings":
        for category in [*only, *exclude, *(pair.split("=")[0] for pair in weights)]:
            if category not in CATEGORIES:
                raise ValueError(f"unknown construct category {category!r}; known: "
                                 f"{', '.join(CATEGORIES)}")
        weighted_on = {pair.split("=")[0] for pair in weights}
        enabled = set(only) if only else set(CATEGORIES) - (OPT_IN - weighted_on)
        enabled -= set(exclude)
        # the tensor category is the backbone every program needs
        enabled.add("tensor")
        scale = {pair.split("=")[0]: float(pair.split("=")[1]) for pair in weights}
        return cls(frozenset(enabled), scale, **sizes)


def weighted(rng, rules: list, settings: Settings):
    """`rules` in a random order, each drawn with probability proportional to its weight
    (rules of weight 0 left out): the caller tries them in turn until one applies."""
    pool = [(rule, settings.weight(rule)) for rule in rules]
    pool = [(rule, weight) for rule, weight in pool if weight > 0]
    while pool:
        total = sum(weight for _, weight in pool)
        point = rng.random() * total
        for index, (rule, weight) in enumerate(pool):
            point -= weight
            if point <= 0 or index == len(pool) - 1:
                pool.pop(index)
                yield rule
                break
