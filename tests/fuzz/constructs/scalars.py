"""Python scalars (int/float/bool/str expressions and variables), `print`, and the tensor reads
that leave the graph (`.item()`, `.tolist()`, `int(t)`, `bool(t)`).

Stage: generation (constructs). Input: a scope and a scalar slot. Output: expressions whose
value fits the slot (ints stay inside the slot's bounds, so they can index or count loops), and
the statements binding or printing them.
"""
from __future__ import annotations

from tests.fuzz import slots
from tests.fuzz.grammar import expression, statement
from tests.fuzz.scope import Var
from tests.fuzz.slots import BOOL, FLOAT, ListT, ScalarT, TensorT, int_slot
from tests.fuzz.tree import Expr, lit, name, op, simple

ANY_INT = int_slot(-99, 99)


def _fits(slot: ScalarT, lo: int, hi: int) -> bool:
    return slot.lo <= lo and hi <= slot.hi


# -- floats -------------------------------------------------------------------------------------
@expression("float", "scalar", 3.0)
def float_leaf(gen, scope, slot, depth):
    return gen.leaf(scope, FLOAT)


@expression("float", "scalar", 1.5)
def float_literal(gen, scope, slot, depth):
    return lit(gen.choice(["0.5", "1.5", "-0.25", "2.0", "0.75", "-1.0"]), FLOAT)


@expression("float", "scalar", 1.0)
def float_arith(gen, scope, slot, depth):
    if depth <= 0:
        return None
    fmt = gen.choice(["({0} + {1})", "({0} * {1})", "({0} - {1})", "max({0}, {1})",
                      "min({0}, {1})", "({0} / 2)", "abs({0})", "round({0}, 2)",
                      "float({2})", "({2} * 0.5)", "({0} + {2})"])
    return op(fmt, FLOAT, gen.expr(scope, FLOAT, depth - 1), gen.expr(scope, FLOAT, depth - 1),
              gen.expr(scope, int_slot(-9, 9), depth - 1))


@expression("float", "item", 1.2)
def float_item(gen, scope, slot, depth):
    var = scope.pick(gen.rng, lambda v: slots.is_float_tensor(v.slot))
    if var is None:
        return None
    source = name(var.name, var.slot)
    if var.slot.shape:
        fmt = gen.choice(["{0}.sum().item()", "float({0}.sum())", "{0}.mean().item()",
                          "{0}.max().item()", "{0}.abs().sum().item()"])
    else:
        fmt = gen.choice(["{0}.item()", "float({0})", "{0}.tolist()"])
    return op(fmt, FLOAT, source)


@expression("float", "item", 0.3)
def float_of_list(gen, scope, slot, depth):
    var = scope.pick(gen.rng, lambda v: isinstance(v.slot, ListT) and v.slot.elem == FLOAT
                     and v.state.lo >= 1)
    if var is None:
        return None
    fmt = gen.choice(["sum({0})", "max({0})", "{0}[0]", "{0}[-1]", "min({0})"])
    return op(fmt, FLOAT, name(var.name, var.slot))


# -- ints ---------------------------------------------------------------------------------------
@expression("int", "scalar", 3.0)
def int_leaf(gen, scope, slot, depth):
    var = scope.pick(gen.rng, lambda v: isinstance(v.slot, ScalarT) and v.slot.kind == "int"
                     and _fits(slot, v.slot.lo, v.slot.hi))
    return None if var is None else name(var.name, var.slot)


@expression("int", "scalar", 1.5)
def int_literal(gen, scope, slot, depth):
    lo, hi = max(slot.lo, -3), min(slot.hi, 4)
    if lo > hi:
        return None
    value = gen.rng.randint(lo, hi)
    return lit(str(value), int_slot(value, value))


@expression("int", "scalar", 1.2)
def int_shape(gen, scope, slot, depth):
    options = []
    for var in scope.tensors():
        for k, dim in enumerate(var.slot.shape):
            lo, hi = slots.dim_bounds(dim)
            if _fits(slot, lo, hi):
                options.append((var, k, lo, hi))
        rank = len(var.slot.shape)
        if _fits(slot, rank, rank):
            options.append((var, None, rank, rank))
    if not options:
        return None
    var, k, lo, hi = gen.choice(options)
    if k is None:
        return op(gen.choice(["{0}.dim()", "{0}.ndim", "len({0}.shape)"]), int_slot(lo, hi),
                  name(var.name, var.slot))
    fmt = gen.choice([f"{{0}}.shape[{k}]", f"{{0}}.size({k})", f"{{0}}.shape[{k}]"])
    if k == 0 and gen.chance(0.3):
        fmt = "len({0})"
    return op(fmt, int_slot(lo, hi), name(var.name, var.slot))


@expression("int", "scalar", 0.6)
def int_tag(gen, scope, slot, depth):
    """`getattr(x, "tag", 1)`: a Python attribute some calls set on a tensor argument."""
    if not _fits(slot, 1, 3):
        return None
    var = scope.pick(gen.rng, lambda v: v.name in gen.tagged and v.owner == "fn")
    if var is None:
        return None
    return op('getattr({0}, "tag", 1)', int_slot(1, 3), name(var.name, var.slot))


@expression("int", "scalar", 1.0)
def int_len(gen, scope, slot, depth):
    if slot.hi < 99:
        return None
    var = scope.pick(gen.rng, lambda v: isinstance(v.slot, (ListT, slots.DictT)))
    if var is None:
        return None
    return op("len({0})", int_slot(0, 99), name(var.name, var.slot))


@expression("int", "scalar", 1.0)
def int_wrapped(gen, scope, slot, depth):
    """Any int brought into the slot's bounds with `%`."""
    if depth <= 0 or slot.hi - slot.lo > 20 or slot.hi < 0:
        return None
    lo = max(slot.lo, 0)
    width = slot.hi - lo + 1
    inner = gen.expr(scope, ANY_INT, depth - 1)
    fmt = f"({{0}} % {width})" if lo == 0 else f"({{0}} % {width} + {lo})"
    return op(fmt, int_slot(lo, slot.hi), inner)


@expression("int", "scalar", 0.8)
def int_arith(gen, scope, slot, depth):
    if depth <= 0 or slot.hi < 99:
        return None
    fmt = gen.choice(["({0} + {1})", "({0} * 2)", "({0} - {1})", "max({0}, {1})",
                      "({0} // 2)", "abs({0})"])
    return op(fmt, ANY_INT, gen.expr(scope, int_slot(-9, 9), depth - 1),
              gen.expr(scope, int_slot(-9, 9), depth - 1))


@expression("int", "item", 0.8)
def int_item(gen, scope, slot, depth):
    options = []
    for var in scope.float_tensors():
        if len(var.slot.shape) == 1:
            lo, hi = slots.dim_bounds(var.slot.shape[0])
            if _fits(slot, 0, hi - 1):
                options.append((var, gen.choice(["int({0}.argmax())", "{0}.argmin().item()"]),
                                0, hi - 1))
            if _fits(slot, 0, hi):
                options.append((var, "int(({0} > 0).sum())", 0, hi))
    if not options:
        return None
    var, fmt, lo, hi = gen.choice(options)
    return op(fmt, int_slot(lo, hi), name(var.name, var.slot))


# -- bools and strings --------------------------------------------------------------------------
@expression("bool", "scalar", 2.0)
def bool_leaf(gen, scope, slot, depth):
    return gen.leaf(scope, BOOL)


@expression("bool", "scalar", 1.5)
def bool_compare(gen, scope, slot, depth):
    if depth <= 0:
        return None
    if gen.chance(0.5):
        return op(gen.choice(["({0} > {1})", "({0} <= {1})", "({0} != {1})"]), BOOL,
                  gen.expr(scope, FLOAT, depth - 1), gen.expr(scope, FLOAT, depth - 1))
    return op(gen.choice(["({0} == {1})", "({0} > {1})", "({0} % 2 == 0)"]), BOOL,
              gen.expr(scope, int_slot(-9, 9), depth - 1),
              gen.expr(scope, int_slot(-9, 9), depth - 1))


@expression("bool", "scalar", 0.6)
def bool_logic(gen, scope, slot, depth):
    if depth <= 0:
        return None
    fmt = gen.choice(["(not {0})", "({0} and {1})", "({0} or {1})"])
    return op(fmt, BOOL, gen.expr(scope, BOOL, depth - 1), gen.expr(scope, BOOL, depth - 1))


@expression("bool", "scalar", 0.4)
def bool_type_test(gen, scope, slot, depth):
    var = scope.pick(gen.rng, lambda v: isinstance(v.slot, ScalarT) and v.slot.kind == "float")
    if var is None:
        return None
    return op(gen.choice(["isinstance({0}, float)", "isinstance({0}, int)",
                          "(type({0}) is float)"]), BOOL, name(var.name, var.slot))


@expression("bool", "item", 0.8)
def bool_item(gen, scope, slot, depth):
    var = scope.pick(gen.rng, lambda v: slots.is_float_tensor(v.slot))
    if var is None:
        return None
    fmt = gen.choice(["bool(({0} > 0).any())", "bool({0}.sum() > 0.0137)",
                      "({0}.sum() > 0.0137).item()",   # a bound no sum lands on (flow.py)
                      "bool(({0} < 1).all())"])
    return op(fmt, BOOL, name(var.name, var.slot))


@expression("bool", "scalar", 0.5)
def bool_of_tensor(gen, scope, slot, depth):
    var = scope.pick(gen.rng, lambda v: isinstance(v.slot, TensorT))
    if var is None:
        return None
    fmt = gen.choice(["{0}.is_contiguous()", "({0}.dim() == 2)", "({0}.dtype == torch.float32)",
                      "{0}.is_floating_point()"])
    return op(fmt, BOOL, name(var.name, var.slot))


@expression("str", "scalar", 1.0)
def str_literal(gen, scope, slot, depth):
    return lit(gen.choice(["'a'", "'b'", "'mean'"]), slots.STR)


@expression("str", "scalar", 1.0)
def str_leaf(gen, scope, slot, depth):
    return gen.leaf(scope, slots.STR)


# -- statements ---------------------------------------------------------------------------------
def bind_scalar(gen, scope, expr: Expr, prefix: str) -> list:
    var_name = gen.fresh(prefix)
    scope.add(Var(var_name, expr.slot))
    return [simple(f"{var_name} = {{0}}", expr, defs=[var_name])]


@statement("scalar", 1.5)
def scalar_assign(gen, scope):
    kind = gen.choice(["float", "float", "int", "bool"])
    slot = {"float": FLOAT, "int": ANY_INT, "bool": BOOL}[kind]
    expr = gen.expr(scope, slot, 2)
    return bind_scalar(gen, scope, expr, {"float": "f", "int": "k", "bool": "b"}[kind])


@statement("scalar", 0.8)
def scalar_update(gen, scope):
    var = scope.pick(gen.rng, lambda v: isinstance(v.slot, ScalarT) and scope.owned(v) and
                     v.slot.kind in ("int", "float"))
    if var is None:
        return None
    if var.slot.kind == "float":
        fmt = gen.choice(["{0} += {1}", "{0} *= {1}", "{0} = {0} - {1}"])
        return [simple(fmt.replace("{0}", var.name).replace("{1}", "{0}"),
                       gen.expr(scope, FLOAT, 1))]
    var.slot = ANY_INT if scope.loop_depth else int_slot(var.slot.lo, var.slot.hi + 2)
    return [simple(f"{var.name} += {{0}}", gen.expr(scope, int_slot(0, 2), 1))]


@statement("item", 1.5)
def item_bind(gen, scope):
    kind = gen.choice(["float", "float", "int", "bool"])
    slot = {"float": FLOAT, "int": int_slot(0, 99), "bool": BOOL}[kind]
    rule = {"float": float_item, "int": int_item, "bool": bool_item}[kind]
    expr = rule(gen, scope, slot, 1)
    if expr is None:
        return None
    return bind_scalar(gen, scope, expr, {"float": "f", "int": "k", "bool": "b"}[kind])


@statement("item", 0.5)
def tolist(gen, scope):
    var = scope.pick(gen.rng, lambda v: slots.is_float_tensor(v.slot) and len(v.slot.shape) == 1)
    if var is None:
        return None
    values = gen.fresh("vals")
    lo = var.slot.shape[0].smallest
    scope.add(Var(values, ListT(FLOAT), state=scope.new_list_state(lo)))
    return [simple(f"{values} = {{0}}.tolist()", name(var.name, var.slot), defs=[values])]


@statement("print", 2.0)
def print_value(gen, scope):
    tag = lit(repr(gen.fresh("p")))
    what = gen.choice(["float", "int", "bool", "str", "shape", "tensor", "fstring", "len"])
    if what == "float":
        return [simple("print({0}, {1})", tag, gen.expr(scope, FLOAT, 1))]
    if what == "fstring":
        return [simple('print(f"{{{0}:.4f}}")', gen.expr(scope, FLOAT, 1))]
    if what in ("int", "bool", "str"):
        slot = {"int": ANY_INT, "bool": BOOL, "str": slots.STR}[what]
        return [simple("print({0}, {1})", tag, gen.expr(scope, slot, 1))]
    var = scope.pick(gen.rng, lambda v: isinstance(v.slot, (TensorT, ListT, slots.DictT)))
    if var is None:
        return None
    source = name(var.name, var.slot)
    if isinstance(var.slot, TensorT):
        fmt = {"shape": "print({0}, {1}.shape)", "tensor": "print({0}, {1})",
               "len": "print({0}, {1}.dtype, {1}.requires_grad)"}[what]
        return [simple(fmt, tag, source)]
    fmt = "print({0}, len({1}))" if isinstance(var.slot, ListT) else "print({0}, list({1}))"
    return [simple(fmt, tag, source)]
