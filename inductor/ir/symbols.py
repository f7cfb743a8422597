"""Index expressions of the loop IR: sympy symbols for loop variables, integer division and
modulo functions with C semantics on non-negative values, and their simplification.

Input: sizes and strides (ints or sympy expressions). Output: sympy expressions in loop
variables (`i0, i1, ...` for outer loops, `r0, ...` for reduction loops, `t0, ...` for values
loaded from memory and used as indices) that every later stage reads, compares and prints.
Sizes may be symbolic (issue 23): the graph's ShapeEnv symbols (`s0`, `s12`: positive
integers), which `size_symbols` tells apart from loop variables and `hint` evaluates with the
example call's values (for heuristics only, never for correctness).
"""
from __future__ import annotations

import contextlib
import functools
import math
import threading
from typing import Iterable, Mapping

import sympy

Expr = sympy.Expr


@functools.lru_cache(maxsize=None)
def index_symbol(prefix: str, number: int) -> sympy.Symbol:
    """The loop variable `prefix<number>`: a non-negative integer symbol."""
    return sympy.Symbol(f"{prefix}{number}", integer=True, nonnegative=True)


@functools.lru_cache(maxsize=None)
def signed_symbol(name: str) -> sympy.Symbol:
    """An integer symbol that may be negative (indices read from memory before wrapping)."""
    return sympy.Symbol(name, integer=True)


_LOOP_PREFIXES = ("i", "r", "t", "x", "y", "indirect")


def is_loop_variable(symbol: sympy.Symbol) -> bool:
    """Whether `symbol` is a loop variable (`i0`, `r1`, `t2`; kernels' `x0`, `y1`) or a
    code generator's indirect-index placeholder, not a size."""
    name = symbol.name
    for prefix in _LOOP_PREFIXES:
        if name.startswith(prefix) and (name[len(prefix):].isdigit() or prefix == "indirect"):
            return True
    return False


def size_symbols(expr_or_exprs) -> list:
    """The size symbols (free symbols that are not loop variables) of an expression or of
    a (nested) list of them, sorted by name: the order kernels take them as arguments."""
    found: set = set()
    pending = [expr_or_exprs]
    while pending:
        value = pending.pop()
        if isinstance(value, (list, tuple, set)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, sympy.Basic):
            found.update(symbol for symbol in value.free_symbols
                         if isinstance(symbol, sympy.Symbol) and not is_loop_variable(symbol))
    return sorted(found, key=lambda symbol: symbol.name)


def hint(expr, hints: Mapping) -> int:
    """`expr` evaluated with the example sizes `hints` (symbol -> int): for heuristics
    (tiling, block sizes, thresholds, vector widths), never for correctness."""
    value = to_expr(expr)
    if value.is_Integer:
        return int(value)
    value = value.xreplace({symbol: sympy.Integer(number) for symbol, number in hints.items()})
    if not value.is_number:
        raise KeyError(f"no hint for {sorted(map(str, size_symbols(value)))} in {expr}")
    return int(value)


_current = threading.local()


@contextlib.contextmanager
def hints_in_effect(hints: Mapping):
    """Make `hints` (symbol -> example value) the ones `size_hint` reads while compiling
    one graph with symbolic sizes."""
    saved = getattr(_current, "hints", None)
    _current.hints = dict(hints)
    try:
        yield
    finally:
        _current.hints = saved


def size_hint(expr) -> int:
    """A size's value for heuristics: the int itself for a static size, else its example
    value (`hints_in_effect`). Never use it where the answer must hold for every size."""
    return hint(expr, getattr(_current, "hints", None) or {})


class NotSymbolic(Exception):
    """A graph with symbolic sizes that the symbolic path (one compile for every size)
    cannot compile: raised anywhere in lowering, scheduling or code generation with the
    reason. `compile_fx` / `compile_aten` then compile it per size (static variants, counted
    as `per_size` fallbacks with this reason on the report), so a result is never wrong.
    Fix: teach the stage named in the reason symbolic sizes (docs/inductor.md)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class UnsupportedSizeExpression(NotSymbolic, NotImplementedError):
    """A ShapeEnv size expression `from_shape_env` cannot express with its value kept under
    the generated code's operators: the graph goes per size (`NotSymbolic`); a lowering
    catching `NotImplementedError` runs its op through the eager kernel instead."""


def from_shape_env(expr) -> Expr:
    """A ShapeEnv expression (a SymInt's `.node.expr`) in this module's functions: torch's
    `FloorDiv`/`CleanDiv`/`ModularIndexing` become ours; `Mod`/`PythonMod` of non-negative
    values become a `ModularIndexing`. Anything else not plain arithmetic raises
    `NotImplementedError` (the caller compiles the graph per size)."""
    from torch.utils._sympy import functions as torch_functions
    if not isinstance(expr, sympy.Basic):
        return to_expr(expr)
    if expr.is_number or isinstance(expr, sympy.Symbol):
        return expr
    arguments = [from_shape_env(argument) for argument in expr.args]
    if isinstance(expr, (torch_functions.FloorDiv, torch_functions.CleanDiv)):
        return _python_floordiv(*arguments)
    if isinstance(expr, torch_functions.ModularIndexing):
        return ModularIndexing(*_nonnegative_base(arguments[0], expr), *arguments[1:])
    if isinstance(expr, (torch_functions.Mod, torch_functions.PythonMod)):
        return _python_mod(*arguments)
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        return expr.func(*arguments)
    if isinstance(expr, sympy.Pow) and arguments[1].is_Integer and int(arguments[1]) > 0:
        return expr.func(*arguments)
    raise UnsupportedSizeExpression(f"size expression {expr} ({type(expr).__name__})")


def _signed_parts(base: Expr) -> tuple:
    """`base` as (P, N) with base == P - N and both non-negative by construction."""
    terms = sympy.Add.make_args(base)
    negative = [-term for term in terms if not is_nonnegative(term)]
    positive = [term for term in terms if is_nonnegative(term)]
    return sympy.Add(*positive), sympy.Add(*negative)


def _nonnegative_base(base: Expr, whole) -> tuple:
    if not is_nonnegative(base):
        raise UnsupportedSizeExpression(f"size expression {whole}: its base {base} may be "
                                        "negative")
    return (base,)


def _is_positive(expr: Expr) -> bool:
    """Whether `expr` is >= 1 by construction (positive integers and size symbols, their
    sums and products): a modulus or divisor that is never 0."""
    if expr.is_Integer:
        return int(expr) > 0
    if isinstance(expr, sympy.Symbol):
        return bool(expr.is_positive)
    if isinstance(expr, sympy.Add):
        return all(is_nonnegative(term) for term in expr.args) and \
            any(_is_positive(term) for term in expr.args)
    if isinstance(expr, sympy.Mul):
        return all(_is_positive(factor) for factor in expr.args)
    return False


def _python_mod(base: Expr, modulus: Expr) -> Expr:
    """Python's `base % modulus` (the sign of the modulus) for a modulus >= 1 by
    construction, in `ModularIndexing`s of non-negative bases only: the generated C++ and
    Triton print those as `%`, which truncates a negative base (`(-13) % 8` is -5 there, 3 in
    Python; the pad of an attention mask to a multiple of 8, `(-s) % 8`, gave wrong logits).
    For a base P - N (both non-negative): ((P mod m) + m - (N mod m)) mod m."""
    if is_nonnegative(base):
        return ModularIndexing(base, sympy.Integer(1), modulus)
    if not _is_positive(modulus):
        raise UnsupportedSizeExpression(f"size expression ({base}) % ({modulus}): a base "
                                        "that may be negative needs a modulus >= 1")
    positive, negative = _signed_parts(base)
    if not is_nonnegative(negative):
        raise UnsupportedSizeExpression(f"size expression ({base}) % ({modulus})")
    one = sympy.Integer(1)
    return ModularIndexing(ModularIndexing(positive, one, modulus) + modulus
                           - ModularIndexing(negative, one, modulus), one, modulus)


def _python_floordiv(base: Expr, divisor: Expr) -> Expr:
    """Python's `base // divisor` for a divisor >= 1 by construction, in `FloorDiv`s of
    non-negative bases (printed as C's and Triton's truncating division). A base whose
    negative part is an integer c (a convolution's `s - 3`) is shifted by a multiple of the
    divisor; else, for P - N (both non-negative), with a = P mod d and b = N mod d:
    P // d - N // d + (a - b + d) // d - 1, the last quotient 1 where a >= b, else 0."""
    if is_nonnegative(base):
        return FloorDiv(base, divisor)
    if not _is_positive(divisor):
        raise UnsupportedSizeExpression(f"size expression ({base}) // ({divisor}): the base "
                                        "may be negative")
    positive, negative = _signed_parts(base)
    if negative.is_Integer:
        shift = -(-int(negative) // int(divisor)) if divisor.is_Integer else int(negative)
        return FloorDiv(positive + shift * divisor - negative, divisor) - shift
    if not is_nonnegative(negative):
        raise UnsupportedSizeExpression(f"size expression ({base}) // ({divisor})")
    one = sympy.Integer(1)
    borrow = FloorDiv(ModularIndexing(positive, one, divisor) + divisor
                      - ModularIndexing(negative, one, divisor), divisor)
    return FloorDiv(positive, divisor) - FloorDiv(negative, divisor) + borrow - 1


def is_size(expr) -> bool:
    """Whether `expr` is built from size symbols and integers only (no loop variable)."""
    expr = to_expr(expr)
    return expr.is_Integer or all(not is_loop_variable(symbol) for symbol in expr.free_symbols)


def above_one(expr) -> bool:
    """Whether a size may exceed 1: an int above 1, or any symbolic size (plans built on
    it hold for every value, 0 and 1 included)."""
    expr = to_expr(expr)
    return int(expr) > 1 if expr.is_Integer else True


def exact_quotient(total, divisor):
    """`total / divisor` where it divides exactly for every value of the symbols (a
    polynomial with integer coefficients), else None."""
    total, divisor = to_expr(total), to_expr(divisor)
    if total.is_Integer and divisor.is_Integer:
        if int(divisor) == 0 or int(total) % int(divisor):
            return None
        return sympy.Integer(int(total) // int(divisor))
    if divisor == 0:
        return None
    quotient = sympy.cancel(total / divisor)
    if not quotient.free_symbols:
        return quotient if quotient.is_Integer else None
    if not quotient.is_polynomial(*quotient.free_symbols):
        return None
    polynomial = sympy.Poly(quotient, *sorted(quotient.free_symbols, key=str))
    if not all(coefficient.is_Integer for coefficient in polynomial.coeffs()):
        return None
    return sympy.expand(quotient)


def stride_expr(value) -> Expr:
    """A stride as an expression: `to_expr`, where torch's `Max(1, e)` (a contiguous stride
    past a dimension that may be empty) is `e`: the two differ only where the tensor has no
    element, and then no stride is ever used."""
    node = getattr(value, "node", None)
    expr = node.expr if node is not None and hasattr(node, "expr") else value
    if isinstance(expr, sympy.Basic) and not expr.is_number:   # sympy's Max or torch's
        expr = expr.replace(
            lambda part: type(part).__name__ == "Max" and len(part.args) == 2 and
            sympy.Integer(1) in part.args,
            lambda part: next(argument for argument in part.args if argument != 1))
    return from_shape_env(expr) if isinstance(expr, sympy.Basic) else to_expr(expr)


def is_static(expr_or_exprs) -> bool:
    """Whether no size symbol appears (an int, or an expression in loop variables only)."""
    return not size_symbols(expr_or_exprs)


def to_expr(value) -> Expr:
    """An int, a SymInt (its ShapeEnv expression) or an expression as a sympy expression."""
    if isinstance(value, sympy.Basic):
        return value
    node = getattr(value, "node", None)
    if node is not None and hasattr(node, "expr"):    # a torch.SymInt
        return from_shape_env(node.expr)
    return sympy.Integer(int(value))


def product(values: Iterable) -> Expr:
    """The product of sizes (1 for none)."""
    result = sympy.Integer(1)
    for value in values:
        result = result * to_expr(value)
    return result


class FloorDiv(sympy.Function):
    """`base // divisor` for a non-negative base and a positive divisor."""

    is_integer = True
    nargs = 2

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if not divisor.is_Integer and not base.has(FloorDiv, ModularIndexing):
            quotient = exact_quotient(base, divisor)    # symbolic sizes: (6*s0) // (2*s0)
            if quotient is not None:
                return quotient
        if isinstance(base, FloorDiv):
            return FloorDiv(base.args[0], base.args[1] * divisor)
        if isinstance(base, sympy.Add):
            whole, rest = _split_multiples(base, divisor)
            if whole != 0 and is_nonnegative(rest):
                return whole + FloorDiv(rest, divisor)
        if isinstance(base, sympy.Mul) and divisor.is_Integer:
            coefficient, remainder = base.as_coeff_Mul()
            if coefficient.is_Integer and int(coefficient) % int(divisor) == 0:
                return (coefficient // divisor) * remainder
        return None


class ModularIndexing(sympy.Function):
    """`(base // divisor) % modulus` for a non-negative base."""

    is_integer = True
    nargs = 3

    @classmethod
    def eval(cls, base, divisor, modulus):
        if modulus == 1 or base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        if isinstance(base, FloorDiv):
            return ModularIndexing(base.args[0], base.args[1] * divisor, modulus)
        if isinstance(base, sympy.Add) and divisor.is_Integer and modulus.is_Integer:
            whole, rest = _split_multiples(base, divisor * modulus)
            if whole != 0 and is_nonnegative(rest):
                return ModularIndexing(rest, divisor, modulus)
        return None


def is_nonnegative(expr: Expr) -> bool:
    """Whether `expr` is non-negative by construction (non-negative terms only)."""
    if expr.is_Integer:
        return int(expr) >= 0
    if isinstance(expr, sympy.Symbol):
        return bool(expr.is_nonnegative)
    if isinstance(expr, sympy.Add):
        return all(is_nonnegative(term) for term in expr.args)
    if isinstance(expr, sympy.Mul):
        return all(is_nonnegative(factor) for factor in expr.args)
    return isinstance(expr, (FloorDiv, ModularIndexing)) and is_nonnegative(expr.args[0])


def _split_multiples(total: sympy.Add, divisor) -> tuple:
    """Split a sum into (sum of terms / divisor for terms divisible by it, the other terms)."""
    whole, rest = sympy.Integer(0), sympy.Integer(0)
    for term in total.args:
        coefficient, remainder = term.as_coeff_Mul()
        if divisor.is_Integer and coefficient.is_Integer and \
                int(coefficient) % int(divisor) == 0:
            whole += (coefficient // divisor) * remainder
        elif term.is_Integer and divisor.is_Integer and int(term) % int(divisor) == 0:
            whole += term // divisor
        else:
            rest += term
    return whole, rest


def upper_bound(expr: Expr, ranges: Mapping[sympy.Symbol, Expr]):
    """An integer upper bound (exclusive) of a non-negative `expr`, or None if unknown."""
    if expr.is_Integer:
        return int(expr) + 1
    if isinstance(expr, sympy.Symbol):
        size = ranges.get(expr)
        return int(size) if size is not None and size.is_Integer else None
    if isinstance(expr, sympy.Add):
        total = 0
        for term in expr.args:
            bound = upper_bound(term, ranges)
            if bound is None:
                return None
            total += bound - 1
        return total + 1
    if isinstance(expr, sympy.Mul):
        coefficient, rest = expr.as_coeff_Mul()
        if rest == expr:    # a product of symbols (a size times a loop variable): unknown
            return None
        bound = upper_bound(rest, ranges)
        if bound is None or not coefficient.is_Integer or coefficient < 0:
            return None
        return int(coefficient) * (bound - 1) + 1
    if isinstance(expr, FloorDiv) and expr.args[1].is_Integer:
        bound = upper_bound(expr.args[0], ranges)
        return None if bound is None else (bound - 1) // int(expr.args[1]) + 1
    if isinstance(expr, ModularIndexing) and expr.args[2].is_Integer:
        return int(expr.args[2])
    return None


def simplify_index(expr: Expr, ranges: Mapping[sympy.Symbol, Expr]) -> Expr:
    """Simplify `expr` using the loop ranges: drop divisions and modulos the ranges make
    trivial, and fold `d*(x // d) + x % d` back into `x`."""
    if not expr.has(FloorDiv, ModularIndexing):
        return expr
    return _simplify_index_cached(expr, tuple(ranges.items()))


@functools.lru_cache(maxsize=16384)
def _simplify_index_cached(expr: Expr, ranges: tuple) -> Expr:
    """`simplify_index`, memoised (a pure function of its hashable arguments; the scheduler
    asks for the same index under the same ranges once per node and per fusion check)."""
    return _simplify_index(expr, dict(ranges))


def _simplify_index(expr: Expr, ranges: Mapping[sympy.Symbol, Expr]) -> Expr:
    previous = None
    while previous != expr:
        previous = expr
        expr = expr.replace(lambda node: isinstance(node, (FloorDiv, ModularIndexing)),
                            lambda node: _simplify_division(node, ranges))
        expr = _fold_div_mod(sympy.expand(expr))
    return expr


def _drop_small_remainder(node, ranges):
    """`(k*a + r) // (k*m) -> a // m` (and the same inside a modulo) where `0 <= r < k` by the
    ranges: a flat index over a view, `(64*x0 + y0) // 1024` with `y0 < 64`, becomes
    `x0 // 16`, so that a read through the view matches the store it follows."""
    base, divisor = node.args[0], node.args[1]
    if not isinstance(base, sympy.Add) or not divisor.is_Integer:
        return None
    candidates = set()
    for term in base.args:
        coefficient, _ = term.as_coeff_Mul()
        if coefficient.is_Integer:
            candidates.add(math.gcd(int(coefficient), int(divisor)))
    for step in sorted(candidates - {0, 1}, reverse=True):
        whole, rest = _split_multiples(base, sympy.Integer(step))
        bound = upper_bound(rest, ranges) if is_nonnegative(rest) else None
        if whole != 0 and bound is not None and bound <= step:
            if isinstance(node, FloorDiv):
                return FloorDiv(whole, divisor // step)
            return ModularIndexing(whole, divisor // step, node.args[2])
    return None


def _simplify_division(node, ranges):
    simpler = _drop_small_remainder(node, ranges)
    if simpler is not None:
        return simpler
    base = node.args[0]
    bound = upper_bound(base, ranges)
    if isinstance(node, FloorDiv):
        divisor = node.args[1]
        if bound is not None and divisor.is_Integer and bound <= int(divisor):
            return sympy.Integer(0)
        return node
    divisor, modulus = node.args[1], node.args[2]
    if bound is not None and divisor.is_Integer and modulus.is_Integer:
        if bound <= int(divisor):
            return sympy.Integer(0)
        if bound <= int(divisor) * int(modulus):
            return FloorDiv(base, divisor)
    return node


def _fold_div_mod(expr: Expr) -> Expr:
    """`c*d*(x//d) + c*(x%d) -> c*x` and `c*d*((x//d)%m) + c*(x%d) -> c*((x)%(d*m))`, `d`
    an integer or a size expression (`997*s1*(x // s1) + 997*(x % s1) -> 997*x`)."""
    if not isinstance(expr, sympy.Add):
        return expr
    terms = [term.as_coeff_Mul() for term in expr.args]
    for position, (coefficient, atom) in enumerate(terms):
        if not (isinstance(atom, ModularIndexing) and atom.args[1] == 1):
            continue
        base, modulus = atom.args[0], atom.args[2]
        for other, term in enumerate(expr.args):
            other_atom = term / (coefficient * modulus)
            if other == position or not isinstance(other_atom, (FloorDiv, ModularIndexing)):
                continue
            replacement = None
            if isinstance(other_atom, FloorDiv) and other_atom.args == (base, modulus):
                replacement = coefficient * base
            elif isinstance(other_atom, ModularIndexing) and other_atom.args[:2] == (base,
                                                                                    modulus):
                replacement = coefficient * ModularIndexing(base, 1,
                                                            modulus * other_atom.args[2])
            if replacement is not None:
                kept = [c * a for k, (c, a) in enumerate(terms) if k not in (position, other)]
                return _fold_div_mod(sympy.Add(*kept, replacement))
    return expr


def substitute(expr: Expr, replacements: Mapping) -> Expr:
    """`expr` with symbols replaced (no evaluation beyond sympy's own canonicalisation)."""
    if not replacements:
        return expr
    return to_expr(expr).xreplace(replacements)


def linear_coefficient(expr: Expr, symbol: sympy.Symbol):
    """The coefficient of `symbol` if it appears only linearly in `expr`, else None."""
    expr = to_expr(expr)
    if not expr.has(symbol):
        return sympy.Integer(0)
    coefficient = _multilinear_coefficient(expr, symbol)
    if coefficient is not None:
        return coefficient
    return _linear_coefficient_slow(expr, symbol)


def _multilinear_coefficient(expr: Expr, symbol: sympy.Symbol):
    """`expand(expr).coeff(symbol)` without expanding, for the common index form: a sum of
    integers and products of an integer with distinct plain symbols (`c0 + c1*x0 + c2*s0*x1`,
    already expanded); None for any other form."""
    parts = []
    for term in (expr.args if expr.is_Add else (expr,)):
        if term.is_Symbol:
            if term == symbol:
                parts.append(sympy.Integer(1))
            continue
        if term.is_Integer:
            continue
        if not term.is_Mul:
            return None
        found = False
        for factor in term.args:
            if factor.is_Symbol:
                found = found or factor == symbol
            elif not factor.is_Integer:
                return None
        if found:
            parts.append(sympy.Mul(*[factor for factor in term.args if factor != symbol]))
    return sympy.Add(*parts)


@functools.lru_cache(maxsize=16384)
def _linear_coefficient_slow(expr: Expr, symbol: sympy.Symbol):
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, (FloorDiv, ModularIndexing)) and node.has(symbol):
            return None
    coefficient = sympy.expand(expr).coeff(symbol)
    if coefficient.has(symbol) or not coefficient.free_symbols.isdisjoint({symbol}):
        return None
    return coefficient
