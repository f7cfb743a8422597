"""Corpus: every Python operator and comparison, on tensors, on Python numbers (folded at trace
time) and mixed; `math` and `operator` functions; subscripts and slices."""
import math
import operator

import pytest
import torch

from tests.capture.differential import check

x4 = torch.randn(4)
positive = torch.rand(4) + 0.5
integers = torch.arange(1, 7).reshape(2, 3)
m34 = torch.randn(3, 4)

BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
          operator.mod, operator.pow]
COMPARISONS = [operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge]
BITWISE = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.__name__)
def test_binary_tensor_tensor(op):
    check(lambda x, y: op(x, y), positive, positive.flip(0))


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.__name__)
def test_binary_on_python_numbers_fold(op):
    def f(x, a, b):
        return x * op(a, b)
    check(f, x4, 7, 3)
    check(f, x4, 2.5, 0.5)


@pytest.mark.parametrize("op", COMPARISONS, ids=lambda op: op.__name__)
def test_comparison_tensor_and_scalar(op):
    check(lambda x: (op(x, 0.1), op(0.1, x)), x4)


@pytest.mark.parametrize("op", BITWISE, ids=lambda op: op.__name__)
def test_bitwise_on_integer_tensors(op):
    check(lambda x, y: op(x, y), integers, torch.full((2, 3), 2))


@pytest.mark.parametrize("symbol", ["+=", "-=", "*=", "/=", "//=", "**=", "%="])
def test_augmented_assignment_on_new_tensor(symbol):
    namespace = {}
    exec(f"def f(x):\n    y = x + 1\n    y {symbol} 2\n    return y", namespace)
    check(namespace["f"], positive)


@pytest.mark.parametrize("symbol", ["&=", "|=", "^=", "<<=", ">>="])
def test_augmented_bitwise_on_integers(symbol):
    namespace = {}
    exec(f"def f(x, n):\n    n {symbol} 3\n    return x * n", namespace)
    check(namespace["f"], x4, 6)


def test_matmul_operator_and_inplace_matmul_shapes():
    check(lambda a, b: (a @ b, (a @ b).T @ a), m34, torch.randn(4, 2))


def test_unary_operators():
    check(lambda x: (-x, +x, abs(x), ~(x > 0)), x4)


def test_unary_on_numbers():
    check(lambda x, n: x * (-n) + (+n) + (~n), x4, 5)


def test_not_on_python_values():
    def f(x, flag, items):
        if not flag and not items:
            return x + 1
        return x - 1
    check(f, x4, False, [])
    check(f, x4, True, [1])


def test_chained_comparison_of_numbers():
    def f(x, n):
        return x * 2 if 0 < n <= 4 < n * 2 else x - 1
    check(f, x4, 3)
    check(f, x4, 1)


def test_identity_comparisons():
    def f(x, y, missing):
        same = x is x
        different = x is not y
        none = missing is None
        return x + int(same) + int(different) + int(none)
    check(f, x4, x4.clone(), None)


def test_membership_in_containers():
    def f(x, names, table):
        out = x
        if "scale" in names:
            out = out * 2
        if "bias" not in table:
            out = out + 1
        if 3 in (1, 2, 3):
            out = out - 1
        return out
    check(f, x4, ["scale", "shift"], {"weight": 1})


def test_string_concatenation_and_repetition():
    def f(x, prefix):
        key = prefix + "_" + "ab" * 2
        return {key: x + 1}
    check(f, x4, "layer")


def test_tuple_and_list_concatenation():
    def f(x, extra):
        parts = (x,) + (x * 2,)
        more = [x] * 2 + list(extra)
        return sum(parts) + sum(more)
    check(f, x4, (x4, x4))


def test_division_by_zero_raises_like_eager():
    def f(x, n):
        return x * (1 / n)
    check(f, x4, 0, graphs=0, breaks=None)  # raises: the frame runs eagerly


@pytest.mark.parametrize("name", ["sqrt", "log", "exp", "floor", "ceil", "sin", "cos", "tanh",
                                  "log2", "fabs"])
def test_math_functions_fold(name):
    function = getattr(math, name)
    check(lambda x, n: x * function(n), x4, 2.5)


def test_math_constants_and_helpers():
    def f(x, n):
        return x * math.pi + math.gcd(12, n) + math.prod([1, 2, n]) + math.isclose(n, 8.0) + \
            math.inf * 0 + math.e
    check(f, x4, 8)


def test_math_on_tensor_shape():
    def f(x):
        scale = 1.0 / math.sqrt(x.shape[-1])
        return x * scale
    check(f, m34)


@pytest.mark.parametrize("op", [operator.neg, operator.abs, operator.pos],
                         ids=lambda op: op.__name__)
def test_operator_unary_functions_on_tensors(op):
    check(lambda x: op(x), x4)


def test_operator_getitem_itemgetter_attrgetter():
    def f(x, pair):
        first = operator.itemgetter(0)(pair)
        shape = operator.attrgetter("shape")(x)
        return operator.getitem(x, 1) + first, shape
    check(f, m34, (x4[:1], 5))


def test_operator_inplace_functions():
    def f(x):
        y = x.clone()
        y = operator.iadd(y, 1)
        y = operator.imul(y, 3)
        return y
    check(f, x4)


def test_operator_truth_and_contains():
    def f(x, items):
        return x * operator.truth(items) + operator.contains(items, 2)
    check(f, x4, [1, 2])


def test_slices_with_steps_and_negative_bounds():
    check(lambda x: (x[::2], x.flip(0)[:2], x[-3:-1], x[1:100], x[-1:]), torch.arange(6.0))


def test_slice_objects_as_values():
    def f(x, start):
        window = slice(start, start + 2)
        return x[window], window.start, x[slice(None, None, 2)]
    check(f, torch.arange(8.0), 1)


def test_slicing_python_sequences():
    def f(x, values):
        head, tail = values[:2], values[2:]
        return x * sum(head) - sum(tail), values[::-1], "abcdef"[1:4]
    check(f, x4, [1, 2, 3, 4])


def test_advanced_tensor_indexing():
    def f(x, index):
        return x[index], x[:, [0, 2]], x[x.shape[0] - 1, None], x[..., None, 1]
    check(f, m34, torch.tensor([2, 0]))


def test_boolean_scalar_indexing_and_ellipsis():
    check(lambda x: (x[True], x[...]), m34)


def test_numeric_tower_mixing():
    def f(x, i, r):
        return x * (i + r) + complex(1, 2).real + (True + 1) + round(2.675, 2)
    check(f, x4, 3, 0.5)


def test_comparison_of_tensor_shapes_and_dtypes():
    def f(x, y):
        same_shape = x.shape == y.shape
        same_dtype = x.dtype == y.dtype
        bigger = x.shape > (2, 2)
        return x * int(same_shape) + int(same_dtype) + int(bigger)
    check(f, m34, m34.double())
