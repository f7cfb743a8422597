"""Size expressions from torch's ShapeEnv with bases that may be negative (issue 23).

The generated C++ and Triton print `FloorDiv` and `ModularIndexing` as `/` and `%`, which
truncate toward zero: right only for non-negative bases. torch's `PythonMod` / `FloorDiv`
follow Python (floor). An attention mask padded to a multiple of 8 by `(-s) % 8` printed as
`(-s) % 8` padded by -5 instead of 3 (wrong logits in the decode test). Property: for any
sum of signed multiples of sizes and a constant, `symbols.from_shape_env` of torch's Python
`%` and `//` either raises UnsupportedSizeExpression (the graph compiles per size) or
gives an expression whose value under C's truncating semantics is Python's, at every size.
"""
import sympy
from hypothesis import example, given, reject, settings, strategies as st
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


divisors = st.one_of(st.integers(1, 16).map(sympy.Integer),
                    st.sampled_from([SIZES[1], SIZES[2] + 1, 2 * SIZES[1], SIZES[1] * SIZES[2]]))


@settings(max_examples=400, deadline=None)
@given(linear, divisors, st.sampled_from(["mod", "floordiv"]),
       st.lists(st.integers(1, 200), min_size=3, max_size=3))
# Found by hypothesis in CI's dynamic step: substituting sizes into torch's
# `PythonMod(s0 + s1 + s2 - 2, s2 + 1)` recursed inside sympy's Mod (the oracle, not ours).
@example(([1, 1, 1], -2), SIZES[2] + 1, "mod", [1, 1, 2])
def test_python_mod_and_floordiv_keep_their_value_under_truncating_division(
        base_parts, divisor, operation, sizes):
    """Integer and symbolic divisors (sizes are >= 1: torch's symbols are positive)."""
    base = build(base_parts)
    try:
        torch_expr = (torch_functions.PythonMod(base, divisor) if operation == "mod"
                      else torch_functions.FloorDiv(base, divisor))
    except RecursionError:   # sympy's gcd recursing on some symbolic moduli (torch's own
        reject()             # construction: no trace makes them)
    try:
        ours = symbols.from_shape_env(torch_expr)
    except symbols.UnsupportedSizeExpression:
        return                                           # per size: always right
    values = dict(zip(SIZES, sizes))
    # Python's own `%` / `//` on the numbers: substituting into torch's expression can
    # recurse in sympy's Mod (the @example above).
    base_value, divisor_value = int(base.subs(values)), int(divisor.subs(values))
    python = base_value % divisor_value if operation == "mod" else base_value // divisor_value
    assert c_value(ours, values) == python, (torch_expr, ours, values)


def test_a_size_minus_one_modulo_itself_compiles():
    """`(s - 1) % s` (program fuzzer seed 98002): a base that is negative only below size 1,
    a symbolic modulus: shifted by a multiple of the modulus, not refused (the refusal was
    a NotImplementedError that escaped the symbolic compile as an internal error)."""
    s = SIZES[0]
    ours = symbols.from_shape_env(torch_functions.PythonMod(s - 1, s))
    assert all(c_value(ours, {s: value}) == (value - 1) % value for value in range(1, 50))
    ours = symbols.from_shape_env(torch_functions.FloorDiv(s - 3, s))
    assert all(c_value(ours, {s: value}) == (value - 3) // value for value in range(1, 50))
    ours = symbols.from_shape_env(torch_functions.FloorDiv(-s, 4))    # seed 98029's pad
    assert all(c_value(ours, {s: value}) == (-value) // 4 for value in range(1, 50))


def test_an_unsupported_size_expression_means_per_size():
    assert issubclass(symbols.UnsupportedSizeExpression, symbols.NotSymbolic)
    assert issubclass(symbols.UnsupportedSizeExpression, NotImplementedError)
