"""Functions users write around tensor code: top-level helpers (several calls deep, defaults,
keywords, decorated with no_grad), closures (nonlocal reads and writes), lambdas,
`functools.partial`, generator functions, comprehensions and generator expressions.

Stage: generation (constructs). Input: a scope. Output: definitions (top level or nested) and
the statements that call them.

A helper is generated for one call site, from the arguments chosen there: its parameters share
the callers' container states (a list the helper pops is shorter for the caller too), and it
inherits the caller's loop depth (no shrinking of outer containers when called in a loop).
"""
from __future__ import annotations

from tests.fuzz import slots
from tests.fuzz.generator import Dead
from tests.fuzz.grammar import expression, statement
from tests.fuzz.scope import FuncCtx, Scope, Var
from tests.fuzz.slots import FLOAT, DictT, ListT, ObjT, ScalarT, TensorT, int_slot
from tests.fuzz.tree import Clause, Stmt, compound, lit, name, op, simple

MAX_HELPER_DEPTH = 3


def _arguments(gen, scope, count):
    """Variables to pass (tensors first), distinct."""
    pool = [var for var in scope.all() if not var.is_global and "." not in var.name and
            isinstance(var.slot, (TensorT, ListT, DictT, ScalarT, ObjT)) and var.name != "self"
            and not (isinstance(var.slot, ListT) and not isinstance(var.slot.elem, TensorT))]
    tensors = [var for var in pool if isinstance(var.slot, TensorT)]
    if not tensors:
        raise Dead("no tensor to pass")
    chosen = [gen.choice(tensors)]
    others = [var for var in pool if var is not chosen[0]]
    gen.rng.shuffle(others)
    return chosen + others[:count - 1]


def _function_scope(gen, scope, kind, fname, args, param_names):
    inner = Scope(FuncCtx(kind, fname, depth=scope.func.depth + 1))
    inner.loop_depth = scope.loop_depth
    inner.may_raise = scope.may_raise
    for var, param in zip(args, param_names):
        inner.add(Var(param, var.slot, roots=frozenset(scope.roots(name(var.name))) |
                      var.roots, state=var.state, contiguous=var.contiguous,
                      grad_leaf=var.grad_leaf))
    return inner


@statement("helper", 2.0)
def call_helper(gen, scope):
    if scope.func.depth >= MAX_HELPER_DEPTH:
        return None
    args = _arguments(gen, scope, gen.rng.randint(1, 3))
    helper = gen.fresh("h")
    params = [gen.fresh("a") for _ in args]
    inner = _function_scope(gen, scope, "helper", helper, args, params)
    with_default = gen.chance(0.3)
    if with_default:
        inner.add(Var("scale", FLOAT))
    body = gen.statements(inner, gen.rng.randint(1, 4))
    tensors = [var.slot for var in inner.float_tensors() if var.name in params or
               var.owner == helper]
    result_slot = gen.choice(tensors) if tensors else None
    returns_pair = result_slot is not None and gen.chance(0.2)
    if result_slot is not None:
        value = gen.expr(inner, result_slot, 2)
        if returns_pair:
            body.append(simple("return {0}, {1}", value, gen.expr(inner, FLOAT, 1)))
        else:
            body.append(simple("return {0}", value))
    signature = ", ".join(params + (["scale=0.5"] if with_default else []))
    decorator = "@torch.no_grad()" if gen.on("grad") and gen.chance(0.15) else ""
    definition = _definition(f"def {helper}({signature}):", gen.declarations(inner.func) + body,
                             [helper], decorator)
    gen.add_top(definition)
    call_args = [name(var.name, var.slot) for var in args]
    fmt = ", ".join("{%d}" % (i + 1) for i in range(len(args)))
    if with_default and gen.chance(0.6):
        call_args.append(gen.expr(scope, FLOAT, 1))
        fmt += f", scale={{{len(args) + 1}}}"
    call = "{0}(" + fmt + ")"
    if result_slot is None:
        return [simple(call, name(helper), *call_args)]
    result = gen.fresh("t")
    scope.add(Var(result, result_slot))
    if returns_pair:
        extra = gen.fresh("f")
        scope.add(Var(extra, FLOAT))
        return [simple(f"{result}, {extra} = " + call, name(helper), *call_args,
                       defs=[result, extra])]
    return [simple(f"{result} = " + call, name(helper), *call_args, defs=[result])]


def _definition(head, body, defs, decorator=""):
    clauses = [Clause(decorator, [], None)] if decorator else []
    clauses.append(Clause(head.replace("{", "{{").replace("}", "}}"), [], body))
    return Stmt(clauses, frozenset(defs))


@statement("closure", 1.5)
def closure(gen, scope):
    """A nested function reading (and maybe `nonlocal`-writing) the enclosing function's
    variables, called once or twice right away."""
    fname = gen.fresh("c")
    param = gen.fresh("a")
    slot = TensorT(gen.shape_of_choice(scope))
    inner = Scope(FuncCtx("closure", fname, depth=scope.func.depth + 1, outer=scope))
    inner.vars = dict(scope.vars)  # the same variables: writes through nonlocal are shared
    inner.may_raise = scope.may_raise
    inner.loop_depth = scope.loop_depth + 1  # may run twice: never shrinks outer containers
    inner.add(Var(param, slot))
    body = []
    writable = [var for var in scope.float_tensors() if scope.owned(var) and
                "." not in var.name]
    if writable and gen.chance(0.5):
        target = gen.choice(writable)
        inner.func.nonlocals.add(target.name)
        value = gen.expr(inner, target.slot, 1)
        body.append(simple(f"{target.name} = {{0}}", value))
        target.roots = target.roots | frozenset(inner.roots(value))
    body += gen.statements(inner, gen.rng.randint(0, 2))
    body.append(simple("return {0}", gen.expr(inner, slot, 2)))
    definition = _definition(f"def {fname}({param}):", gen.declarations(inner.func) + body,
                             [fname])
    result = gen.fresh("t")
    calls = [simple(f"{result} = {{0}}({{1}})", name(fname), gen.expr(scope, slot, 1),
                    defs=[result])]
    if gen.chance(0.3):
        calls.append(simple(f"{result} = {result} + {{0}}({{1}})", name(fname),
                            gen.expr(scope, slot, 1)))
    scope.add(Var(result, slot))
    return [definition] + calls


@statement("closure", 1.0)
def lambda_call(gen, scope):
    fname, param = gen.fresh("g"), gen.fresh("a")
    slot = TensorT(gen.shape_of_choice(scope))
    inner = scope.child()
    inner.add(Var(param, slot, rebindable=False))
    body = gen.expr(inner, slot, 2)
    result = gen.fresh("t")
    out = [simple(f"{fname} = lambda {param}: {{0}}", body, defs=[fname])]
    if gen.chance(0.3):
        out.append(simple(f"{result} = list(map({{0}}, [{{1}}, {{2}}]))[-1]", name(fname),
                          gen.expr(scope, slot, 1), gen.expr(scope, slot, 1), defs=[result]))
    else:
        out.append(simple(f"{result} = {{0}}({{1}})", name(fname), gen.expr(scope, slot, 1),
                          defs=[result]))
    scope.add(Var(result, slot))
    return out


@statement("closure", 0.6)
def partial_call(gen, scope):
    slot = TensorT(gen.shape_of_choice(scope))
    helper = gen.fresh("h")
    inner = Scope(FuncCtx("helper", helper, depth=scope.func.depth + 1))
    inner.may_raise = scope.may_raise
    inner.add(Var("a", slot))
    inner.add(Var("scale", FLOAT))
    body = [simple("return {0}", gen.expr(inner, slot, 2))]
    gen.add_top(_definition(f"def {helper}(a, scale):", body, [helper]))
    bound, result = gen.fresh("p"), gen.fresh("t")
    out = [simple(f"{bound} = functools.partial({{0}}, scale={{1}})", name(helper),
                  gen.expr(scope, FLOAT, 1), defs=[bound]),
           simple(f"{result} = {{0}}({{1}})", name(bound), gen.expr(scope, slot, 1),
                  defs=[result])]
    scope.add(Var(result, slot))
    return out


# -- generators ---------------------------------------------------------------------------------
@statement("generator", 1.2)
def generator_use(gen, scope):
    slot = TensorT(gen.shape_of_choice(scope))
    fname = gen.fresh("gen")
    inner = Scope(FuncCtx("generator", fname, depth=scope.func.depth + 1))
    inner.loop_depth = scope.loop_depth + 1
    inner.may_raise = scope.may_raise
    base = gen.expr(scope, slot, 1)
    inner.add(Var("base", slot))
    lists = [var for var in scope.lists(1) if var.slot.elem == slot]
    source = gen.choice(lists) if lists and gen.chance(0.5) else None
    item = gen.fresh("t")
    if source is not None:
        inner.add(Var("items", source.slot, state=source.state))
        inner.vars["items"].state.frozen = True
        inner.add(Var(item, slot, rebindable=False))
        head, count = f"for {item} in items:", source.state.lo
    else:
        inner.add(Var(item, int_slot(0, 2), rebindable=False))
        head, count = f"for {item} in range({gen.rng.randint(1, 3)}):", 1
    body = gen.statements(inner, gen.rng.randint(0, 2))
    body.append(simple("yield {0}", gen.expr(inner, slot, 2)))
    params = "base, items" if source is not None else "base"
    definition = _definition(f"def {fname}({params}):",
                             gen.declarations(inner.func) + [compound([(head, [], body)])],
                             [fname])
    if source is not None:
        source.state.frozen = False
    gen.add_top(definition)
    args = [name(fname), base] + ([name(source.name, source.slot)] if source else [])
    call = "{0}({1}, {2})" if source else "{0}({1})"
    result = gen.fresh("t")
    kind = gen.choice(["sum", "list", "next", "for"] if count >= 1 else ["list", "for"])
    if kind == "for":
        acc = gen.fresh("t")
        scope.add(Var(acc, slot))
        loop = compound([(f"for {result} in " + call + ":", args,
                          [simple(f"{acc} = {acc} + {result}")])], defs=[result])
        return [simple(f"{acc} = torch.zeros_like({{0}})", base, defs=[acc]), loop]
    if kind == "list":
        values = gen.fresh("l")
        scope.add(Var(values, ListT(slot), state=scope.new_list_state(count)))
        return [simple(f"{values} = list(" + call + ")", *args, defs=[values])]
    scope.add(Var(result, slot))
    wrap = {"sum": "sum(%s)", "next": "next(%s)"}[kind]
    return [simple(f"{result} = " + wrap % call, *args, defs=[result])]


# -- comprehensions -----------------------------------------------------------------------------
@statement("comprehension", 1.5)
def comprehension(gen, scope):
    lists = [var for var in scope.lists() if isinstance(var.slot.elem, TensorT)]
    dicts = [var for var in scope.dicts() if isinstance(var.slot.value, TensorT)]
    inner = scope.child()
    item = gen.fresh("q")
    kind = gen.choice(["list", "list", "range", "filter", "dict", "sum", "any"])
    if kind == "dict" and dicts:
        source = gen.choice(dicts)
        key = gen.fresh("key")
        inner.add(Var(key, slots.STR, rebindable=False))
        inner.add(Var(item, source.slot.value, rebindable=False))
        value = gen.expr(inner, source.slot.value, 2)
        result = gen.fresh("d")
        state = scope.new_dict_state(source.state.keys)
        scope.add(Var(result, source.slot, state=state))
        return [simple(f"{result} = {{{{{key}: {{0}} for {key}, {item} in {{1}}.items()}}}}",
                       value, name(source.name), defs=[result])]
    if kind == "range" or not lists:
        inner.add(Var(item, int_slot(0, 2), rebindable=False))
        slot = TensorT(gen.shape_of_choice(scope))
        value = gen.expr(inner, slot, 2)
        count = gen.rng.randint(1, 3)
        result = gen.fresh("l")
        scope.add(Var(result, ListT(slot), state=scope.new_list_state(count)))
        return [simple(f"{result} = [{{0}} for {item} in range({count})]", value,
                       defs=[result])]
    source = gen.choice(lists)
    inner.add(Var(item, source.slot.elem, rebindable=False))
    if kind in ("sum", "any"):
        if kind == "any":
            test = gen.expr(inner, slots.BOOL, 1)
            result = gen.fresh("b")
            scope.add(Var(result, slots.BOOL))
            return [simple(f"{result} = any({{0}} for {item} in {{1}})", test,
                           name(source.name), defs=[result])]
        value = gen.expr(inner, source.slot.elem, 2)
        start = op("torch.zeros_like({0})", source.slot.elem, gen.expr(scope, source.slot.elem, 0))
        result = gen.fresh("t")
        scope.add(Var(result, source.slot.elem))
        return [simple(f"{result} = sum(({{0}} for {item} in {{1}}), {{2}})", value,
                       name(source.name), start, defs=[result])]
    slot = TensorT(gen.shape_of_choice(inner))
    value = gen.expr(inner, slot, 2)
    result = gen.fresh("l")
    if kind == "filter":
        test = gen.expr(inner, slots.BOOL, 1)
        scope.add(Var(result, ListT(slot), state=scope.new_list_state(0)))
        return [simple(f"{result} = [{{0}} for {item} in {{1}} if {{2}}]", value,
                       name(source.name), test, defs=[result])]
    scope.add(Var(result, ListT(slot), state=scope.new_list_state(source.state.lo)))
    return [simple(f"{result} = [{{0}} for {item} in {{1}}]", value, name(source.name),
                   defs=[result])]


__all__ = ["lit", "expression"]
