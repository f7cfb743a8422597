"""Tensor expressions (pointwise, reductions, matmul, indexing reads, creation) and the
statements that bind them.

Stage: generation (constructs). Input: a scope and a tensor slot. Output: `Expr`s whose value
has that slot's shape for every batch size in range, and assignment statements.

Values stay small and mostly exact: inputs are multiples of 0.25 in [-2, 2], the unary ops are
bounded (no exp/log of unbounded values), divisions are by `|y| + 1`.
"""
from __future__ import annotations

from tests.fuzz import slots
from tests.fuzz.generator import Dead
from tests.fuzz.grammar import expression, statement
from tests.fuzz.scope import Var
from tests.fuzz.slots import Dim, TensorT
from tests.fuzz.tree import Expr, lit, name, op, simple

UNARY = ["{0}.sin()", "torch.tanh({0})", "{0}.relu()", "({0} * 0.5)", "{0}.abs()",
         "torch.sigmoid({0})", "(-{0})", "{0}.clamp(-1.0, 1.0)", "torch.cos({0})",
         "torch.nn.functional.gelu({0})", "{0}.square()", "torch.nn.functional.silu({0})",
         "({0} + 1)", "(2 - {0})", "torch.clamp({0}, min=-0.5)", "{0}.neg()"]
BINARY = ["({0} + {1})", "({0} - {1})", "({0} * {1})", "torch.maximum({0}, {1})",
          "({0} / ({1}.abs() + 1))", "torch.add({0}, {1}, alpha=0.5)", "{0}.sub({1})",
          "torch.minimum({0}, {1})", "{0}.mul({1})"]
SAME_SHAPE = ["{0}.cumsum(0)", "{0}.flip(0)", "{0}.roll(1, 0)", "{0}.masked_fill({0} > 0.5, 0.0)",
              "torch.where({0} > 0, {0}, {0} * 0.1)", "torch.nn.functional.leaky_relu({0}, 0.2)"]
SAME_SHAPE_TWO = ["torch.where({0} > {1}, {0}, {1})", "({0} * 0.75 + {1} * 0.25)",
                  "torch.stack([{0}, {1}]).sum(0)", "torch.stack([{0}, {1}]).amax(0)",
                  "torch.addcmul({0}, {1}, {1}, value=0.5)"]
REDUCE = ["{0}.sum({1})", "{0}.mean({1})", "{0}.amax({1})", "{0}.amin({1})",
          "torch.sum({0}, dim={1})", "{0}.std({1})", "{0}.logsumexp({1})"]
REDUCE_ALL = ["{0}.sum()", "{0}.mean()", "{0}.amax()", "{0}.max()", "{0}.norm()",
              "{0}.abs().sum()", "torch.sum({0})"]
MATMUL = ["({0} @ {1})", "torch.matmul({0}, {1})", "{0}.matmul({1})", "torch.mm({0}, {1})"]
TRANSPOSE = ["{0}.T", "{0}.t()", "{0}.transpose(0, 1)", "{0}.permute(1, 0)", "{0}.mT"]
LIKE = ["torch.zeros_like({0})", "torch.ones_like({0})", "torch.full_like({0}, 0.5)",
        "{0}.clone()", "{0}.detach()", "({0} * 0)", "{0}.contiguous()"]


def _text(fmt: str, extra) -> str:
    """`fmt` with a fixed value (axis, index) substituted for {1}."""
    return fmt.replace("{1}", str(extra))


@expression("tensor", "tensor", 4.0)
def leaf(gen, scope, slot, depth):
    return gen.leaf(scope, slot)


@expression("tensor", "tensor", 2.0)
def unary(gen, scope, slot, depth):
    if depth <= 0 or slot.dtype != "float":
        return None
    return op(gen.choice(UNARY), slot, gen.expr(scope, slot, depth - 1))


@expression("tensor", "tensor", 2.5)
def binary(gen, scope, slot, depth):
    if depth <= 0 or slot.dtype != "float":
        return None
    first = gen.expr(scope, slot, depth - 1)
    smaller = [var.slot for var in scope.float_tensors()
               if slots.broadcasts_to(var.slot.shape, slot.shape)]
    other = gen.choice(smaller) if smaller and gen.chance(0.4) else slot
    second = gen.expr(scope, other, depth - 1)
    if gen.chance(0.5):
        first, second = second, first
        if first.slot != slot:  # keep the full shape on the left for x.sub(y)-style ops
            return op(gen.choice(["({0} + {1})", "({0} * {1})", "({0} - {1})"]), slot,
                      first, second)
    return op(gen.choice(BINARY), slot, first, second)


@expression("tensor", "tensor", 1.2)
def with_scalar(gen, scope, slot, depth):
    if depth <= 0 or slot.dtype != "float":
        return None
    tensor = gen.expr(scope, slot, depth - 1)
    scalar = gen.expr(scope, slots.FLOAT if gen.chance(0.7) else slots.INT, 1)
    fmt = gen.choice(["({0} * {1})", "({0} + {1})", "({0} - {1})", "({1} * {0})",
                      "torch.mul({0}, {1})"])
    return op(fmt, slot, tensor, scalar)


@expression("tensor", "tensor", 1.5)
def reduction(gen, scope, slot, depth):
    if slot.dtype != "float":
        return None
    options = []
    for var in scope.float_tensors():
        shape = var.slot.shape
        if not slot.shape and shape:
            options.append((var, None, False))
        for axis in range(len(shape)):
            if slots.reduce_shape(shape, axis) == slot.shape:
                options.append((var, axis, False))
            if slots.reduce_shape(shape, axis, True) == slot.shape:
                options.append((var, axis, True))
    if not options:
        return None
    var, axis, keep = gen.choice(options)
    source = gen.expr(scope, var.slot, depth - 1) if depth > 0 else name(var.name, var.slot)
    if axis is None:
        return op(gen.choice(REDUCE_ALL), slot, source, contiguous=True)
    fmt = gen.choice(REDUCE)
    index = gen.choice([axis, axis - len(var.slot.shape)])
    if keep:
        fmt = fmt[:-1].replace("{1}", "{1}, keepdim=True") + ")"
    return op(_text(fmt, index), slot, source, contiguous=True)


@expression("tensor", "tensor", 1.0)
def matmul(gen, scope, slot, depth):
    if slot.dtype != "float" or len(slot.shape) not in (1, 2):
        return None
    shapes = {var.slot.shape for var in scope.float_tensors() if len(var.slot.shape) in (1, 2)}
    options = []
    for a in shapes:
        for b in shapes:
            if slots.matmul_shape(a, b) == slot.shape:
                options.append((a, b, False))
            if len(b) == 2 and slots.matmul_shape(a, (b[1], b[0])) == slot.shape:
                options.append((a, b, True))
    if not options:
        return None
    a, b, transposed = gen.choice(options)
    gen.dtype_fixed = True  # float64 inputs times float32 constants would raise
    left = gen.expr(scope, TensorT(a), depth - 1) if depth > 0 else gen.leaf(scope, TensorT(a))
    right = gen.expr(scope, TensorT(b), depth - 1) if depth > 0 else gen.leaf(scope, TensorT(b))
    fmt = gen.choice(MATMUL if len(a) == len(b) == 2 else MATMUL[:3])
    if transposed:
        fmt = fmt.replace("{1}", "{1}.T")
    return op(fmt, slot, left, right, contiguous=True)


@expression("tensor", "tensor", 0.6)
def transposed(gen, scope, slot, depth):
    if len(slot.shape) != 2:
        return None
    flipped = TensorT((slot.shape[1], slot.shape[0]), slot.dtype)
    source = gen.leaf(scope, flipped)
    if source is None:
        return None
    return op(gen.choice(TRANSPOSE), slot, source, view=True)


@expression("tensor", "tensor", 0.5)
def flattened(gen, scope, slot, depth):
    if len(slot.shape) != 1:
        return None
    options = [var for var in scope.tensors() if len(var.slot.shape) >= 2 and
               var.slot.dtype == slot.dtype and slots.numel(var.slot.shape) == slot.shape[0]]
    if not options:
        return None
    var = gen.choice(options)
    fmt = gen.choice(["{0}.reshape(-1)", "{0}.flatten()", "torch.flatten({0})"])
    return op(fmt, slot, name(var.name, var.slot), view=True)


@expression("tensor", "tensor", 1.0)
def selected(gen, scope, slot, depth):
    options = []
    for var in scope.tensors(lambda v: v.slot.dtype == slot.dtype):
        shape = var.slot.shape
        if shape and shape[1:] == slot.shape:
            options.append((var, 0))
        if len(shape) == 2 and shape[:1] == slot.shape:
            options.append((var, 1))
    if not options:
        return None
    var, axis = gen.choice(options)
    size = var.slot.shape[axis].smallest
    index = gen.rng.randint(-size, size - 1)
    fmt = {0: gen.choice(["{0}[{1}]", "{0}.select(0, {1})", "{0}[{1}, ...]"]),
           1: gen.choice(["{0}[:, {1}]", "{0}.select(1, {1})", "{0}[..., {1}]"])}[axis]
    return op(_text(fmt, index), slot, name(var.name, var.slot), view=True)


@expression("tensor", "tensor", 0.3)
def unsqueezed(gen, scope, slot, depth):
    positions = [k for k, dim in enumerate(slot.shape) if dim == Dim(1)]
    if not positions:
        return None
    k = gen.choice(positions)
    source = gen.leaf(scope, TensorT(slot.shape[:k] + slot.shape[k + 1:], slot.dtype))
    if source is None:
        return None
    fmt = gen.choice([f"{{0}}.unsqueeze({k})", f"{{0}}.unsqueeze({k - len(slot.shape)})"] +
                     (["{0}[None]"] if k == 0 else []))
    return op(fmt, slot, source, view=True)


@expression("tensor", "tensor", 0.8)
def same_shape(gen, scope, slot, depth):
    if depth <= 0 or slot.dtype != "float" or not slot.shape:
        return None
    if gen.chance(0.5):
        return op(gen.choice(SAME_SHAPE), slot, gen.expr(scope, slot, depth - 1))
    return op(gen.choice(SAME_SHAPE_TWO), slot, gen.expr(scope, slot, depth - 1),
              gen.expr(scope, slot, depth - 1))


PADDED = [  # pads by amounts computed from sizes (symbolic under dynamic shapes)
    "torch.nn.functional.pad({0}, (0, (-{0}.shape[-1]) % 8), value={1})[..., :{0}.shape[-1]]",
    "({0} + torch.nn.functional.pad({0}, (0, (-{0}.shape[-1]) % 8), value={1})"
    ".sum(-1, keepdim=True))",
    "({0} - torch.nn.functional.pad({0}, ((8 - {0}.shape[-1] % 8) % 8, 1), value={1})"
    ".mean(-1, keepdim=True))",
    "({0} + torch.nn.functional.pad({0}, ({0}.shape[-1] // 3, (-{0}.shape[-1]) // 4 + "
    "{0}.shape[-1]), value={1}).amax(-1, keepdim=True))",
]
PADDED_ROWS = ("({0} * torch.nn.functional.pad({0}, (0, 0, 1, (-{0}.shape[0]) % 4), "
               "value={1}).sum(0))")


@expression("tensor", "tensor", 0.25)
def padded(gen, scope, slot, depth):
    """A pad whose amounts are size expressions, `(-n) % 8` (CUDA attention's mask padding)
    and floor divisions of sizes, with padded positions read by a reduction: C's `%` of a
    negative size expression padded by a negative amount (wrong values, issue 23)."""
    if slot.dtype != "float" or not slot.shape:
        return None
    source = gen.leaf(scope, slot)
    if source is None:
        return None
    formats = PADDED + ([PADDED_ROWS] if len(slot.shape) == 2 else [])
    fmt = _text(gen.choice(formats), gen.choice(["0.0", "-1.0", "2.5"]))
    return op(fmt, slot, source)


@expression("tensor", "tensor", 0.3)
def concatenated(gen, scope, slot, depth):
    if depth <= 0 or not slot.shape:
        return None
    first = slot.shape[0]
    if first.coef == 2 and gen.chance(0.5) and len(slot.shape) >= 1 and slot.shape[1:]:
        return op("torch.stack([{0}, {1}])", slot,
                  gen.expr(scope, TensorT(slot.shape[1:]), depth - 1),
                  gen.expr(scope, TensorT(slot.shape[1:]), depth - 1), contiguous=True)
    if first.coef % 2:
        return None
    half = TensorT((Dim(first.coef // 2, first.power),) + slot.shape[1:])
    return op("torch.cat([{0}, {1}])", slot, gen.expr(scope, half, depth - 1),
              gen.expr(scope, half, depth - 1), contiguous=True)


@expression("tensor", "tensor", 0.4)
def like(gen, scope, slot, depth):
    source = gen.leaf(scope, slot)
    if source is None:
        return None
    fmt = gen.choice(LIKE)
    return op(fmt, slot, source, view=fmt == "{0}.detach()",
              contiguous=fmt == "{0}.contiguous()")


@expression("tensor", "tensor", 0.3)
def constant(gen, scope, slot, depth):
    shape = slot.shape
    if slot.dtype != "float":
        return None
    if slots.has_batch(shape):
        return _batch_constant(gen, scope, slot)
    sizes = [dim.coef for dim in shape]
    text = ", ".join(map(str, sizes))
    options = [f"torch.ones({text})", f"torch.full(({text}{',' if len(sizes) == 1 else ''}), 0.5)",
               f"torch.zeros({text})"]
    if len(sizes) == 1:
        values = ", ".join(gen.choice(["0.5", "-1.0", "2.0", "0.25", "1.5"])
                           for _ in range(sizes[0]))
        options += [f"torch.arange({sizes[0]}.0)", f"torch.linspace(-1, 1, {sizes[0]})",
                    f"torch.tensor([{values}])"]
    if len(sizes) == 2 and sizes[0] == sizes[1]:
        options.append(f"torch.eye({sizes[0]})")
    if not sizes:
        options = ["torch.tensor(0.5)", "torch.tensor(-1.5)", "torch.ones(())"]
    return Expr(gen.choice(options), [], slot, contiguous=True)


def _batch_constant(gen, scope, slot):
    """`torch.ones(v.shape[k], 3)`: the batch size read from a tensor in scope."""
    if any(dim.power > 1 for dim in slot.shape):
        return None
    for var in scope.tensors():
        for k, dim in enumerate(var.slot.shape):
            if dim != slots.BATCH:
                continue
            parts = [str(target.coef) if target.power == 0 else
                     f"{{0}}.shape[{k}]" + ("" if target.coef == 1 else f" * {target.coef}")
                     for target in slot.shape]
            fmt = gen.choice(["torch.ones(", "torch.zeros("]) + ", ".join(parts) + ")"
            return op(fmt, slot, name(var.name, var.slot), contiguous=True)
    return None


@expression("tensor", "tensor", 0.2)
def masked_total(gen, scope, slot, depth):
    if slot.shape or slot.dtype != "float":
        return None
    var = scope.pick(gen.rng, lambda v: slots.is_float_tensor(v.slot) and v.slot.shape)
    if var is None:
        return None
    fmt = gen.choice(["{0}[{0} > 0].sum()", "{0}[{0}.argmax()]" if len(var.slot.shape) == 1
                      else "{0}.flatten()[{0}.argmax()]", "{0}[{0} < 0.5].abs().sum()"])
    return op(fmt, slot, name(var.name, var.slot))


# -- statements ---------------------------------------------------------------------------------
def bind(gen, scope, expr: Expr, prefix: str = "t") -> tuple:
    """`tN = expr` and the new variable."""
    var_name = gen.fresh(prefix)
    roots = scope.roots(expr)
    var = Var(var_name, expr.slot, roots=frozenset(roots), contiguous=scope.contiguous(expr))
    var.grad_leaf = bool(roots & gen.local_grad_roots)
    scope.add(var)
    return simple(f"{var_name} = {{0}}", expr, defs=[var_name]), var


@statement("tensor", 8.0)
def assign(gen, scope):
    slot = TensorT(gen.shape_of_choice(scope))
    stmt, _ = bind(gen, scope, gen.expr(scope, slot, gen.rng.randint(1, 3)))
    return [stmt]


@statement("tensor", 2.0)
def rebind(gen, scope):
    var = scope.pick(gen.rng, lambda v: isinstance(v.slot, TensorT) and scope.owned(v) and
                     v.slot.dtype == "float")
    if var is None:
        return None
    expr = gen.expr(scope, var.slot, 2)
    if name(var.name).fmt not in expr.uses() and gen.chance(0.7):
        expr = op(gen.choice(["({0} + {1})", "({0} * {1})", "({1} - {0})"]), var.slot,
                  name(var.name, var.slot), expr)
    roots = scope.roots(expr)
    var.roots = frozenset(roots)
    var.contiguous = scope.contiguous(expr)
    var.grad_leaf = bool(roots & gen.local_grad_roots)
    return [simple(f"{var.name} = {{0}}", expr)]


__all__ = ["bind", "lit", "Dead"]
