"""Size expressions from torch's ShapeEnv with bases that may be negative (issue 23).

The generated C++ and Triton print `FloorDiv` and `ModularIndexing` as `/` and `%`, which
truncate toward zero: right only for non-negative bases. torch's `PythonMod` / `FloorDiv`
follow Python (floor). An attention mask padded to a multiple of 8 by `(-s) % 8` printed as
`(-s) % 8` padded by -5 instead of 3 (wrong logits in the decode test). Property: for any
sum of signed multiples of sizes and a constant, `symbols.from_shape_env` of torch's Python
`%` and `//` either raises NotImplementedError (the graph compiles per size, counted) or
gives an expression whose value under C's truncating semantics is Python's, at every size.
"""
import sympy
from hypothesis import given, settings, strategies as st
from torch.utils._sympy import functions as torch_functions

from inductor.ir import symbols
from inductor.ir.symbols import FloorDiv, ModularIndexing

SIZES = [sympy.Symbol(f"s{k}", integer=True, positive=True) for k in range(3)]


def c_value(expr, values: dict) -> int:
    """`expr`'s value as the generated C++ / Triton compute it (truncating `/` and `%`)."""
    def trunc_div(a, b):
        quotient = abs(a) // abs(b)
        return quotient if (a >= 0) == (b > 0) else -quotient

    def c_mod(a, b):
        return a - b * trunc_div(a, b)

    if expr.is_Integer:
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        return values[expr]
    arguments = [c_value(argument, values) for argument in expr.args]
    if isinstance(expr, sympy.Add):
        return sum(arguments)
    if isinstance(expr, sympy.Mul):
        result = 1
        for argument in arguments:
            result *= argument
        return result
    if isinstance(expr, FloorDiv):
        return trunc_div(*arguments)
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = arguments
        return c_mod(trunc_div(base, divisor), modulus)
    raise AssertionError(f"unexpected node {type(expr).__name__} in {expr}")


linear = st.tuples(st.lists(st.integers(-3, 3), min_size=3, max_size=3),
                   st.integers(-20, 20))


def build(coefficients_and_constant) -> sympy.Expr:
    coefficients, constant = coefficients_and_constant
    return sum((c * s for c, s in zip(coefficients, SIZES)), sympy.Integer(constant))


@settings(max_examples=300, deadline=None)
@given(linear, st.integers(1, 16), st.sampled_from(["mod", "floordiv"]),
       st.lists(st.integers(1, 200), min_size=3, max_size=3))
def test_python_mod_and_floordiv_keep_their_value_under_truncating_division(
        base_parts, divisor, operation, sizes):
    base = build(base_parts)
    divisor = sympy.Integer(divisor)
    torch_expr = (torch_functions.PythonMod(base, divisor) if operation == "mod"
                  else torch_functions.FloorDiv(base, divisor))
    try:
        ours = symbols.from_shape_env(torch_expr)
    except NotImplementedError:
        return                                           # per size: always right
    values = dict(zip(SIZES, sizes))
    python = int(torch_expr.subs(values))
    assert c_value(ours, values) == python, (torch_expr, ours, values)
