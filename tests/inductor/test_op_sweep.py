"""Op sweep: every lowered op against eager, per dtype, on contiguous, transposed, sliced and
broadcast inputs.

The pointwise primitives come from their table (`inductor/ir/primitives.py`, less the ones
each sweep leaves out, with the reason); composites are listed here. Many ops share one
compiled graph (one build) per (group, dtype, layout); each result is compared on its own and
a failure names the ops that differ. Float inputs include NaN,
+-inf, +-0.0 and values on both sides of every branch point; integer inputs include zero,
negative and boundary values.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.fx

import inductor
from inductor.ir.primitives import BOOL, BY_NAME, FLOAT, INTEGER, PRIMITIVES, SAME

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTEGERS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
LAYOUTS = ["contiguous", "transposed", "sliced", "broadcast"]
TOLERANCE = {torch.float32: (1e-5, 2e-5), torch.float64: (1e-10, 1e-10),
             torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3)}


def _primitives(arity: int, rules: tuple, left_out: dict) -> dict:
    """{name: torch reference} of the primitives (`inductor/ir/primitives.py`) of `arity`
    operands whose dtype rule is one of `rules`, less those `left_out` (name -> why)."""
    assert set(left_out) <= set(BY_NAME), set(left_out) - set(BY_NAME)
    return {row.name: row.reference for row in PRIMITIVES
            if row.arity == arity and row.dtypes in rules and row.name not in left_out}


# The primitives each sweep leaves out, and why (the drift the table found between the
# product's primitives and this sweep's lists: the 15 integer cases it found are swept now).
NOT_LOWERED = {**{row.name: "no ATen op lowers to it" for row in PRIMITIVES if not row.lowered},
               "fma": "no ATen op of its own: add and sub with alpha, addcmul and lerp lower "
                      "to it (swept as composites below)"}
FLOAT_LEFT_OUT = {
    **NOT_LOWERED,
    "lgamma": "not swept before the table; C++ passes on CPU, libdevice's on CUDA unmeasured",
}
INTEGER_LEFT_OUT = {
    **NOT_LOWERED, "pow": "eager raises for the negative integer exponents the operands hold",
    # measured (torch 2.14, both code generators): the float32 result of integer operands is
    # an ulp from eager's at some values (int64: -2.3281646 where eager gives -2.3281643),
    # which this sweep's exact integer comparison counts; the float sweep's tolerance allows it
    "atan2": "an ulp from eager's float32 result for integer operands, compared exactly here",
    "hypot": "eager has no integer kernel ('hypot_cpu' not implemented for 'Long')",
    "nextafter": "eager has no integer kernel ('nextafter_cpu' not implemented for 'Long')",
}
# The composites each sweep adds to the primitives: ops that lower to several primitives
FLOAT_UNARY_COMPOSITES = {
    "frac": torch.frac, "relu": torch.relu,
    "gelu": lambda x: torch.nn.functional.gelu(x.clamp(-1e4, 1e4)),
    "silu": torch.nn.functional.silu, "hardswish": torch.nn.functional.hardswish,
    "hardsigmoid": torch.nn.functional.hardsigmoid, "softplus": torch.nn.functional.softplus,
    "leaky_relu": torch.nn.functional.leaky_relu, "elu": torch.nn.functional.elu,
    "clamp": lambda x: torch.clamp(x, -0.5, 2.0), "clamp_min": lambda x: x.clamp(min=0.25),
    "pow_2": lambda x: x ** 2, "pow_3_5": lambda x: x ** 3.5, "pow_half": lambda x: x ** 0.5,
    "scalar_pow": lambda x: 2 ** x, "mul_scalar": lambda x: x * 3, "add_int": lambda x: x + 1,
    "to_int32": lambda x: x.clamp(-1e6, 1e6).nan_to_num(0).to(torch.int32),
    "to_bool": lambda x: x.bool(), "to_float64": lambda x: x.double(),
    "nan_to_num": torch.nan_to_num,
}
FLOAT_BINARY_COMPOSITES = {
    "where": lambda a, b: torch.where(a > b, a, b),
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2), "sub_alpha": lambda a, b: a - 3 * b,
    "clamp_tensor": lambda a, b: torch.clamp(a, min=b), "lerp": lambda a, b: torch.lerp(a, b, 0.3),
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=0.5),
}
INTEGER_UNARY_COMPOSITES = {
    "relu": torch.relu, "to_float": lambda x: x.float(),
    "to_bool": lambda x: x.bool(), "mul_scalar": lambda x: x * 3, "add_scalar": lambda x: x + 7,
    "clamp": lambda x: torch.clamp(x, -3, 50), "true_div_scalar": lambda x: x / 4,
    "float_scalar": lambda x: x * 0.5,
}
INTEGER_BINARY_COMPOSITES = {
    "where": lambda a, b: torch.where(a > b, a, b),
    # shift counts within the width, as eager defines them
    "left_shift": lambda a, b: torch.bitwise_left_shift(a, b.abs() % 5),
    "right_shift": lambda a, b: torch.bitwise_right_shift(a, b.abs() % 5),
}
FLOAT_UNARY = {**_primitives(1, (FLOAT, SAME, BOOL), FLOAT_LEFT_OUT), **FLOAT_UNARY_COMPOSITES}
FLOAT_BINARY = {**_primitives(2, (FLOAT, SAME, BOOL), FLOAT_LEFT_OUT), **FLOAT_BINARY_COMPOSITES}
INTEGER_UNARY = {**_primitives(1, (SAME, BOOL, INTEGER), INTEGER_LEFT_OUT),
                 **INTEGER_UNARY_COMPOSITES}
INTEGER_BINARY = {**_primitives(2, (FLOAT, SAME, BOOL, INTEGER), INTEGER_LEFT_OUT),
                  **INTEGER_BINARY_COMPOSITES}
BOOL_OPS = {
    "and": torch.logical_and, "or": torch.logical_or, "xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor, "not": lambda a, b: torch.logical_not(a),
    "eq": torch.eq, "where": lambda a, b: torch.where(a, b, ~b), "to_int": lambda a, b: a.int(),
    "add_int": lambda a, b: a.int() + b.int(), "maximum": torch.maximum,
}
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-30,
            3.0, -3.0, 100.0, -100.0]


def float_values(shape, dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(shape, generator=generator, dtype=torch.float64) * 2
    flat = values.view(-1)
    flat[:len(SPECIALS)] = torch.tensor(SPECIALS, dtype=torch.float64)[:flat.numel()]
    return values[torch.randperm(values.shape[0], generator=generator)].to(dtype)


def integer_values(shape, dtype, seed: int, nonzero: bool = False) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    low = 0 if dtype == torch.uint8 else -100
    values = torch.randint(low, 100, shape, generator=generator, dtype=torch.int64)
    if nonzero:
        values[values == 0] = 7
    return values.to(dtype)


def laid_out(tensor: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values seen through a layout: transposed or sliced views of bigger storage."""
    if layout == "transposed":
        return tensor.t().contiguous().t()
    if layout == "sliced":
        padded = torch.zeros(tensor.shape[0] + 2, tensor.shape[1] * 2, dtype=tensor.dtype)
        padded[1:-1, ::2] = tensor
        return padded[1:-1, ::2]
    return tensor


def operands(layout: str, make):
    """Two operands of shape (9, 20), or (9, 20) and (20,) for the broadcast layout."""
    first = laid_out(make((9, 20), 1), layout)
    second = make((20,), 2) if layout == "broadcast" else laid_out(make((9, 20), 2), layout)
    return first, second


def run_batch(ops: dict, inputs: tuple, dtype) -> list[str]:
    """Compile all ops as one graph; return descriptions of the ops that differ from eager."""
    names = list(ops)

    def batch(*arguments):
        return tuple(ops[name](*arguments) for name in names)
    graph = _trace_batch(ops, names, len(inputs))
    compiled = inductor.compile_fx(graph, list(inputs))
    # a graph that runs through eager kernels (a build error) would compare eager with itself
    assert compiled.report.reason is None, compiled.report.reason
    actual = compiled(*inputs)
    expected = batch(*inputs)
    atol, rtol = TOLERANCE.get(dtype, (0, 0))
    failures = []
    pairs = []
    for name, got, want in zip(names, actual, expected):
        if isinstance(want, (tuple, list)):
            pairs += [(f"{name}[{position}]", part, wanted)
                      for position, (part, wanted) in enumerate(zip(got, want))]
        else:
            pairs.append((name, got, want))
    for name, got, want in pairs:
        try:
            assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
            torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True)
        except AssertionError as error:
            failures.append(f"{name}: {str(error).splitlines()[0]} "
                            f"{_first_difference(got, want)}")
    return failures


def _first_difference(got, want) -> str:
    if got.shape != want.shape:
        return ""
    if got.is_floating_point():
        error = (got.double() - want.double()).abs().nan_to_num(math.inf)
        error[got.isnan() & want.isnan()] = 0
        error[got == want] = 0
    else:
        error = (got.long() - want.long()).abs().double()
    if not (error > 0).any():
        return ""
    position = list(divmod(int(error.argmax()), got.shape[-1])) if got.dim() == 2 else \
        [int(error.argmax())]
    return f"at {position}: got {got[tuple(position)].item()} want {want[tuple(position)].item()}"


def _trace_batch(ops: dict, names: list, arity: int) -> torch.fx.GraphModule:
    """An FX graph computing every op on the same inputs (tensor constants become
    attributes, as torch.fx records them)."""
    parameters = ", ".join(f"input{position}" for position in range(arity))
    namespace = {"ops": ops, "names": names}
    exec(f"def batch({parameters}):\n"
         f"    return tuple(ops[name]({parameters}) for name in names)\n", namespace)
    return torch.fx.symbolic_trace(namespace["batch"])


def _unary(ops: dict):
    return {name: (lambda x, y, op=op: op(x)) for name, op in ops.items()}


def test_every_primitive_is_swept_or_left_out_with_a_reason():
    swept_floats = {**FLOAT_UNARY, **FLOAT_BINARY}
    swept_integers = {**INTEGER_UNARY, **INTEGER_BINARY}
    for row in PRIMITIVES:
        if row.dtypes != INTEGER:
            assert (row.name in swept_floats) != bool(FLOAT_LEFT_OUT.get(row.name)), row.name
        if row.dtypes != FLOAT or row.arity == 2:
            assert (row.name in swept_integers) != bool(INTEGER_LEFT_OUT.get(row.name)), row.name


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_float_ops(dtype, layout):
    x, y = operands(layout, lambda shape, seed: float_values(shape, dtype, seed))
    ops = {**_unary(FLOAT_UNARY), **FLOAT_BINARY}
    if dtype in (torch.bfloat16, torch.float16):
        ops.pop("to_int32")  # eager rounds the clamp to a half type first; ulp-level flips
    assert run_batch(ops, (x, y), dtype) == []


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_integer_ops(dtype, layout):
    x, y = operands(layout, lambda shape, seed: integer_values(shape, dtype, seed,
                                                                  nonzero=seed == 2))
    assert run_batch({**_unary(INTEGER_UNARY), **INTEGER_BINARY}, (x, y), dtype) == []


@pytest.mark.parametrize("layout", ["contiguous", "sliced", "broadcast"])
def test_bool_ops(layout):
    x, y = operands(layout, lambda shape, seed: integer_values(shape, torch.int64, seed) > 0)
    assert run_batch(BOOL_OPS, (x, y), torch.bool) == []


def test_integer_overflow_wraps_like_eager():
    big = torch.tensor([2 ** 62, -2 ** 62, 2 ** 31 - 1, 127], dtype=torch.int64)
    ops = {"int64_mul": lambda a, b: a * 4, "int32_add": lambda a, b: a.int() + 2 ** 31 - 1,
           "int8_mul": lambda a, b: a.to(torch.int8) * b.to(torch.int8),
           "uint8_from_negative": lambda a, b: (b - 300).to(torch.uint8)}
    assert run_batch(ops, (big, torch.tensor([3, 5, 7, 9])), torch.int64) == []


def test_integer_division_by_zero_raises_like_eager():
    def divide(a, b):
        return torch.div(a, b, rounding_mode="floor")
    a, b = torch.tensor([1, 2, 3]), torch.tensor([1, 0, 1])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        divide(a, b)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(divide), [a, b])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(a, b)
