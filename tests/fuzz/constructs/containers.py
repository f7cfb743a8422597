"""Lists, dicts and tuples: built, mutated in place, aliased, read.

Stage: generation (constructs). Input: a scope. Output: statements building and mutating
containers (append/insert/extend/pop/del/reverse/clear/[i]=/slice assignment; d[k]=, update,
pop, del, setdefault, |=; tuple packing, unpacking, swaps) and expressions reading them.

Lengths and keys are tracked per container object (`scope.ListState`/`DictState`, shared by
aliases), so reads stay in range; shrinking never happens inside a loop unless the container
was made in that loop.
"""
from __future__ import annotations

from tests.fuzz import slots
from tests.fuzz.grammar import expression, statement
from tests.fuzz.scope import Var
from tests.fuzz.slots import DictT, ListT, TensorT, TupleT
from tests.fuzz.tree import name, op, simple

KEYS = ("a", "b", "c", "w", "h")


def _element_slot(gen, scope):
    return TensorT(gen.shape_of_choice(scope))


def _tensor_lists(scope, min_len=0, mutable=False):
    return [var for var in scope.lists(min_len, mutable) if isinstance(var.slot.elem, TensorT)]


def _list_var(gen, scope, min_len=0, mutable=True):
    found = _tensor_lists(scope, min_len, mutable)
    return gen.choice(found) if found else None


def _items(gen, scope, slot, count):
    exprs = [gen.expr(scope, slot, 1) for _ in range(count)]
    roots = set()
    for expr in exprs:
        roots |= scope.roots(expr)
    return exprs, roots


# -- lists ----------------------------------------------------------------------------------
@statement("list", 1.5)
def list_build(gen, scope):
    slot = _element_slot(gen, scope)
    count = gen.choice([0, 2, 2, 3])
    exprs, roots = _items(gen, scope, slot, count)
    list_name = gen.fresh("l")
    var = Var(list_name, ListT(slot), state=scope.new_list_state(count, roots))
    scope.add(var)
    body = ", ".join("{%d}" % i for i in range(count))
    fmt = gen.choice([f"[{body}]", f"list(({body},))" if count else "list()"])
    return [simple(f"{list_name} = {fmt}", *exprs, defs=[list_name])]


@statement("list", 3.0)
def list_grow(gen, scope):
    var = _list_var(gen, scope)
    if var is None:
        return None
    this = name(var.name, var.slot)
    kind = gen.choice(["append", "append", "insert", "extend", "iadd"])
    count = 2 if kind == "extend" else 1
    exprs, roots = _items(gen, scope, var.slot.elem, count)
    var.state.roots |= roots
    var.state.lo += count
    if kind == "append":
        return [simple("{0}.append({1})", this, *exprs)]
    if kind == "insert":
        return [simple(f"{{0}}.insert({gen.choice([0, 1, -1])}, {{1}})", this, *exprs)]
    if kind == "extend":
        return [simple("{0}.extend([{1}, {2}])", this, *exprs)]
    if not scope.owned(var):
        return [simple("{0}.extend(({1},))", this, *exprs)]
    return [simple("{0} += [{1}]", this, *exprs)]


@statement("list", 2.0)
def list_shrink(gen, scope):
    var = _list_var(gen, scope, 1)
    if var is None or not scope.may_shrink(var):
        return None
    this = name(var.name, var.slot)
    var.state.lo -= 1
    kind = gen.choice(["pop", "pop_bind", "pop0", "del", "del_slice"])
    if kind == "pop_bind" or (kind == "pop0" and gen.chance(0.5)):
        popped = gen.fresh("t")
        scope.add(Var(popped, var.slot.elem, roots=frozenset(var.state.roots)))
        call = "pop()" if kind == "pop_bind" else "pop(0)"
        return [simple(f"{popped} = {{0}}.{call}", this, defs=[popped])]
    fmt = {"pop": "{0}.pop()", "pop0": "{0}.pop(0)", "del": gen.choice(["del {0}[0]",
                                                                        "del {0}[-1]"]),
           "del_slice": "del {0}[:1]"}[kind]
    return [simple(fmt, this)]


@statement("list", 1.5)
def list_reorder(gen, scope):
    var = _list_var(gen, scope)
    if var is None or var.state.frozen:
        return None
    this = name(var.name, var.slot)
    if var.state.lo >= 1 and gen.chance(0.5):
        index = gen.rng.randrange(-var.state.lo, var.state.lo)
        value = gen.expr(scope, var.slot.elem, 1)
        var.state.roots |= scope.roots(value)
        fmt = gen.choice([f"{{0}}[{index}] = {{1}}", "{0}[:1] = [{1}]"])
        return [simple(fmt, this, value)]
    if gen.chance(0.15) and scope.may_shrink(var):
        var.state.lo = 0
        return [simple("{0}.clear()", this)]
    if gen.chance(0.2) and gen.on("item"):
        return [simple("{0}.sort(key=lambda item: item.sum().item())", this)]
    return [simple("{0}.reverse()", this)]


@statement("list", 1.2)
def list_copy(gen, scope):
    var = _list_var(gen, scope, mutable=False)
    if var is None:
        return None
    copy_name = gen.fresh("l")
    this = name(var.name, var.slot)
    if gen.chance(0.3):  # an alias: both names see every mutation
        scope.add(Var(copy_name, var.slot, state=var.state))
        return [simple(f"{copy_name} = {{0}}", this, defs=[copy_name])]
    lo = var.state.lo
    fmt = gen.choice(["{0}[:]", "list({0})", "{0}.copy()", "{0}[::-1]", "list(reversed({0}))"])
    exprs = [this]
    if gen.chance(0.25):
        fmt, lo = "{0} + [{1}]", lo + 1
        exprs.append(gen.expr(scope, var.slot.elem, 1))
    state = scope.new_list_state(lo, var.state.roots)
    for expr in exprs[1:]:
        state.roots |= scope.roots(expr)
    scope.add(Var(copy_name, var.slot, state=state))
    return [simple(f"{copy_name} = {fmt}", *exprs, defs=[copy_name])]


@expression("tensor", "list", 1.2)
def list_item(gen, scope, slot, depth):
    found = [var for var in _tensor_lists(scope, 1) if var.slot.elem == slot]
    if not found:
        return None
    var = gen.choice(found)
    index = gen.rng.randrange(-var.state.lo, var.state.lo)
    return op(f"{{0}}[{index}]", slot, name(var.name, var.slot), view=True)


@expression("tensor", "list", 0.6)
def list_reduce(gen, scope, slot, depth):
    found = [var for var in _tensor_lists(scope, 1) if var.slot.elem == slot]
    if not found or slot.dtype != "float":
        return None
    var = gen.choice(found)
    fmt = gen.choice(["torch.stack({0}).sum(0)", "sum({0})", "torch.stack({0}).mean(0)",
                      "torch.stack({0}, 0).amax(0)"])
    return op(fmt, slot, name(var.name, var.slot))


# -- dicts ----------------------------------------------------------------------------------
@statement("dict", 1.2)
def dict_build(gen, scope):
    slot = _element_slot(gen, scope)
    keys = gen.rng.sample(KEYS, gen.rng.randint(1, 3))
    exprs, roots = _items(gen, scope, slot, len(keys))
    dict_name = gen.fresh("d")
    scope.add(Var(dict_name, DictT(tuple(keys), slot), state=scope.new_dict_state(keys, roots)))
    if gen.chance(0.3):
        body = ", ".join(f"{key}={{{i}}}" for i, key in enumerate(keys))
        fmt = f"dict({body})"
    else:
        fmt = "{{" + ", ".join(f'"{key}": {{{i}}}' for i, key in enumerate(keys)) + "}}"
    return [simple(f"{dict_name} = {fmt}", *exprs, defs=[dict_name])]


def _dict_var(gen, scope, mutable=True):
    found = [var for var in scope.dicts(mutable) if isinstance(var.slot.value, TensorT)]
    return gen.choice(found) if found else None


@statement("dict", 2.0)
def dict_write(gen, scope):
    var = _dict_var(gen, scope)
    if var is None:
        return None
    key = gen.choice(KEYS)
    value = gen.expr(scope, var.slot.value, 1)
    var.state.roots |= scope.roots(value)
    var.state.keys.add(key)
    var.state.maybe.discard(key)
    this = name(var.name, var.slot)
    options = [f'{{0}}["{key}"] = {{1}}', f'{{0}}.update({{{{"{key}": {{1}}}}}})',
               f"{{0}}.update({key}={{1}})"]
    if scope.owned(var):
        options.append(f'{{0}} |= {{{{"{key}": {{1}}}}}}')
    return [simple(gen.choice(options), this, value)]


@statement("dict", 1.2)
def dict_remove(gen, scope):
    var = _dict_var(gen, scope)
    if var is None or not scope.may_shrink(var):
        return None
    this = name(var.name, var.slot)
    state = var.state
    if state.keys and gen.chance(0.7):
        key = gen.choice(sorted(state.keys))
        state.keys.discard(key)
        if gen.chance(0.5):
            popped = gen.fresh("t")
            scope.add(Var(popped, var.slot.value, roots=frozenset(state.roots)))
            return [simple(f'{popped} = {{0}}.pop("{key}")', this, defs=[popped])]
        return [simple(gen.choice([f'del {{0}}["{key}"]', f'{{0}}.pop("{key}")']), this)]
    key = gen.choice(KEYS)
    state.keys.discard(key)
    state.maybe.discard(key)
    return [simple(f'{{0}}.pop("{key}", None)', this)]


@statement("dict", 0.8)
def dict_setdefault(gen, scope):
    var = _dict_var(gen, scope)
    if var is None:
        return None
    key = gen.choice(KEYS)
    value = gen.expr(scope, var.slot.value, 1)
    var.state.roots |= scope.roots(value)
    var.state.keys.add(key)
    var.state.maybe.discard(key)
    got = gen.fresh("t")
    scope.add(Var(got, var.slot.value, roots=frozenset(var.state.roots)))
    return [simple(f'{got} = {{0}}.setdefault("{key}", {{1}})', name(var.name, var.slot),
                   value, defs=[got])]


@statement("dict", 0.6)
def dict_copy(gen, scope):
    var = _dict_var(gen, scope, mutable=False)
    if var is None:
        return None
    copy_name = gen.fresh("d")
    if gen.chance(0.3):
        scope.add(Var(copy_name, var.slot, state=var.state))
        return [simple(f"{copy_name} = {{0}}", name(var.name, var.slot), defs=[copy_name])]
    state = scope.new_dict_state(var.state.keys, var.state.roots)
    state.maybe = set(var.state.maybe)
    scope.add(Var(copy_name, var.slot, state=state))
    fmt = gen.choice(["dict({0})", "{0}.copy()", "{{**{0}}}"])
    return [simple(f"{copy_name} = {fmt}", name(var.name, var.slot), defs=[copy_name])]


@expression("tensor", "dict", 1.0)
def dict_value(gen, scope, slot, depth):
    found = [var for var in scope.dicts() if var.slot.value == slot and var.state.keys]
    if not found:
        return None
    var = gen.choice(found)
    key = gen.choice(sorted(var.state.keys))
    return op(f'{{0}}["{key}"]', slot, name(var.name, var.slot), view=True)


@expression("tensor", "dict", 0.5)
def dict_get(gen, scope, slot, depth):
    found = [var for var in scope.dicts() if var.slot.value == slot]
    if not found or depth <= 0:
        return None
    var = gen.choice(found)
    key = gen.choice(KEYS)
    if var.state.keys and gen.chance(0.3):
        return op("torch.stack(list({0}.values())).sum(0)", slot, name(var.name, var.slot))
    return op(f'{{0}}.get("{key}", {{1}})', slot, name(var.name, var.slot),
              gen.expr(scope, slot, depth - 1))


@expression("bool", "dict", 0.4)
def dict_has(gen, scope, slot, depth):
    var = scope.pick(gen.rng, lambda v: isinstance(v.slot, DictT))
    if var is None:
        return None
    return op(f'("{gen.choice(KEYS)}" in {{0}})', slots.BOOL, name(var.name, var.slot))


# -- tuples ---------------------------------------------------------------------------------
@statement("tuple", 1.0)
def tuple_pack(gen, scope):
    items = [gen.expr(scope, _element_slot(gen, scope), 1) for _ in range(gen.rng.randint(2, 3))]
    if gen.chance(0.3):
        items.append(gen.expr(scope, slots.FLOAT, 1))
    slot = TupleT(tuple(item.slot for item in items))
    tuple_name = gen.fresh("tp")
    var = Var(tuple_name, slot)
    var.roots = frozenset().union(*(scope.roots(item) for item in items))
    scope.add(var)
    body = ", ".join("{%d}" % i for i in range(len(items)))
    return [simple(f"{tuple_name} = ({body})", *items, defs=[tuple_name])]


@statement("tuple", 1.0)
def tuple_unpack(gen, scope):
    var = scope.pick(gen.rng, lambda v: isinstance(v.slot, TupleT))
    if var is not None and gen.chance(0.6):
        names = [gen.fresh("u") for _ in var.slot.items]
        for item_name, slot in zip(names, var.slot.items):
            scope.add(Var(item_name, slot, roots=var.roots))
        return [simple(f"{', '.join(names)} = {{0}}", name(var.name, var.slot), defs=names)]
    lists = [v for v in _tensor_lists(scope, 1)]
    if lists and gen.chance(0.5):
        source = gen.choice(lists)
        first, rest = gen.fresh("t"), gen.fresh("l")
        scope.add(Var(first, source.slot.elem, roots=frozenset(source.state.roots)))
        scope.add(Var(rest, source.slot, state=scope.new_list_state(source.state.lo - 1,
                                                                   source.state.roots)))
        return [simple(f"{first}, *{rest} = {{0}}", name(source.name, source.slot),
                       defs=[first, rest])]
    pairs = [(a, b) for a in scope.tensors() for b in scope.tensors()
             if a.name < b.name and a.slot == b.slot and scope.owned(a) and scope.owned(b)]
    if not pairs:
        return None
    a, b = gen.choice(pairs)
    a.roots, b.roots = b.roots, a.roots
    a.contiguous, b.contiguous = b.contiguous, a.contiguous
    a.grad_leaf, b.grad_leaf = b.grad_leaf, a.grad_leaf
    return [simple("{0}, {1} = {1}, {0}", name(a.name, a.slot), name(b.name, b.slot))]


@expression("tensor", "tuple", 0.8)
def tuple_item(gen, scope, slot, depth):
    options = [(var, index) for var in scope.all(lambda v: isinstance(v.slot, TupleT))
               for index, item in enumerate(var.slot.items) if item == slot]
    if not options:
        return None
    var, index = gen.choice(options)
    return op(f"{{0}}[{index}]", slot, name(var.name, var.slot), view=True)
