"""The program generator: a seed in, a valid, deterministic Python + torch program out.

Stage: generation. Input: a seed and `grammar.Settings`. Output: a `tree.Program` (render it
with `.source()`).

The generator owns what is global to one program (the random stream, fresh names, the classes,
helpers and globals made so far, the knobs the runner turns between calls, the statement
budget) and the two recursive entry points every construct uses: `expr` fills a slot,
`statements` fills a block. Constructs live in `tests.fuzz.constructs`, one module per family.
"""
from __future__ import annotations

import collections
import random
from typing import Optional

from tests.fuzz import grammar, slots
from tests.fuzz.scope import FuncCtx, Scope, Var
from tests.fuzz.slots import ScalarT, TensorT
from tests.fuzz.tree import Expr, Program, Stmt, lit, name, simple

GENERATOR_VERSION = 1  # bump when the programs of a seed change


class Dead(Exception):
    """A construct cannot be built here; the caller tries another one."""


class Generator:
    def __init__(self, seed: int, settings: Optional[grammar.Settings] = None):
        self.seed = seed
        self.rng = random.Random(seed)
        self.settings = settings or grammar.Settings()
        self.top: list = []  # classes, helpers, globals: in the order they were made
        self.counts = collections.Counter()
        self.classes: dict = {}  # name -> constructs.objects.ClassInfo
        self.exception_info: dict = {}  # name -> constructs.objects.ExcInfo
        self.contexts: list = []  # user context-manager classes
        self.suppressing: set = set()  # those whose __exit__ swallows ValueError
        self.constructing: set = set()  # classes whose bodies are being generated
        self.namespaces: dict = {}  # name -> {attribute: slot}
        self.globals: dict = {}  # name -> (kind, Var): globals are read through their rules
        self.modules: dict = {}  # class name -> ModuleInfo
        self.knobs: list = []  # (description, function(rng) -> [(line, names)]) between calls
        self.trainers: list = []  # constructs.training.TrainerInfo
        self.training_knobs: list = []  # the trainers' knobs, turned more often
        self.global_decls: set = set()  # names the inputs harness assigns as globals
        self.features: set = set()
        self.dtype_fixed = False  # something multiplies inputs with float32-only tensors
        self.budget = 0
        self.width = 3  # the program's feature size M
        self.grad_params: set = set()  # tensor parameters that require grad in some calls
        self.local_grad_roots: set = set()  # local leaves made to require grad
        self.strided: set = set()  # tensor parameters some calls pass transposed
        self.tagged: set = set()  # tensor parameters some calls give a `tag` attribute

    def inplace_ok(self, scope: Scope, expr) -> bool:
        """Whether an in-place op may write `expr`'s tensor: it views no leaf that may require
        grad (eager raises for those, outside no_grad)."""
        roots = scope.roots(expr)
        return not roots & (self.grad_params | self.local_grad_roots)

    # -- names and randomness ----------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        self.counts[prefix] += 1
        return f"{prefix}{self.counts[prefix]}"

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def choice(self, items):
        return self.rng.choice(list(items))

    def on(self, category: str) -> bool:
        return self.settings.on(category)

    def use(self, feature: str) -> None:
        self.features.add(feature)

    def add_top(self, stmt: Stmt) -> None:
        self.top.append(stmt)

    # -- expressions -------------------------------------------------------------------------
    def expr(self, scope: Scope, slot, depth: int = 2) -> Expr:
        """An expression filling `slot` from what `scope` holds (raises Dead if none can)."""
        kind = _kind(slot)
        for rule in grammar.weighted(self.rng, grammar.EXPRESSIONS.get(kind, []),
                                     self.settings):
            try:
                found = rule.build(self, scope, slot, depth)
            except Dead:
                continue
            if found is not None:
                if rule.category != "tensor":
                    self.use(rule.category)
                self.use("expr:" + rule.name)
                return found
        raise Dead(f"no expression for {slot}")

    def tensor(self, scope: Scope, shape, depth: int = 2) -> Expr:
        return self.expr(scope, TensorT(tuple(shape)), depth)

    def leaf(self, scope: Scope, slot) -> Optional[Expr]:
        var = scope.pick(self.rng, lambda v: slots.same_slot(v.slot, slot))
        return None if var is None else name(var.name, var.slot)

    def shape_of_choice(self, scope: Scope):
        """A float tensor shape to compute: one held in scope (most often) or one derived
        from it (reduced, transposed)."""
        held = [var.slot.shape for var in scope.float_tensors()]
        if not held:
            raise Dead("no tensor in scope")
        shape = self.choice(held)
        if self.chance(0.2) and len(shape) >= 1:
            shape = slots.reduce_shape(shape, self.rng.randrange(len(shape)))
        elif self.chance(0.1) and len(shape) == 2:
            shape = (shape[1], shape[0])
        return shape

    # -- statements --------------------------------------------------------------------------
    def statements(self, scope: Scope, count: int) -> list:
        """Up to `count` statements (fewer when the program's budget runs out)."""
        body = []
        for _ in range(count):
            if self.budget <= 0:
                break
            body.extend(self.statement(scope))
        return body

    def statement(self, scope: Scope) -> list:
        budget = self.budget
        for rule in grammar.weighted(self.rng, grammar.STATEMENTS, self.settings):
            saved = scope.child()
            self.budget = budget - 1  # reserved first: nested blocks see what is left
            try:
                built = rule.build(self, scope)
            except Dead:
                built = None
            if built is None:
                _restore(scope, saved)
                continue
            self.use(rule.category)
            self.use("stmt:" + rule.name)
            for stmt in built:
                stmt.category = stmt.category or rule.category
            return built
        self.budget = budget - 1
        return []

    def block(self, scope: Scope, count: int, loop: bool = False, **flags):
        """(statements, the block's scope) for a nested block; at least one statement when the
        budget allows. The caller merges the block's scope back."""
        inner = scope.child()
        if loop:
            inner.loop_depth += 1
        for key, value in flags.items():
            setattr(inner, key, value)
        body = self.statements(inner, max(1, count))
        return body, inner

    def small_count(self) -> int:
        return self.rng.randint(1, 3)

    # -- functions ---------------------------------------------------------------------------
    def function_body(self, scope: Scope, count: int, result_slot) -> tuple:
        """(body statements, return expression or None) of a function being generated."""
        body = self.statements(scope, count)
        result = None if result_slot is None else self.expr(scope, result_slot, 2)
        return body, result

    def declarations(self, func: FuncCtx) -> list:
        decls = []
        if func.globals_written:
            names = sorted(func.globals_written)
            decls.append(simple("global " + ", ".join("{%d}" % i for i in range(len(names))),
                                *(name(n) for n in names), pinned=True))
        if func.nonlocals:
            names = sorted(func.nonlocals)
            decls.append(simple("nonlocal " + ", ".join("{%d}" % i for i in range(len(names))),
                                *(name(n) for n in names), pinned=True))
        return decls

    # -- the whole program -------------------------------------------------------------------
    def generate(self) -> Program:
        from tests.fuzz import constructs, inputs  # noqa: F401 (registers the rules)
        settings = self.settings
        self.budget = self.rng.randint(settings.min_statements, settings.max_statements)
        self.width = self.rng.randint(2, 4)
        entry = FuncCtx("entry", "fn")
        scope = Scope(entry)
        params = inputs.make_params(self, scope)
        body = []
        while self.budget > 0:
            before = self.budget
            body.extend(self.statements(scope, self.budget))
            if self.budget == before:
                break
        result = inputs.make_result(self, scope)
        fn_body = self.declarations(entry) + body
        fn_body.append(simple("return {0}", result, pinned=True))
        signature = ", ".join(var.name for var in params)
        fn = Stmt([_def_clause(f"def fn({signature}):", fn_body)], frozenset(["fn"]),
                  "entry", pinned=True)
        calls = inputs.make_calls(self, params)
        features = set(self.features)
        return Program(self.seed, self.top + [fn], [var.name for var in params], calls,
                       features, sorted(self.global_decls))


def _def_clause(head: str, body: list):
    from tests.fuzz.tree import Clause
    return Clause(head.replace("{", "{{").replace("}", "}}"), [], body)


def _kind(slot) -> str:
    if isinstance(slot, TensorT):
        return "tensor"
    if isinstance(slot, ScalarT):
        return slot.kind
    return type(slot).__name__


def _restore(scope: Scope, saved: Scope) -> None:
    """Undo a construct that failed halfway (it may have changed container states)."""
    scope.vars = saved.vars


def generate(seed: int, settings: Optional[grammar.Settings] = None) -> Program:
    """The program of `seed` (the same seed and settings give the same program)."""
    return Generator(seed, settings).generate()


__all__ = ["Dead", "Generator", "Var", "generate", "lit", "GENERATOR_VERSION"]
