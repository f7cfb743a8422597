"""The graph fuzzer's ATen-level family: `torch.ops.aten` overloads called directly.

Input: the `Generator`. Output: `(code, defined names)` for one candidate statement calling
an ATen overload (`aten.add.Tensor(x, y, alpha=2)`, `aten.sum.dim_IntList(x, [1], True)`,
`aten.add_.Tensor(x, y)`), as graphs made by other front ends (or by a backend's own passes)
hold them: `compile_fx` receives ATen nodes next to torch-level ones.
"""
from __future__ import annotations

from tests.fuzz.graphs.generator import fmt
from tests.fuzz.graphs.ops_compute import _broadcast_partner, _dims
from tests.fuzz.graphs.ops_memory import _partner_into, index_input, reshaped

UNARY = ["aten.neg.default({x})", "aten.abs.default({x})", "aten.relu.default({x})",
         "aten.clone.default({x})", "aten.exp.default({x})", "aten.sigmoid.default({x})",
         "aten.logical_not.default({x})", "aten._to_copy.default({x}, dtype=torch.float32)",
         "aten._to_copy.default({x}, dtype=torch.int64)", "aten.sign.default({x})",
         "aten.clamp.default({x}, -1, 2)", "aten.alias.default({x})"]
BINARY = ["aten.add.Tensor({x}, {y})", "aten.add.Tensor({x}, {y}, alpha=2)",
          "aten.sub.Tensor({x}, {y})", "aten.mul.Tensor({x}, {y})", "aten.div.Tensor({x}, {y})",
          "aten.maximum.default({x}, {y})", "aten.eq.Tensor({x}, {y})",
          "aten.where.self(aten.gt.Scalar({x}, 0), {x}, {y})", "aten.pow.Tensor_Scalar({x}, 2)",
          "aten.remainder.Scalar({x}, 3)", "aten.bitwise_and.Tensor({x}, {y})"]
INPLACE = ["aten.add_.Tensor({x}, {y})", "aten.mul_.Tensor({x}, {y})",
           "aten.copy_.default({x}, {y})", "aten.clamp_.default({x}, 0, 1)",
           "aten.fill_.Scalar({x}, 2)", "aten.zero_.default({x})"]


def aten_call(g):
    x = g.operand(None, lambda: (g.shape(), g.dtype()))
    if x is None:
        return None
    shape = tuple(g.tensor(x).shape)
    rank = len(shape)
    out = g.fresh()
    kind = g.choice(["unary", "binary", "binary", "inplace", "reduction", "view", "view",
                     "index"])
    if kind == "unary":
        return f"{out} = " + g.choice(UNARY).format(x=x), [out]
    if kind in ("binary", "inplace"):
        y = _broadcast_partner(g, x) if kind == "binary" else _partner_into(g, x)
        table = BINARY if kind == "binary" else INPLACE
        code = g.choice(table).format(x=x, y=y)
        if code.startswith("aten.bitwise") and g.tensor(x).is_floating_point():
            return None
        return (f"{out} = {code}", [out]) if kind == "binary" or g.chance(0.3) else \
            (code, [])
    if kind == "reduction":
        dims = _dims(g, rank)
        dims = list(range(rank)) if dims is None else ([dims] if isinstance(dims, int)
                                                       else dims)
        keep = fmt(g.chance(0.4))
        name = g.choice(["sum.dim_IntList", "amax.default", "amin.default", "mean.dim",
                         "any.dims", "prod.dim_int", "argmax.default"])
        if name == "prod.dim_int" or name == "argmax.default":
            return f"{out} = aten.{name}({x}, {dims[0] if dims else 0}, {keep})", [out]
        if name == "mean.dim" and not g.tensor(x).is_floating_point():
            return None
        return f"{out} = aten.{name}({x}, {fmt(dims)}, {keep})", [out]
    if kind == "view":
        dim = g.rng.randrange(rank) if rank else 0
        choices = [f"aten.view.default({x}, {fmt(list(reshaped(g, shape)))})",
                   f"aten.reshape.default({x}, {fmt(list(reshaped(g, shape)))})",
                   f"aten.unsqueeze.default({x}, {g.rng.randrange(-rank - 1, rank + 1)})"]
        if rank:
            order = list(range(rank))
            g.rng.shuffle(order)
            start = g.rng.randrange(shape[dim] + 1)
            expanded = [g.choice([2, 3]) if extent == 1 else extent for extent in shape]
            choices += [f"aten.permute.default({x}, {fmt(order)})",
                        f"aten.slice.Tensor({x}, {dim}, {start}, {shape[dim]}, "
                        f"{g.choice([1, 2])})",
                        f"aten.squeeze.dim({x}, {dim})",
                        f"aten.expand.default({x}, {fmt(expanded)})"]
            if shape[dim]:
                choices.append(f"aten.select.int({x}, {dim}, {g.rng.randrange(shape[dim])})")
        return f"{out} = " + g.choice(choices), [out]
    if rank == 0 or shape[0] == 0:
        return None
    indices = index_input(g, shape[0], (g.choice([1, 2, 4]),))
    choice = g.choice(["index", "index_select", "constant_pad"])
    if choice == "index":
        return f"{out} = aten.index.Tensor({x}, [{indices}])", [out]
    if choice == "index_select":
        return f"{out} = aten.index_select.default({x}, 0, {indices})", [out]
    return f"{out} = aten.constant_pad_nd.default({x}, [1, 0], {fmt(g.scalar())})", [out]


ATEN_FAMILIES = {"aten": (6, aten_call)}
