"""User classes (instances, attributes, properties, methods, class attributes), user exception
and context-manager classes, module-object configurations and module globals.

Stage: generation (constructs). Input: a scope. Output: top-level definitions (made once per
program, on first use) and the statements and expressions that use them. The knobs registered
here let the runner change class attributes, module-object attributes and globals between
calls.
"""
from __future__ import annotations

import dataclasses

from tests.fuzz import slots
from tests.fuzz.generator import Dead
from tests.fuzz.grammar import expression, statement
from tests.fuzz.scope import FuncCtx, Scope, Var
from tests.fuzz.slots import BOOL, FLOAT, ClassT, ListT, ObjT, ScalarT, TensorT, int_slot
from tests.fuzz.tree import Clause, Stmt, lit, name, op, simple


@dataclasses.dataclass
class ClassInfo:
    name: str
    slot: ObjT
    attr: TensorT  # the slot of attributes a and b
    init_slots: list  # constructor parameter slots
    props: list = dataclasses.field(default_factory=list)
    methods: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ExcInfo:
    name: str
    base: str
    code: bool  # __init__(self, msg, code)


def _def(head: str, body: list, defs=(), decorator: str = "") -> Stmt:
    clauses = [Clause(decorator, [], None)] if decorator else []
    clauses.append(Clause(head.replace("{", "{{").replace("}", "}}"), [], body))
    return Stmt(clauses, frozenset(defs))


def _line(text: str) -> Stmt:
    return simple(text.replace("{", "{{").replace("}", "}}"))


def _method_scope(gen, kind: str, cls: str, attr: TensorT) -> Scope:
    scope = Scope(FuncCtx(kind, f"{cls}.{kind}"))
    scope.may_raise = False  # methods are also called from constructors
    scope.add(Var("self", ObjT(cls), rebindable=False))
    unsafe = frozenset(gen.grad_params) | {"attr"}
    for attribute in ("self.a", "self.b"):
        scope.add(Var(attribute, attr, roots=unsafe, rebindable=False))
    return scope


# -- classes ------------------------------------------------------------------------------------
def any_class(gen, scope) -> ClassInfo:
    """A class to instantiate: never one whose body is being generated (that would recurse)."""
    ready = sorted(set(gen.classes) - gen.constructing)
    if ready and gen.chance(0.7):
        return gen.classes[gen.choice(ready)]
    return make_class(gen, scope)


def make_class(gen, scope) -> ClassInfo:
    cls = gen.fresh("Box")
    held = [var.slot for var in scope.float_tensors() if var.slot.shape]
    attr = gen.choice(held) if held else TensorT((slots.Dim(gen.width),))
    info = ClassInfo(cls, ObjT(cls), attr, [attr, attr])
    gen.classes[cls] = info
    gen.constructing.add(cls)
    body = [_line(f"scale = {gen.choice(['2.0', '0.5', '1.5'])}"), _line("made = 0")]
    init = Scope(FuncCtx("init", f"{cls}.__init__"))
    init.may_raise = False  # instances are also made by inputs() and at module level
    init.add(Var("self", ObjT(cls), rebindable=False))
    for param in ("a", "b"):
        init.add(Var(param, attr, roots=frozenset(gen.grad_params) | {"attr"}))
    init_body = gen.statements(init, gen.rng.choice([0, 0, 1, 2]))
    init_body[:0] = gen.declarations(init.func)
    init_body.append(simple("self.a = {0}", gen.expr(init, attr, 1)))
    init_body.append(simple("self.b = {0}", gen.expr(init, attr, 1)))
    if gen.chance(0.4):
        init_body.insert(gen.rng.randrange(len(init_body) + 1), _line(f"{cls}.made += 1"))
    body.append(_def("def __init__(self, a, b):", init_body))
    if gen.chance(0.7):
        prop = gen.choice(["total", "mixed"])
        scope_p = _method_scope(gen, "property", cls, attr)
        scope_p.add(Var("self.scale", FLOAT, rebindable=False))
        expr = gen.expr(scope_p, attr, 2)
        body.append(_def(f"def {prop}(self):", [simple("return {0}", expr)],
                         decorator="@property"))
        info.props.append(prop)
    if gen.chance(0.7):
        method = gen.choice(["step", "update"])
        scope_m = _method_scope(gen, "method", cls, attr)
        scope_m.add(Var("t", attr, roots=frozenset(gen.grad_params) | {"attr"}))
        method_body = gen.statements(scope_m, gen.rng.choice([0, 1, 2]))
        method_body[:0] = gen.declarations(scope_m.func)
        method_body.append(simple("self.a = {0}", gen.expr(scope_m, attr, 1)))
        method_body.append(simple("return {0}", gen.expr(scope_m, attr, 2)))
        body.append(_def(f"def {method}(self, t):", method_body))
        info.methods.append(method)
    gen.constructing.discard(cls)
    gen.add_top(_def(f"class {cls}:", body, defs=[cls]))
    gen.knobs.append((f"{cls}.scale changed", lambda rng, c=cls: [
        (f"{c}.scale = {rng.choice(['3.0', '0.25', '1.0'])}", frozenset([c]))]))
    gen.use("class")
    return info


def _objects(scope):
    return scope.all(lambda v: isinstance(v.slot, ObjT) and "self" not in v.name)


@statement("class", 1.5)
def new_object(gen, scope):
    info = any_class(gen, scope)
    args = [gen.expr(scope, slot, 1) for slot in info.init_slots]
    obj = gen.fresh("o")
    var = Var(obj, info.slot)
    var.roots = frozenset().union(*(scope.roots(arg) for arg in args))
    scope.add(var)
    if gen.chance(0.3):
        return [simple(f"{obj} = {{0}}(b={{2}}, a={{1}})", name(info.name), *args, defs=[obj])]
    return [simple(f"{obj} = {{0}}({{1}}, {{2}})", name(info.name), *args, defs=[obj])]


@statement("class", 0.6)
def global_object(gen, scope):
    """`o = OBJ`: a module-level instance, mutated through the local name."""
    existing = [name_ for name_, (kind, _) in gen.globals.items() if kind == "object"]
    if existing and gen.chance(0.6):
        holder = gen.choice(existing)
    else:
        info = any_class(gen, scope)
        holder = gen.fresh("OBJ")
        sizes = ", ".join(str(dim.coef) for dim in info.attr.shape)
        if slots.has_batch(info.attr.shape):
            return None
        var = Var(holder, info.slot, is_global=True)
        gen.globals[holder] = ("object", var)
        gen.add_top(Stmt([Clause(f"{holder} = {info.name}(_t(7, {sizes}), _t(8, {sizes}))",
                                 [], None)], frozenset([holder])))
        gen.knobs.append((f"{holder}.a rebound", lambda rng, h=holder, z=sizes: [
            (f"{h}.a = _t({rng.randint(100, 199)}, {z})", frozenset([h]))]))
    _, var = gen.globals[holder]
    local = gen.fresh("o")
    scope.add(Var(local, var.slot, roots=frozenset(["global"])))
    return [simple(f"{local} = {{0}}", name(holder, var.slot), defs=[local])]


@statement("class", 1.5)
def object_write(gen, scope):
    objects = _objects(scope)
    if not objects:
        return None
    var = gen.choice(objects)
    info = gen.classes[var.slot.cls]
    this = name(var.name, var.slot)
    kind = gen.choice(["attr", "attr", "method", "class_attr", "setattr", "new_attr"])
    if kind == "method" and info.methods:
        argument = gen.expr(scope, info.attr, 1)
        result = gen.fresh("t")
        scope.add(Var(result, info.attr))
        return [simple(f"{result} = {{0}}.{gen.choice(info.methods)}({{1}})", this, argument,
                       defs=[result])]
    if kind == "class_attr":
        fmt = gen.choice(["{0}.made += 1", "{0}.scale = {0}.scale * 0.5",
                          "type({1}).made += 1"])
        return [simple(fmt, name(info.name), this)]
    value = gen.expr(scope, info.attr, 1)
    attribute = gen.choice(["a", "b"])
    if kind == "setattr":
        return [simple(f'setattr({{0}}, "{attribute}", {{1}})', this, value)]
    if kind == "new_attr":
        return [simple("{0}.extra = {1}", this, value)]
    return [simple(f"{{0}}.{attribute} = {{1}}", this, value)]


@expression("tensor", "class", 1.0)
def object_read(gen, scope, slot, depth):
    options = [var for var in _objects(scope) if gen.classes[var.slot.cls].attr == slot]
    if not options:
        return None
    var = gen.choice(options)
    info = gen.classes[var.slot.cls]
    reads = ["{0}.a", "{0}.b", 'getattr({0}, "a")'] + [f"{{0}}.{prop}" for prop in info.props]
    fmt = gen.choice(reads)
    return op(fmt, slot, name(var.name, var.slot), view=fmt in ("{0}.a", "{0}.b"))


@expression("float", "class", 0.4)
def class_attr_read(gen, scope, slot, depth):
    # not a class whose body is being generated: a class made inside it is written out
    # first, and an instance made at module level would read a name not yet defined
    finished = sorted(set(gen.classes) - gen.constructing)
    if not finished:
        return None
    cls = gen.choice(finished)
    objects = [var for var in _objects(scope) if var.slot.cls == cls]
    if objects and gen.chance(0.5):
        return op("{0}.scale", FLOAT, name(gen.choice(objects).name))
    return op("{0}.scale", FLOAT, name(cls))


@expression("bool", "class", 0.3)
def object_test(gen, scope, slot, depth):
    objects = _objects(scope)
    if not objects:
        return None
    var = gen.choice(objects)
    fmt = gen.choice(["isinstance({0}, {1})", 'hasattr({0}, "extra")', "({0}.made > 1)"])
    if fmt == "({0}.made > 1)":
        return op(fmt, BOOL, name(var.slot.cls))
    return op(fmt, BOOL, name(var.name, var.slot), name(var.slot.cls))


# -- exceptions and context managers ------------------------------------------------------------
def exception_class(gen) -> ExcInfo:
    if gen.exception_info and gen.chance(0.5):
        return gen.exception_info[gen.choice(sorted(gen.exception_info))]
    cls = gen.fresh("Err")
    base = gen.choice(["Exception", "ValueError", "RuntimeError"])
    code = gen.chance(0.6)
    info = ExcInfo(cls, base, code)
    gen.exception_info[cls] = info
    if code:
        body = [_def("def __init__(self, msg, code):", [_line("super().__init__(msg)"),
                                                         _line("self.code = code")])]
        if gen.chance(0.4):
            body.append(_def("def __str__(self):",
                             [_line('return f"{self.args[0]} (code {self.code})"')]))
    else:
        body = [_line("pass")]
    gen.add_top(_def(f"class {cls}({base}):", body, defs=[cls]))
    gen.use("exception")
    return info


def context_class(gen, suppress=None) -> str:
    existing = [n for n in gen.contexts if suppress is None or (n in gen.suppressing) == suppress]
    if existing and gen.chance(0.5):
        return gen.choice(existing)
    cls = gen.fresh("Ctx")
    suppresses = gen.chance(0.3) if suppress is None else suppress
    enter = [_line(f"{cls}.depth += 1")]
    if gen.on("print") and gen.chance(0.5):
        enter.append(_line(f'print("enter", self.tag, {cls}.depth)'))
    enter.append(_line("return self"))
    leave = [_line(f"{cls}.depth -= 1")]
    if gen.on("print") and gen.chance(0.4):
        leave.append(_line('print("exit", self.tag, kind is not None)'))
    leave.append(_line("return kind is ValueError" if suppresses else "return False"))
    body = [_line("depth = 0"), _def("def __init__(self, tag):", [_line("self.tag = tag")]),
            _def("def __enter__(self):", enter),
            _def("def __exit__(self, kind, value, tb):", leave)]
    gen.add_top(_def(f"class {cls}:", body, defs=[cls]))
    gen.contexts.append(cls)
    if suppresses:
        gen.suppressing.add(cls)
    return cls


def context_function(gen) -> str:
    manager = gen.fresh("cm")
    say = gen.on("print")
    body = [_line(f'print("{manager} enter", scale)' if say else f"{manager}.entered += 1"),
            Stmt([Clause("try:", [], [_line("yield scale * 2")]),
                  Clause("finally:", [], [_line(f'print("{manager} exit")' if say else
                                                f"{manager}.entered -= 1")])])]
    gen.add_top(_def(f"def {manager}(scale):", body, defs=[manager],
                     decorator="@contextlib.contextmanager"))
    if not say:
        gen.add_top(_line(f"{manager}.entered = 0"))
    return manager


# -- module objects (types.ModuleType) ----------------------------------------------------------
NAMESPACE_ATTRS = {"scale": (FLOAT, ["0.5", "1.5", "-1.0", "2.0"]),
                   "n": (int_slot(1, 3), ["1", "2", "3"]),
                   "flag": (BOOL, ["True", "False"]),
                   "mode": (slots.STR, ["'a'", "'b'"])}


def namespace(gen) -> str:
    if gen.namespaces:
        return gen.choice(sorted(gen.namespaces))
    cfg = gen.fresh("cfg")
    lines = [Clause(f'{cfg} = types.ModuleType("{cfg}")', [], None)]
    for attribute, (_, values) in NAMESPACE_ATTRS.items():
        lines.append(Clause(f"{cfg}.{attribute} = {gen.choice(values)}", [], None))
    lines.append(Clause(f"{cfg}.calls = 0", [], None))
    gen.add_top(Stmt(lines, frozenset([cfg])))
    gen.namespaces[cfg] = dict(NAMESPACE_ATTRS)
    for attribute, (_, values) in NAMESPACE_ATTRS.items():
        gen.knobs.append((f"{cfg}.{attribute} changed", lambda rng, a=attribute, v=values: [
            (f"{cfg}.{a} = {rng.choice(v)}", frozenset([cfg]))]))
    gen.use("namespace")
    return cfg


def _namespace_read(kind):
    def build(gen, scope, slot, depth):
        cfg = namespace(gen)
        options = [attribute for attribute, (attr_slot, _) in NAMESPACE_ATTRS.items()
                   if attr_slot.kind == kind and slots.same_slot(attr_slot, slot)]
        if kind == "bool" and gen.chance(0.4):
            return op("({0}.mode == 'a')", BOOL, name(cfg))
        if not options:
            return None
        attribute = gen.choice(options)
        return op(f"{{0}}.{attribute}", NAMESPACE_ATTRS[attribute][0], name(cfg))
    build.__name__ = f"namespace_{kind}"
    return build


for _kind in ("float", "int", "bool", "str"):
    expression(_kind, "namespace", 0.7 if _kind != "str" else 0.3)(_namespace_read(_kind))


@statement("namespace", 0.6)
def namespace_write(gen, scope):
    cfg = namespace(gen)
    fmt = gen.choice(["{0}.calls += 1", "{0}.calls = {0}.calls + {1}"])
    return [simple(fmt, name(cfg), gen.expr(scope, int_slot(0, 3), 1))]


# -- globals ------------------------------------------------------------------------------------
def global_var(gen, kind: str) -> Var:
    existing = [var for known, var in gen.globals.values() if known == kind]
    if existing and gen.chance(0.6):
        return gen.choice(existing)
    if kind == "tensor":
        shape = gen.choice([(slots.Dim(gen.width),), (slots.Dim(gen.width),) * 2])
        var = Var(gen.fresh("W"), TensorT(shape), is_global=True, roots=frozenset(["global"]))
        sizes = ", ".join(str(dim.coef) for dim in shape)
        text = f"{var.name} = _t({gen.rng.randint(1, 99)}, {sizes})"
        gen.knobs.append((f"{var.name} rebound", lambda rng, v=var.name, s=sizes: [
            (f"{v} = _t({rng.randint(100, 199)}, {s})", frozenset([v]))]))
        gen.global_decls.add(var.name)
    elif kind == "counter":
        var = Var(gen.fresh("G"), int_slot(-99, 99), is_global=True)
        text = f"{var.name} = 0"
        gen.knobs.append((f"{var.name} rebound", lambda rng, v=var.name: [
            (f"{v} = {rng.randint(1, 5)}", frozenset([v]))]))
        gen.global_decls.add(var.name)
    else:
        var = Var(gen.fresh("LOG"), ListT(FLOAT), is_global=True)
        text = f"{var.name} = []"
        gen.knobs.append((f"{var.name} cleared", lambda rng, v=var.name: [
            (f"{v}.clear()", frozenset([v]))]))
    gen.globals[var.name] = (kind, var)
    gen.add_top(Stmt([Clause(text, [], None)], frozenset([var.name])))
    gen.use("global")
    return var


@expression("tensor", "global", 0.5)
def global_read(gen, scope, slot, depth):
    found = [var for _, var in gen.globals.values() if var.slot == slot]
    if not found:
        if slots.has_batch(slot.shape) or slot.rank not in (1, 2) or gen.chance(0.5):
            return None
        var = global_var(gen, "tensor")
        if var.slot != slot:
            return None
        found = [var]
    var = gen.choice(found)
    return name(var.name, var.slot)


@expression("int", "global", 0.3)
def counter_read(gen, scope, slot, depth):
    if slot.hi < 99:
        return None
    return name(global_var(gen, "counter").name, int_slot(-99, 99))


@statement("global", 1.2)
def global_write(gen, scope):
    kind = gen.choice(["counter", "log", "tensor"])
    var = global_var(gen, kind)
    this = name(var.name, var.slot)
    if kind == "log":
        value = gen.expr(scope, FLOAT, 1)
        return [simple(gen.choice(["{0}.append({1})", "{0}.extend([{1}])"]), this, value)]
    scope.func.globals_written.add(var.name)
    if kind == "counter":
        return [simple(gen.choice(["{0} += 1", "{0} = {0} + {1}"]), this,
                       gen.expr(scope, int_slot(0, 3), 1))]
    value = gen.expr(scope, var.slot, 1)
    return [simple(gen.choice(["{0} = {0} * 0.5 + {1}", "{0} = {1}"]), this,
                   op("{0}.detach()", var.slot, value))]


__all__ = ["ClassInfo", "ExcInfo", "Dead", "ClassT", "ScalarT", "lit"]
