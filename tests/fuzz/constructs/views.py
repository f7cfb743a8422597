"""Views kept in variables, and in-place writes (through views too).

Stage: generation (constructs). Input: a scope. Output: statements binding views
(`v = x.view(-1)`, `x.T`, `x[0]`, `x[:, 1]`, `x[:2]`, `x.unsqueeze(0)`) and writing tensors in
place (`add_`, `mul_`, `clamp_`, `copy_`, `zero_`, `x[i] = ...`, `x[:, j] = ...`, `x[m] = ...`,
`+=`, `out=`).

A write never targets a tensor that may view a leaf requiring grad (eager raises outside
no_grad), and its operand never shares storage with the target (it is cloned if it might).
"""
from __future__ import annotations

from tests.fuzz import slots
from tests.fuzz.constructs.tensors import bind
from tests.fuzz.grammar import statement
from tests.fuzz.slots import FLOAT, Dim, TensorT
from tests.fuzz.tree import name, op, simple


def _views(gen, var):
    """(format, result slot, contiguous) of the views of `var` that are valid for every N."""
    shape = var.slot.shape
    dense = var.contiguous
    out = []
    if len(shape) >= 2:
        out.append(("{0}.reshape(-1)", (slots.numel(shape),), dense))
        if dense:
            out.append(("{0}.view(-1)", (slots.numel(shape),), True))
            if len(shape) == 3:
                out.append(("{0}.view({0}.shape[0], -1)", (shape[0], shape[1].times(shape[2])),
                            True))
    if len(shape) == 2:
        out.append((gen.choice(["{0}.T", "{0}.transpose(0, 1)", "{0}.t()"]),
                    (shape[1], shape[0]), False))
        size = shape[1].smallest
        out.append(("{0}[:, %d]" % gen.rng.randrange(-size, size), (shape[0],), False))
    if shape:
        size = shape[0].smallest
        out.append(("{0}[%d]" % gen.rng.randrange(-size, size), shape[1:], dense))
        if size >= 2:
            out.append(("{0}[:2]", (Dim(2),) + shape[1:], dense))
            out.append(("{0}[-2:]", (Dim(2),) + shape[1:], dense))
            out.append(("{0}.narrow(0, 1, 1)", (Dim(1),) + shape[1:], dense))
        out.append(("{0}.unsqueeze(0)", (Dim(1),) + shape, dense))
        last = shape[-1]
        if last.power == 0 and last.coef % 2 == 0 and len(shape) <= 2:
            out.append((f"{{0}}.unflatten(-1, (2, {last.coef // 2}))",
                        shape[:-1] + (Dim(2), Dim(last.coef // 2)), dense))
    if shape and shape[0] == Dim(1):
        out.append(("{0}.squeeze(0)", shape[1:], dense))
    if len(shape) == 2 and shape[0] == shape[1]:
        out.append(("{0}.diagonal()", (shape[0],), False))
    return out


@statement("view", 2.5)
def keep_view(gen, scope):
    var = scope.pick(gen.rng, lambda v: slots.is_float_tensor(v.slot) and v.slot.shape)
    if var is None:
        return None
    fmt, shape, dense = gen.choice(_views(gen, var))
    expr = op(fmt, TensorT(shape), name(var.name, var.slot), view=True, contiguous=dense)
    stmt, _ = bind(gen, scope, expr, "v")
    return [stmt]


def _target(gen, scope):
    candidates = [var for var in scope.float_tensors()
                  if gen.inplace_ok(scope, name(var.name, var.slot))]
    return gen.choice(candidates) if candidates else None


def _operand(gen, scope, target, slot):
    """An operand for writing into `target`: cloned if it might share its storage."""
    expr = gen.expr(scope, slot, 1)
    mine = scope.roots(name(target.name, target.slot)) | {target.name}
    shared = any(scope.roots(name(used)) & mine or used in mine for used in expr.uses())
    if shared:
        expr = op("{0}.clone()", slot, expr)
    return expr


def _broadcast_slot(gen, scope, shape):
    smaller = [var.slot for var in scope.float_tensors()
               if slots.broadcasts_to(var.slot.shape, shape)]
    return gen.choice(smaller) if smaller and gen.chance(0.3) else TensorT(shape)


@statement("inplace", 3.0)
def write_method(gen, scope):
    target = _target(gen, scope)
    if target is None:
        return None
    shape = target.slot.shape
    kind = gen.choice(["operand", "operand", "scalar", "plain", "plain", "out"])
    this = name(target.name, target.slot)
    if kind == "operand":
        method = gen.choice(["add_", "sub_", "mul_", "copy_", "add_"])
        slot = _broadcast_slot(gen, scope, shape)
        other = _operand(gen, scope, target, slot)
        extra = ", alpha=0.5" if method == "add_" and gen.chance(0.3) else ""
        return [simple(f"{{0}}.{method}({{1}}{extra})", this, other)]
    if kind == "scalar":
        method = gen.choice(["mul_", "add_", "div_", "fill_", "sub_"])
        scalar = gen.expr(scope, FLOAT, 1)
        if method == "div_":
            return [simple("{0}.div_(abs({1}) + 1)", this, scalar)]
        return [simple(f"{{0}}.{method}({{1}})", this, scalar)]
    if kind == "out":
        if target.slot.shape != shape or not target.contiguous:
            return None
        a, b = (_operand(gen, scope, target, TensorT(shape)) for _ in range(2))
        return [simple(gen.choice(["torch.add({1}, {2}, out={0})", "torch.mul({1}, {2}, out={0})"]),
                       this, a, b)]
    method = gen.choice(["clamp_(-1.0, 1.0)", "zero_()", "relu_()", "sin_()", "abs_()",
                         "masked_fill_({0} > 0.5, 0.0)", "neg_()", "tanh_()", "fill_(0.25)",
                         "add_(1).mul_(0.5)"])
    return [simple("{0}." + method, this)]


@statement("inplace", 2.5)
def write_index(gen, scope):
    target = _target(gen, scope)
    if target is None or not target.slot.shape:
        return None
    shape = target.slot.shape
    this = name(target.name, target.slot)
    options = []
    size = shape[0].smallest
    index = gen.rng.randrange(-size, size)
    options.append((f"{{0}}[{index}] = {{1}}", shape[1:]))
    if size >= 2:
        options.append(("{0}[:2] = {1}", (Dim(2),) + shape[1:]))
        options.append(("{0}[1:2] = {1}", (Dim(1),) + shape[1:]))
    if len(shape) == 2:
        column = gen.rng.randrange(-shape[1].smallest, shape[1].smallest)
        options.append((f"{{0}}[:, {column}] = {{1}}", shape[:1]))
        options.append((f"{{0}}[{index}, {column}] = {{1}}", ()))
    fmt, slot = gen.choice(options)
    if gen.chance(0.3):
        return [simple(fmt, this, gen.expr(scope, FLOAT, 1))]
    return [simple(fmt, this, _operand(gen, scope, target, TensorT(slot)))]


@statement("inplace", 1.0)
def write_masked(gen, scope):
    target = _target(gen, scope)
    if target is None or not target.slot.shape:
        return None
    this = name(target.name, target.slot)
    if gen.chance(0.5):
        return [simple("{0}[{0} < -0.5] *= 2", this)]
    return [simple("{0}[{0} > 0] = {1}", this, gen.expr(scope, FLOAT, 1))]


@statement("inplace", 1.5)
def augmented(gen, scope):
    """`t += u`: in place for tensors (the name keeps pointing at the same tensor)."""
    target = _target(gen, scope)
    if target is None or not scope.owned(target):
        return None
    this = name(target.name, target.slot)
    fmt = gen.choice(["{0} += {1}", "{0} *= {1}", "{0} -= {1}"])
    if gen.chance(0.3):
        return [simple(fmt, this, gen.expr(scope, FLOAT, 1))]
    slot = _broadcast_slot(gen, scope, target.slot.shape)
    return [simple(fmt, this, _operand(gen, scope, target, slot))]
