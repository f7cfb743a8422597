"""Control flow: branches and loops on Python values and on tensor values, try/except/finally
and raise, `with` blocks (user context managers and grad-mode managers).

Stage: generation (constructs). Input: a scope. Output: compound statements whose bodies the
generator fills recursively; the scope after the statement keeps what holds on every path.

Loops always terminate: `while` loops count with a pinned counter the minimizer never deletes,
`for` loops run over ranges of at most 3 or over containers frozen during the loop.
"""
from __future__ import annotations

from tests.fuzz import slots
from tests.fuzz.generator import Dead
from tests.fuzz.grammar import statement
from tests.fuzz.scope import Var
from tests.fuzz.slots import BOOL, FLOAT, ListT, ScalarT, TensorT, int_slot
from tests.fuzz.tree import Clause, Stmt, compound, lit, name, op, simple

BUILTIN_ERRORS = ["ValueError", "RuntimeError", "KeyError", "IndexError", "TypeError",
                  "ZeroDivisionError"]


def _if(gen, scope, condition, category):
    body, then = gen.block(scope, gen.small_count())
    clauses = [("if {0}:", [condition], body)]
    if gen.chance(0.5):
        other, orelse = gen.block(scope, gen.small_count())
        clauses.append(("else:", [], other))
        scope.merge(then, orelse, skipped=False)
    else:
        scope.merge(then)
    return [compound(clauses)]


@statement("control", 1.5)
def if_python(gen, scope):
    return _if(gen, scope, gen.expr(scope, BOOL, 2), "control")


@statement("branch", 2.0)
def if_tensor(gen, scope):
    var = scope.pick(gen.rng, lambda v: slots.is_float_tensor(v.slot))
    if var is None:
        return None
    # Sums compare with a bound no sum of the programs' values lands on: a compiled sum adds
    # in another order, and `abs().sum() > 2` at a sum of 2.0000002 eagerly, 2.0 compiled,
    # took the other branch (inductor seed 4314; torch.compile sums as framejit does).
    fmt = gen.choice(["{0}.sum() > 0.0137", "({0} > 0).any()", "{0}.max() > 0.5",
                      "{0}.mean() < -0.0137", "{0}.abs().sum() > 2.0137", "({0} < 1).all()"])
    if var.slot.shape == () and gen.chance(0.5):
        fmt = "{0} > 0"
    return _if(gen, scope, op(fmt, BOOL, name(var.name, var.slot)), "branch")


@statement("branch", 0.6)
def while_tensor(gen, scope):
    var = scope.pick(gen.rng, lambda v: slots.is_float_tensor(v.slot) and scope.owned(v))
    if var is None:
        return None
    counter = gen.fresh("k")
    this = name(var.name, var.slot)
    inner = scope.child()
    inner.loop_depth += 1
    body = gen.statements(inner, gen.small_count() - 1)
    scope.merge(inner)
    shrink = simple("{0} = {0} * 0.5", this, pinned=True)
    step = simple(f"{counter} += 1", name(counter), pinned=True)
    scope.add(Var(counter, int_slot(0, 3), rebindable=False))
    loop = compound([(f"while {{0}}.abs().sum() > 1.0137 and {counter} < 3:", [this],
                      body + [shrink, step])])
    start = simple(f"{counter} = 0", defs=[counter])
    return [start, loop]


@statement("control", 1.5)
def for_range(gen, scope):
    index = gen.fresh("i")
    bound = gen.expr(scope, int_slot(0, 3), 1)
    inner = scope.child()
    inner.loop_depth += 1
    inner.add(Var(index, int_slot(0, 2), rebindable=False))
    body = gen.statements(inner, gen.small_count())
    body = _maybe_break(gen, inner, body, index)
    scope.merge(inner)
    head = gen.choice(["for %s in range({0}):", "for %s in range(1, {0} + 1):"]) % index
    return [compound([(head, [bound], body)], defs=[index])]


def _maybe_break(gen, scope, body, index):
    if gen.chance(0.2) and body:
        word = gen.choice(["break", "continue"])
        stop = compound([("if {0} == 1:", [name(index)], [simple(word)])])
        body.insert(gen.rng.randrange(len(body) + 1), stop)
    return body


@statement("control", 1.2)
def for_container(gen, scope):
    lists = [var for var in scope.lists() if isinstance(var.slot.elem, TensorT)]
    dicts = [var for var in scope.dicts() if isinstance(var.slot.value, TensorT)]
    if not lists and not dicts:
        return None
    inner = scope.child()
    inner.loop_depth += 1
    before = set(inner.vars)
    if lists and (not dicts or gen.chance(0.7)):
        source = gen.choice(lists)
        inner.vars[source.name].state.frozen = True
        item = gen.fresh("t")
        inner.add(Var(item, source.slot.elem, roots=frozenset(source.state.roots),
                      rebindable=False))
        kind = gen.choice(["plain", "enumerate", "zip", "reversed"])
        if kind == "enumerate":
            index = gen.fresh("i")
            inner.add(Var(index, int_slot(0, 99), rebindable=False))
            head, exprs = f"for {index}, {item} in enumerate({{0}}):", [name(source.name)]
        elif kind == "zip":
            other = gen.choice(lists)
            inner.vars[other.name].state.frozen = True
            second = gen.fresh("t")
            inner.add(Var(second, other.slot.elem, roots=frozenset(other.state.roots),
                          rebindable=False))
            head = f"for {item}, {second} in zip({{0}}, {{1}}):"
            exprs = [name(source.name), name(other.name)]
        elif kind == "reversed":
            head, exprs = f"for {item} in reversed({{0}}):", [name(source.name)]
        else:
            head, exprs = f"for {item} in {{0}}:", [name(source.name)]
    else:
        source = gen.choice(dicts)
        inner.vars[source.name].state.frozen = True
        key, value = gen.fresh("key"), gen.fresh("t")
        inner.add(Var(key, slots.STR, rebindable=False))
        inner.add(Var(value, source.slot.value, roots=frozenset(source.state.roots),
                      rebindable=False))
        head = gen.choice([f"for {key}, {value} in {{0}}.items():",
                           f"for {key}, {value} in sorted({{0}}.items()):"])
        exprs = [name(source.name)]
    bound = set(inner.vars) - before
    body = gen.statements(inner, gen.small_count())
    scope.merge(inner)
    return [compound([(head, exprs, body)], defs=bound)]


@statement("control", 0.6)
def while_drain(gen, scope):
    """`while len(l) > 1: t = l.pop(); ...`: the pop is pinned, so the loop ends."""
    lists = [var for var in scope.lists(0, mutable=True) if isinstance(var.slot.elem, TensorT)]
    if not lists:
        return None
    source = gen.choice(lists)
    keep = gen.choice([0, 1])
    item = gen.fresh("t")
    inner = scope.child()
    inner.loop_depth += 1
    inner.vars[source.name].state.frozen = True
    inner.add(Var(item, source.slot.elem, roots=frozenset(source.state.roots)))
    pop = simple(f"{item} = {{0}}.pop()", name(source.name), defs=[item], pinned=True)
    body = [pop] + gen.statements(inner, gen.small_count())
    scope.merge(inner)
    source.state.lo = min(source.state.lo, keep)
    return [compound([(f"while len({{0}}) > {keep}:", [name(source.name)], body)])]


# -- exceptions ---------------------------------------------------------------------------------
def raise_statement(gen, scope, kinds=None):
    """`raise E(...)` for a builtin or user exception class; returns (statement, class
    name)."""
    from tests.fuzz.constructs import objects
    options = list(kinds or BUILTIN_ERRORS)
    if gen.on("class") and gen.chance(0.5):
        options.append(objects.exception_class(gen).name)
    kind = gen.choice(options)
    info = gen.exception_info.get(kind)
    message = lit(repr(gen.choice(["bad value", "too large", "stop", "no key"])))
    if info is not None and info.code:
        return simple("raise {0}({1}, {2})", name(kind), message,
                      gen.expr(scope, int_slot(-9, 9), 1)), kind
    if gen.chance(0.3):
        detail = gen.expr(scope, gen.choice([FLOAT, int_slot(-99, 99)]), 1)
        # triple quotes: before 3.12 an f-string's expression may not hold its own quote
        return simple("raise {0}(f'''%s {{{1}}}''')" % message.fmt[1:-1], name(kind),
                      detail), kind
    return simple("raise {0}({1})", name(kind), message), kind


@statement("exception", 0.7)
def raise_when(gen, scope):
    if not scope.may_raise:
        return None
    condition = gen.expr(scope, BOOL, 2)
    stmt, _ = raise_statement(gen, scope)
    if gen.chance(0.2):
        return [simple("assert {0}, {1}", condition, lit(repr("check failed")))]
    return [compound([("if {0}:", [condition], [stmt])])]


IMPLICIT = ['{0}[9]', 'int("x")', '{{}}["missing"]', "1 / 0"]


@statement("exception", 1.5)
def try_except(gen, scope):
    body, after_body = gen.block(scope, gen.small_count(), loop=True, in_try=True)
    caught = gen.choice(BUILTIN_ERRORS)
    if gen.chance(0.7):
        raised, caught = _raise_in(gen, scope.child(), body)  # placed anywhere in body:
        # it may only use what was bound before the try
        if gen.chance(0.15) and scope.may_raise:  # the wrong class: the exception escapes
            caught = gen.choice(BUILTIN_ERRORS)
    handler_scope = scope.child()
    handler_scope.merge(after_body)
    error = gen.fresh("e")
    handler, after_handler = gen.block(handler_scope, gen.small_count())
    caught_expr = name(caught) if caught in gen.exception_info else lit(caught)
    head = f"except {{0}} as {error}:"
    if gen.chance(0.3):
        head = f"except ({{0}}, LookupError) as {error}:"
    if gen.on("print"):
        handler.insert(0, simple("print('caught', type({0}).__name__, {0})", name(error)))
    clauses = [Clause("try:", [], body), Clause(head, [caught_expr], handler)]
    scope.merge(after_body, after_handler, skipped=False)
    if gen.chance(0.3):
        extra, after_else = gen.block(scope, 1)
        clauses.append(Clause("else:", [], extra))
        scope.merge(after_else)
    if gen.chance(0.4):
        final, after_final = gen.block(scope, gen.small_count())
        clauses.append(Clause("finally:", [], final))
        scope.merge(after_final, skipped=False)
    return [Stmt(clauses, frozenset([error]))]


def _raise_in(gen, scope, body):
    """Put a raise (conditional, or an implicit error) into `body`; (name raised, name to
    catch)."""
    if gen.chance(0.25):
        lists = [var for var in scope.lists()]
        fmt = gen.choice(IMPLICIT if lists else IMPLICIT[1:])
        caught = {'{0}[9]': "IndexError", 'int("x")': "ValueError",
                  '{{}}["missing"]': "KeyError", "1 / 0": "ZeroDivisionError"}[fmt]
        args = [name(gen.choice(lists).name)] if fmt == '{0}[9]' else []
        guard = gen.expr(scope, BOOL, 1)
        stmt = compound([("if {0}:", [guard], [simple("_ = " + fmt.replace("{0}", "{1}"),
                                                      guard, *args)])])
        body.insert(gen.rng.randrange(len(body) + 1), stmt)
        return caught, caught
    stmt, kind = raise_statement(gen, scope)
    if gen.chance(0.6):
        stmt = compound([("if {0}:", [gen.expr(scope, BOOL, 1)], [stmt])])
    body.insert(gen.rng.randrange(len(body) + 1), stmt)
    info = gen.exception_info.get(kind)
    return kind, (info.base if info is not None and gen.chance(0.3) else kind)


# -- with -------------------------------------------------------------------------------------
GRAD_MANAGERS = ["torch.no_grad()", "torch.enable_grad()", "torch.set_grad_enabled({0})"]


@statement("grad", 1.5)
def with_grad(gen, scope):
    manager = gen.choice(GRAD_MANAGERS)
    exprs = [gen.expr(scope, BOOL, 1)] if "{0}" in manager else []
    if gen.on("with") and gen.chance(0.2):
        from tests.fuzz.constructs import objects
        ctx = objects.context_class(gen)
        manager += ", %s(%r)" % ("{%d}" % len(exprs), gen.choice(["a", "b"]))
        exprs.append(name(ctx))
    body, inner = gen.block(scope, gen.small_count(), in_with=True)
    scope.merge(inner, skipped=False)
    return [compound([(f"with {manager}:", exprs, body)])]


@statement("grad", 0.6)
def set_grad_call(gen, scope):
    """`torch.set_grad_enabled(b)` as a call: grad mode changes until the next call (and
    sometimes after the function returns)."""
    saved = gen.fresh("g")
    body, inner = gen.block(scope, gen.small_count())
    scope.merge(inner, skipped=False)
    flag = gen.expr(scope, BOOL, 1)
    out = [simple(f"{saved} = torch.is_grad_enabled()", defs=[saved]),
           simple("torch.set_grad_enabled({0})", flag)] + body
    if gen.chance(0.8):
        out.append(simple("torch.set_grad_enabled({0})", name(saved)))
    return out


@statement("grad", 0.8)
def grad_leaf(gen, scope):
    var = scope.pick(gen.rng, lambda v: slots.is_float_tensor(v.slot))
    if var is None:
        return None
    leaf = gen.fresh("g")
    gen.local_grad_roots.add(leaf)
    scope.add(Var(leaf, var.slot, roots=frozenset([leaf]), grad_leaf=True))
    fmt = gen.choice(["{0}.detach().clone().requires_grad_(True)",
                      "{0}.detach().clone().requires_grad_()",
                      "torch.tensor({0}.tolist(), requires_grad=True)" if var.slot.shape
                      else "{0}.detach().clone().requires_grad_()"])
    return [simple(f"{leaf} = {fmt}", name(var.name, var.slot), defs=[leaf])]


@statement("grad", 0.8)
def no_grad_update(gen, scope):
    """An optimizer-like update of a parameter or input under no_grad (allowed on leaves that
    require grad)."""
    targets = scope.all(lambda v: slots.is_float_tensor(v.slot) and
                        (v.name in gen.grad_params or v.grad_leaf) and v.owner == "fn")
    if not targets:
        return None
    target = gen.choice(targets)
    value = gen.expr(scope, target.slot, 1)
    value = op("{0}.detach().clone()", target.slot, value)
    fmt = gen.choice(["{0}.add_({1}, alpha=-0.1)", "{0}.mul_(0.5)", "{0}.copy_({1})"])
    update = simple(fmt, name(target.name, target.slot), value)
    return [compound([("with torch.no_grad():", [], [update])])]


@statement("with", 1.0)
def with_user(gen, scope):
    from tests.fuzz.constructs import objects
    if gen.chance(0.5):
        ctx = objects.context_class(gen)
        holder = gen.fresh("c")
        suppresses = ctx in gen.suppressing
        body, inner = gen.block(scope, gen.small_count(), loop=suppresses, in_with=True)
        scope.merge(inner, skipped=suppresses)
        return [compound([(f"with {{0}}({gen.choice(['1', '2'])!s}) as {holder}:",
                           [name(ctx)], body)], defs=[holder])]
    manager = objects.context_function(gen)
    value = gen.fresh("f")
    inner = scope.child()
    inner.in_with = True
    inner.add(Var(value, FLOAT, rebindable=False))
    body = gen.statements(inner, gen.small_count())
    scope.merge(inner, skipped=False)
    return [compound([(f"with {{0}}({{1}}) as {value}:", [name(manager),
                                                          gen.expr(scope, FLOAT, 1)], body)],
                     defs=[value])]


__all__ = ["raise_statement", "Dead", "ListT", "ScalarT"]
