"""The graph fuzzer's computing op families: pointwise math, casts, reductions, matrix
products, normalisations, scans and sorts.

Input: the `Generator` (live values, fresh inputs, randomness). Output: per family, a
function returning `(code, defined names)` for one candidate statement, or None; the
generator runs each candidate eagerly and keeps those that succeed.
"""
from __future__ import annotations

import torch

from tests.fuzz.graphs.generator import fmt
from tests.fuzz.graphs.program import DTYPES, FLOAT_NAMES

UNARY_ANY = [
    "torch.abs({x})", "-{x}", "{x}.neg()", "torch.sign({x})", "torch.square({x})",
    "{x}.clamp({lo}, {hi})", "torch.clamp_min({x}, {lo})", "{x}.clamp(max={hi})",
    "torch.relu({x})", "torch.logical_not({x})", "{x}.bool()", "{x}.float()",
    "{x}.to(torch.float64)", "{x}.to(torch.int32)", "{x}.to(torch.float16)",
    "{x}.to(torch.bfloat16)", "{x}.long()", "torch.isnan({x})", "{x}.clone()",
    "{x}.contiguous()", "{x} * {s}", "{s} - {x}", "{x} + {s}", "{x} / {s}",
]
UNARY_FLOAT = [
    "torch.sin({x})", "{x}.cos()", "torch.exp({x}.clamp(-20, 20))", "torch.tanh({x})",
    "torch.sigmoid({x})", "torch.log({x}.abs() + 1)", "torch.sqrt({x}.abs())",
    "torch.rsqrt({x}.abs() + 0.5)", "{x}.reciprocal()", "torch.erf({x})", "torch.floor({x})",
    "torch.ceil({x})", "torch.round({x})", "torch.trunc({x})", "torch.frac({x})",
    "torch.expm1({x}.clamp(max=10))", "torch.log1p({x}.abs())", "torch.atan({x})",
    "F.gelu({x})", "F.gelu({x}, approximate='tanh')", "F.silu({x})", "F.softplus({x})",
    "F.leaky_relu({x}, 0.1)", "F.hardtanh({x})", "F.elu({x})", "F.relu6({x})",
    "F.hardswish({x})", "F.hardsigmoid({x})", "F.mish({x})", "torch.isinf({x})",
    "torch.isfinite({x})", "torch.nan_to_num({x})", "torch.nan_to_num({x}, 0.0, 1.0, -1.0)",
    "torch.signbit({x})", "torch.cosh({x}.clamp(-5, 5))", "torch.exp2({x}.clamp(-20, 20))",
    "torch.log2({x}.abs() + 0.25)", "{x} ** 2", "{x}.abs() ** 0.5", "2 ** {x}.clamp(-8, 8)",
    "{x}.nan_to_num(0.0).clamp(-100, 100).to(torch.int64)",
    "{x}.nan_to_num(0.0).clamp(-100, 100).to(torch.int32)",
    "{x}.nan_to_num(0.0).clamp(0, 200).to(torch.uint8)",
    "torch.round({x}, decimals=2)", "torch.round({x}, decimals=-1)",
]
UNARY_INT = ["torch.bitwise_not({x})", "~{x}", "{x} // 2", "{x} % 3", "{x}.abs() + 1"]

BINARY = [
    "{x} + {y}", "{x} - {y}", "{x} * {y}", "{x} / {y}", "torch.add({x}, {y}, alpha={alpha})",
    "torch.sub({x}, {y})", "torch.mul({x}, {y})", "torch.div({x}, {y})",
    "torch.maximum({x}, {y})", "torch.minimum({x}, {y})", "{x} == {y}", "{x} != {y}",
    "{x} < {y}", "{x} <= {y}", "{x} > {y}", "{x} >= {y}", "torch.eq({x}, {y})",
    "torch.logical_and({x}, {y})", "torch.logical_or({x}, {y})", "torch.logical_xor({x}, {y})",
    "torch.where({x} > 0, {x}, {y})",
]
BINARY_FLOAT = [
    "torch.atan2({x}, {y})", "torch.fmax({x}, {y})", "torch.fmin({x}, {y})",
    "torch.hypot({x}, {y})", "torch.copysign({x}, {y})", "torch.remainder({x}, {y})",
    "torch.fmod({x}, {y})", "{x} // {y}", "{x} % {y}",
    "torch.div({x}, {y}, rounding_mode='floor')", "torch.div({x}, {y}, rounding_mode='trunc')",
    "torch.pow({x}.abs() + 0.5, {y}.clamp(-2, 2))", "torch.lerp({x}, {y}, 0.3)",
    "torch.xlogy({x}, {y}.abs())",
]
BINARY_INT = [
    "{x} & {y}", "{x} | {y}", "{x} ^ {y}", "torch.bitwise_and({x}, {y})",
    "{x} // ({y}.abs() + 1)", "{x} % ({y}.abs() + 1)", "torch.fmod({x}, {y}.abs() + 1)",
    "torch.div({x}, {y}.abs() + 1, rounding_mode='trunc')", "{x} // {y}", "{x} % {y}",
    "torch.bitwise_left_shift({x}, {y}.abs() % 4)", "torch.bitwise_right_shift({x}, {y}.abs() % 4)",
]


def _is_float(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point()


def _is_int(tensor: torch.Tensor) -> bool:
    return not tensor.is_floating_point() and tensor.dtype != torch.bool


def unary(g):
    table = g.weighted({"any": 4, "float": 6, "int": 1})
    where = {"any": None, "float": _is_float, "int": _is_int}[table]
    x = g.operand(where, lambda: (g.shape(), g.dtype("any" if table == "any" else table)))
    if x is None:
        return None
    template = g.choice({"any": UNARY_ANY, "float": UNARY_FLOAT, "int": UNARY_INT}[table])
    dtype = g.tensor(x).dtype
    low, high = sorted([g.scalar(dtype), g.scalar(dtype)])
    out = g.fresh()
    code = template.format(x=x, lo=fmt(low), hi=fmt(high), s=fmt(g.scalar()))
    return f"{out} = {code}", [out]


def _broadcast_partner(g, x: str):
    """A second operand broadcasting with `x`: a live value, a scalar or a new input."""
    shape = tuple(g.tensor(x).shape)
    roll = g.rng.random()
    if roll < 0.15:
        return fmt(g.scalar())
    if roll < 0.5:
        def fits(tensor):
            try:
                return torch.broadcast_shapes(tensor.shape, shape) is not None
            except RuntimeError:
                return False
        name = g.pick(fits)
        if name is not None:
            return name
    partner = [1 if g.chance(0.25) else extent for extent in shape]
    if partner and g.chance(0.2):
        partner = partner[g.rng.randrange(len(partner) + 1):]
    if g.chance(0.1) and 1 in shape:  # broadcast x up too
        partner = [g.choice([2, 3]) if extent == 1 and g.chance(0.5) else extent
                   for extent in partner]
    dtype = g.dtype() if g.chance(0.4) else str(g.tensor(x).dtype).replace("torch.", "")
    return g.new_input(tuple(partner), dtype)


def binary(g):
    table = g.weighted({"any": 6, "float": 3, "int": 2})
    where = {"any": None, "float": _is_float, "int": _is_int}[table]
    x = g.operand(where, lambda: (g.shape(), g.dtype("any" if table == "any" else table)))
    if x is None:
        return None
    y = _broadcast_partner(g, x)
    if g.chance(0.15) and not y[0] in "av":
        x, y = y, x  # a scalar first
    template = g.choice({"any": BINARY, "float": BINARY_FLOAT, "int": BINARY_INT}[table])
    out = g.fresh()
    return f"{out} = {template.format(x=x, y=y, alpha=fmt(g.choice([2, -1, 0.5])))}", [out]


def ternary(g):
    x = g.operand(None, lambda: (g.shape(), g.dtype()))
    if x is None:
        return None
    y, z = _broadcast_partner(g, x), _broadcast_partner(g, x)
    out = g.fresh()
    kind = g.choice(["where", "where_mask", "addcmul", "addcdiv", "clamp", "lerp"])
    if kind == "where":
        code = f"torch.where({x} > {y}, {x}, {z})"
    elif kind == "where_mask":
        mask = g.operand(lambda t: t.dtype == torch.bool, None) or f"({x} != 0)"
        code = f"torch.where({mask}, {y}, {z})"
    elif kind == "addcmul":
        code = f"torch.addcmul({x}, {y}, {z}, value={fmt(g.choice([1, 0.5, -2]))})"
    elif kind == "addcdiv":
        code = f"torch.addcdiv({x}, {y}, {z}, value=0.5)"
    elif kind == "clamp":
        code = f"torch.clamp({x}, min={y}, max={z})"
    else:
        code = f"torch.lerp({x}, {y}, {z})"
    return f"{out} = {code}", [out]


def cast(g):
    x = g.operand(None, lambda: (g.shape(), g.dtype()))
    if x is None:
        return None
    target = g.dtype()
    source = g.tensor(x)
    out = g.fresh()
    if source.is_floating_point() and target not in FLOAT_NAMES and target != "bool":
        return f"{out} = {x}.nan_to_num(0.0).clamp(-100, 100).to(torch.{target})", [out]
    form = g.choice(["to", "type", "method"])
    if form == "type":
        return f"{out} = {x}.type(torch.{target})", [out]
    return f"{out} = {x}.to(torch.{target})", [out]


def _dims(g, rank: int):
    """Reduction dims: None (all), one dim, or several, sometimes negative."""
    if rank == 0:
        return g.choice([None, 0, -1, [], [0]])
    roll = g.rng.random()
    if roll < 0.2:
        return None
    count = 1 if roll < 0.65 else g.rng.randint(1, rank)
    dims = g.rng.sample(range(rank), count)
    dims = [dim - rank if g.chance(0.25) else dim for dim in dims]
    return dims[0] if count == 1 and g.chance(0.6) else dims


def reduction(g):
    x = g.operand(None, lambda: (g.shape(), g.dtype()))
    if x is None:
        return None
    tensor = g.tensor(x)
    rank = tensor.dim()
    dims = _dims(g, rank)
    keep = fmt(g.chance(0.35))
    out = g.fresh()
    kind = g.choice(["sum", "sum", "mean", "amax", "amin", "argmax", "argmin", "prod", "var",
                     "std", "any", "all", "logsumexp", "max_dim", "sum_dtype", "count",
                     "norm", "var_mean"])
    dim_text = "" if dims is None else fmt(dims)
    single = dims if isinstance(dims, int) else (dims[0] if dims else 0)
    if kind == "sum_dtype":
        return f"{out} = {x}.sum({dim_text or 'None'}, dtype=torch.float64)", [out]
    if kind in ("sum", "mean", "amax", "amin", "any", "all"):
        target = x if kind != "mean" or tensor.is_floating_point() else f"{x}.float()"
        if dims is None:
            return f"{out} = {target}.{kind}()", [out]
        return f"{out} = {target}.{kind}({dim_text}, keepdim={keep})", [out]
    if kind in ("argmax", "argmin"):
        if dims is None:
            return f"{out} = {x}.{kind}()", [out]
        return f"{out} = torch.{kind}({x}, {single}, keepdim={keep})", [out]
    if kind == "prod":
        return (f"{out} = {x}.prod()" if dims is None else
                f"{out} = {x}.prod({single}, keepdim={keep})"), [out]
    if kind in ("var", "std"):
        correction = g.choice([0, 1, 2])
        source = x if tensor.is_floating_point() else f"{x}.double()"
        return f"{out} = {source}.{kind}({dim_text or 'None'}, correction={correction}, " \
            f"keepdim={keep})", [out]
    if kind == "var_mean":
        # finite values only: with an infinity, eager's one-pass (Welford) mean is NaN or
        # +-inf depending on where the infinity sits (FINDINGS.md, deviations by design)
        source = f"{x}.clamp(-1e4, 1e4)" if tensor.is_floating_point() else f"{x}.float()"
        pair, mean = g.fresh(), g.fresh()
        return (f"{pair} = torch.var_mean({source}, {dim_text or 'None'}, keepdim={keep})\n"
                f"{out} = {pair}[0]\n{mean} = {pair}[1]"), [pair, out, mean]
    if kind == "logsumexp":
        return f"{out} = torch.logsumexp({x}, {dim_text or fmt(list(range(rank)))}, " \
            f"keepdim={keep})", [out]
    if kind == "count":
        return f"{out} = torch.count_nonzero({x}, {dim_text or 'None'})", [out]
    if kind == "norm":
        return f"{out} = torch.linalg.vector_norm({x}, {fmt(g.choice([2, 1, float('inf')]))}, " \
            f"{dim_text or 'None'}, keepdim={keep})", [out]
    pair, indices = g.fresh(), g.fresh()
    function = g.choice(["max", "min"])
    return (f"{pair} = {x}.{function}({single}, keepdim={keep})\n"
            f"{out} = {pair}[0]\n{indices} = {pair}[1]"), [pair, out, indices]


def matmul(g):
    kind = g.choice(["matmul", "mm", "bmm", "addmm", "linear", "mv", "baddbmm", "einsum"])
    dtype = g.weighted({"float32": 8, "float64": 2, "bfloat16": 1, "float16": 1})
    m, k, n, b = (g.choice([1, 2, 3, 4, 5, 8]) for _ in range(4))
    if g.chance(0.05):
        k = 0
    out = g.fresh()

    def matrix(shape):
        found = g.operand(lambda t: tuple(t.shape) == shape and t.dtype == DTYPES[dtype],
                           lambda: (shape, dtype))
        return found

    if kind == "matmul":
        rank = g.choice([1, 2, 3])
        left = (m, k) if rank == 2 else ((k,) if rank == 1 else (b, m, k))
        right = g.choice([(k, n), (k,), (b, k, n), (1, k, n)])
        code = f"{matrix(left)} @ {matrix(right)}"
    elif kind == "mm":
        code = f"torch.mm({matrix((m, k))}, {matrix((k, n))})"
    elif kind == "bmm":
        code = f"torch.bmm({matrix((b, m, k))}, {matrix((b, k, n))})"
    elif kind == "addmm":
        bias = matrix(g.choice([(m, n), (n,), (1, n)]))
        code = f"torch.addmm({bias}, {matrix((m, k))}, {matrix((k, n))}, " \
            f"beta={fmt(g.choice([1, 0.5, 0]))}, alpha={fmt(g.choice([1, 2]))})"
    elif kind == "linear":
        bias = matrix((n,)) if g.chance(0.6) else "None"
        code = f"F.linear({matrix(g.choice([(m, k), (b, m, k)]))}, {matrix((n, k))}, {bias})"
    elif kind == "mv":
        code = f"torch.mv({matrix((m, k))}, {matrix((k,))})"
    elif kind == "baddbmm":
        code = f"torch.baddbmm({matrix((b, m, n))}, {matrix((b, m, k))}, " \
            f"{matrix((b, k, n))}, alpha=0.5)"
    else:
        code = f"torch.einsum('bij,bjk->bik', {matrix((b, m, k))}, {matrix((b, k, n))})"
    return f"{out} = {code}", [out]


def normalization(g):
    x = g.operand(lambda t: t.is_floating_point() and t.dim() >= 1,
                  lambda: (g.shape(g.choice([1, 2, 3])), g.dtype("float")))
    if x is None:
        return None
    tensor = g.tensor(x)
    rank = tensor.dim()
    dim = g.rng.randrange(-rank, rank)
    out = g.fresh()
    kind = g.choice(["softmax", "log_softmax", "softmax_dtype", "layer_norm", "cumsum",
                     "cumprod", "logcumsumexp", "normalize", "batch_norm", "group_norm",
                     "rms"])
    if kind == "softmax":
        return f"{out} = torch.softmax({x}, {dim})", [out]
    if kind == "softmax_dtype":
        return f"{out} = {x}.softmax({dim}, dtype=torch.float64)", [out]
    if kind == "log_softmax":
        return f"{out} = F.log_softmax({x}, {dim})", [out]
    if kind in ("cumsum", "cumprod", "logcumsumexp"):
        source = x if kind != "cumprod" else f"{x}.clamp(-2, 2)"
        return f"{out} = torch.{kind}({source}, {dim})", [out]
    if kind == "normalize":
        return f"{out} = F.normalize({x}, dim={dim})", [out]
    if kind == "layer_norm":
        count = g.rng.randint(1, rank)
        shape = tuple(tensor.shape[rank - count:])
        dtype = str(tensor.dtype).replace("torch.", "")
        weight = g.new_input(shape, dtype) if g.chance(0.6) else "None"
        bias = g.new_input(shape, dtype) if g.chance(0.5) else "None"
        return f"{out} = F.layer_norm({x}, {fmt(shape)}, {weight}, {bias}, " \
            f"{fmt(g.choice([1e-5, 1e-3]))})", [out]
    if kind == "rms" and hasattr(torch.nn.functional, "rms_norm"):
        return f"{out} = F.rms_norm({x}, {fmt(tuple(tensor.shape[-1:]))})", [out]
    if kind in ("batch_norm", "group_norm") and rank >= 2:
        channels = tensor.shape[1]
        dtype = str(tensor.dtype).replace("torch.", "")
        if kind == "group_norm":
            groups = g.choice([group for group in (1, 2, 3) if channels % group == 0])
            return f"{out} = F.group_norm({x}, {groups})", [out]
        mean, var = g.new_input((channels,), dtype), g.new_input((channels,), dtype)
        training = g.chance(0.5)
        var_text = f"{var}.abs() + 0.5" if not training else var
        if training:  # running statistics are updated in place: inputs mutated (finite
            # inputs: see var_mean above, eager's running mean takes the Welford mean)
            return f"{out} = F.batch_norm({x}.clamp(-1e4, 1e4), {mean}, {var}, " \
                f"training=True, momentum=0.1)", [out]
        return f"{out} = F.batch_norm({x}, {mean}, {var_text}, training=False)", [out]
    return None


def sorting(g):
    x = g.operand(lambda t: t.dim() >= 1 and t.dtype != torch.bool,
                  lambda: (g.shape(g.choice([1, 2, 3])), g.dtype()))
    if x is None:
        return None
    tensor = g.tensor(x)
    dim = g.rng.randrange(-tensor.dim(), tensor.dim())
    out, pair, indices = g.fresh(), g.fresh(), g.fresh()
    kind = g.choice(["sort", "topk", "argsort", "kth", "msort"])
    descending = fmt(g.chance(0.5))
    if kind == "sort":
        return (f"{pair} = torch.sort({x}, {dim}, descending={descending}, stable=True)\n"
                f"{out} = {pair}[0]\n{indices} = {pair}[1]"), [pair, out, indices]
    if kind == "argsort":
        return f"{out} = torch.argsort({x}, dim={dim}, stable=True)", [out]
    if kind == "msort":
        return f"{out} = torch.sort({x}, {dim}, stable=True).values", [out]
    extent = tensor.shape[dim]
    if extent == 0 or not tensor.is_floating_point():
        return None
    k = g.rng.randint(1, extent)
    if kind == "kth":
        return f"{out} = torch.kthvalue({x}, {k}, {dim}).values", [out]
    return (f"{pair} = torch.topk({x}, {k}, {dim}, largest={descending})\n"
            f"{out} = {pair}[0]\n{indices} = {pair}[1]"), [pair, out, indices]


COMPUTE_FAMILIES = {
    "unary": (16, unary),
    "binary": (18, binary),
    "ternary": (5, ternary),
    "cast": (4, cast),
    "reduction": (12, reduction),
    "matmul": (4, matmul),
    "normalization": (6, normalization),
    "sorting": (3, sorting),
}
