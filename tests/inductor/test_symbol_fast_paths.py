"""The fast paths of `inductor.ir.symbols` agree with the sympy computations they replace.

`linear_coefficient` reads the coefficient of an already expanded multilinear index
(`c0 + c1*x0 + c2*s0*x1`) off its terms instead of `sympy.expand(expr).coeff(symbol)`, and
`simplify_index` is memoised: both must return exactly what the slow paths return, on
random linear and non-linear expressions."""
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from inductor.ir import symbols
from inductor.ir.symbols import (FloorDiv, ModularIndexing, index_symbol, linear_coefficient,
                                 simplify_index)

VARIABLES = [index_symbol("i", n) for n in range(3)] + [index_symbol("r", 0)]
SIZES = [sympy.Symbol("s0", integer=True, positive=True),
         sympy.Symbol("s1", integer=True, positive=True)]
ATOMS = VARIABLES + SIZES


def _slow(expr, symbol):
    """The definition: `expand(expr).coeff(symbol)` where `symbol` is outside any division."""
    expr = sympy.sympify(expr)
    if not expr.has(symbol):
        return sympy.Integer(0)
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, (FloorDiv, ModularIndexing)) and node.has(symbol):
            return None
    coefficient = sympy.expand(expr).coeff(symbol)
    if coefficient.has(symbol) or not coefficient.free_symbols.isdisjoint({symbol}):
        return None
    return coefficient


integers = st.integers(-70, 70).map(sympy.Integer)
atoms = st.sampled_from(ATOMS)
monomials = st.builds(lambda c, xs: c * sympy.Mul(*xs), integers,
                      st.lists(atoms, max_size=3))


def _combine(children):
    return st.one_of(
        st.builds(lambda a, b: a + b, children, children),
        st.builds(lambda a, b: a * b, children, children),
        st.builds(lambda a, d: FloorDiv(a, d), children, st.integers(1, 9).map(sympy.Integer)),
        st.builds(lambda a, d, m: ModularIndexing(a, d, m), children,
                  st.integers(1, 9).map(sympy.Integer), st.integers(1, 9).map(sympy.Integer)),
        st.builds(lambda a: a ** 2, children),
        st.builds(lambda a, b: sympy.Min(a, b), children, children))


linear = st.builds(lambda terms, c: sympy.Add(c, *terms), st.lists(monomials, max_size=5),
                   integers)
expressions = st.recursive(st.one_of(linear, atoms, integers), _combine, max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(linear, atoms)
def test_linear_coefficient_of_multilinear_sums(expr, symbol):
    assert linear_coefficient(expr, symbol) == _slow(expr, symbol)


@settings(max_examples=400, deadline=None)
@given(expressions, atoms)
def test_linear_coefficient_of_any_expression(expr, symbol):
    assert linear_coefficient(expr, symbol) == _slow(expr, symbol)


def test_fast_path_taken_for_index_forms():
    x0, x1 = VARIABLES[:2]
    s0 = SIZES[0]
    expr = 7 + 3 * x0 + 5 * s0 * x1
    assert symbols._multilinear_coefficient(expr, x1) == 5 * s0
    assert symbols._multilinear_coefficient(expr, x0) == 3
    assert symbols._multilinear_coefficient(expr, VARIABLES[2]) == 0
    assert symbols._multilinear_coefficient(x0 ** 2 + x0, x0) is None
    assert symbols._multilinear_coefficient(FloorDiv(x0, 4) + x1, x1) is None


@settings(max_examples=200, deadline=None)
@given(expressions, st.lists(st.integers(1, 40), min_size=4, max_size=4))
def test_simplify_index_memoised_agrees(expr, extents):
    ranges = dict(zip(VARIABLES, map(sympy.Integer, extents)))
    expected = symbols._simplify_index(expr, ranges) \
        if expr.has(FloorDiv, ModularIndexing) else expr
    assert simplify_index(expr, ranges) == expected
    assert simplify_index(expr, dict(ranges)) == expected
