"""`nn.Module` subclasses with parameters and buffers, a generated `forward`, and calls.

Stage: generation (constructs). Input: a scope. Output: a module class and a global instance
(made once, on first use), statements calling it, and knobs that switch train/eval, rebind a
plain attribute, or set a buffer registered as None between calls.

Parameters are set from `_t` after construction, so every instance starts the same.
"""
from __future__ import annotations

import dataclasses

from tests.fuzz import slots
from tests.fuzz.constructs.objects import _def, _line
from tests.fuzz.grammar import expression, statement
from tests.fuzz.scope import FuncCtx, Scope, Var
from tests.fuzz.slots import FLOAT, Dim, ModT, TensorT
from tests.fuzz.tree import Clause, Stmt, compound, name, op, simple


@dataclasses.dataclass
class ModuleInfo:
    cls: str
    instance: str
    slot: ModT
    has_extra: bool


def any_module(gen, scope) -> ModuleInfo:
    ready = sorted(set(gen.modules) - gen.constructing)
    if ready and gen.chance(0.7):
        return gen.modules[gen.choice(ready)]
    return make_module(gen, scope)


def make_module(gen, scope) -> ModuleInfo:
    gen.dtype_fixed = True  # its parameters are float32
    width = gen.width
    m = Dim(width)
    inp = TensorT(gen.choice([(slots.BATCH, m), (m,)]))
    cls, instance = gen.fresh("Net"), gen.fresh("NET")
    has_extra = gen.chance(0.4)
    info = ModuleInfo(cls, instance, ModT(cls, inp, inp), has_extra)
    gen.modules[cls] = info
    gen.constructing.add(cls)
    init = [_line("super().__init__()"),
            _line(f"self.lin = torch.nn.Linear({width}, {width})"),
            _line(f"self.w = torch.nn.Parameter(_t({gen.rng.randint(1, 99)}, {width}))"),
            _line(f'self.register_buffer("avg", torch.zeros({width}))'),
            _line(f"self.alpha = {gen.choice(['0.5', '1.5'])}")]
    if has_extra:
        init.append(_line('self.register_buffer("extra", None)'))
    init.append(compound([("with torch.no_grad():", [], [
        _line(f"self.lin.weight.copy_(_t({gen.rng.randint(1, 99)}, {width}, {width}))"),
        _line(f"self.lin.bias.copy_(_t({gen.rng.randint(1, 99)}, {width}))")])]))
    body = [_def("def __init__(self):", init), _def("def forward(self, t):",
                                                     _forward(gen, info))]
    gen.constructing.discard(cls)
    gen.add_top(_def(f"class {cls}(torch.nn.Module):", body, defs=[cls]))
    gen.add_top(Stmt([Clause(f"{instance} = {cls}()", [], None)], frozenset([instance])))
    _knobs(gen, info)
    gen.use("module")
    return info


def _forward(gen, info: ModuleInfo) -> list:
    scope = Scope(FuncCtx("forward", f"{info.cls}.forward"))
    scope.may_raise = False  # modules are also called from constructors
    vector = TensorT((Dim(gen.width),))
    gen.local_grad_roots.add("param")
    scope.add(Var("self", info.slot, rebindable=False))
    scope.add(Var("t", info.slot.inp, roots=frozenset(gen.grad_params) | {"attr"}))
    scope.add(Var("self.w", vector, roots=frozenset(["param"]), rebindable=False))
    scope.add(Var("self.avg", vector, roots=frozenset(["buffer"]), rebindable=False))
    scope.add(Var("self.alpha", FLOAT, rebindable=False))
    body = gen.statements(scope, gen.rng.randint(0, 3))
    out = gen.expr(scope, info.slot.out, 2)
    if gen.chance(0.6):
        mean = "t.mean(0)" if len(info.slot.inp.shape) == 2 else "t"
        update = _line(f"self.avg.mul_(0.9).add_({mean}.detach() * 0.1)")
        body.append(compound([("if self.training:", [], [update])]))
    result = gen.fresh("out")
    body.append(simple(f"{result} = {{0}}", out, defs=[result]))
    if info.has_extra:
        body.append(compound([("if self.extra is not None:", [], [
            _line(f"{result} = {result} + self.extra")])]))
    body.append(_line(f"return {result}"))
    return gen.declarations(scope.func) + body


def _knobs(gen, info: ModuleInfo) -> None:
    instance = info.instance
    names = frozenset([instance])
    gen.knobs.append((f"{instance}.train(False)", lambda rng: [
        (f"{instance}.train({rng.choice(['False', 'True'])})", names)]))
    gen.knobs.append((f"{instance}.alpha changed", lambda rng: [
        (f"{instance}.alpha = {rng.choice(['0.25', '2.0'])}", names)]))
    if info.has_extra:
        gen.knobs.append((f"{instance}.extra set", lambda rng: [
            (f"{instance}.extra = _t({rng.randint(1, 99)}, {gen.width})", names)]))


@expression("tensor", "module", 0.8)
def layer(gen, scope, slot, depth):
    """Inside forward: `self.lin(...)`, `self.w`-scaled terms."""
    if scope.func.kind != "forward" or not slot.shape or slot.shape[-1] != Dim(gen.width):
        return None
    if depth <= 0:
        return None
    inner = gen.expr(scope, slot, depth - 1)
    fmt = gen.choice(["self.lin({0})", "({0} * self.w)", "({0} + self.avg)",
                      "({0} * self.alpha)", "torch.nn.functional.linear({0}, self.lin.weight)"])
    return op(fmt, slot, inner)


@statement("module", 1.5)
def call_module(gen, scope):
    holders = scope.all(lambda v: isinstance(v.slot, ModT) and v.name != "self" and
                        v.slot.cls not in gen.constructing)
    if holders and gen.chance(0.6):
        holder = gen.choice(holders)
        module, info = name(holder.name, holder.slot), gen.modules[holder.slot.cls]
    else:
        info = any_module(gen, scope)
        module = name(info.instance, info.slot)
    arg = gen.expr(scope, info.slot.inp, 1)
    result = gen.fresh("t")
    scope.add(Var(result, info.slot.out))
    if gen.chance(0.2):
        return [simple(f"{result} = {{0}}.lin({{1}})", module, arg, defs=[result])]
    return [simple(f"{result} = {{0}}({{1}})", module, arg, defs=[result])]
