"""Capture basics: tensor ops, Python values, control flow on constants, loops, calls."""
import math
import operator

import pytest
import torch

from tests.capture.differential import check

x4 = torch.randn(4)
m34 = torch.randn(3, 4)


def test_pointwise_chain():
    check(lambda x: (x * 2 + 1).relu().sigmoid(), x4)


def test_matmul_and_reduction():
    check(lambda x, w: torch.relu(x @ w).sum(-1), m34, torch.randn(4, 5))


def test_python_scalars_fold():
    def f(x, n):
        scale = math.sqrt(n) / 2 + n // 3
        return x * scale
    check(f, x4, 9)


def test_branch_on_python_value():
    def f(x, flag):
        if flag:
            return x + 1
        return x - 1
    check(f, x4, True)
    check(f, x4, False)


def test_branch_on_shape():
    def f(x):
        if x.shape[0] > 3 and x.dim() == 1:
            return x.sum()
        return x.mean()
    check(f, x4)


def test_for_loop_over_range_and_list():
    def f(x, weights):
        for i in range(3):
            x = x + i
        for w in weights:
            x = x * w
        return x
    check(f, x4, [1.0, 2.0, 0.5])


def test_while_loop():
    def f(x):
        i = 0
        while i < 4:
            x = x.cos()
            i += 1
        return x
    check(f, x4)


def test_tuple_unpack_and_star():
    def f(pair, *rest):
        a, b = pair
        first, *middle, last = rest
        return a + b + first + last + len(middle)
    check(f, (x4, x4 * 2), x4, 1, 2, x4)


def test_kwargs_and_defaults():
    def f(x, y=None, *, scale=2.0, **extra):
        if y is None:
            y = x
        return (x + y) * scale + extra.get("bias", 0)
    check(f, x4)
    check(f, x4, y=x4 * 3, scale=0.5, bias=1.0)


def test_inlined_helper_and_closure():
    offset = 3.0

    def helper(t, k=2):
        return t * k + offset

    def f(x):
        return helper(x) + helper(x, k=5)
    check(f, x4)


def test_lambda_and_nested_function():
    def f(x):
        square = lambda t: t * t  # noqa: E731

        def cube(t):
            return square(t) * t
        return cube(x) + square(x)
    check(f, x4)


def test_list_comprehension_and_generator():
    def f(xs):
        doubled = [t * 2 for t in xs]
        return sum(t.sum() for t in doubled), any(t.dim() == 1 for t in xs)
    check(f, [x4, x4 + 1, x4 + 2])


def test_dict_building_and_access():
    def f(x):
        d = {"a": x, "b": x * 2}
        d["c"] = d["a"] + d["b"]
        return {k: v.sum() for k, v in d.items()}
    check(f, x4)


def test_tensor_methods_and_attributes():
    def f(x):
        y = x.view(2, 6).transpose(0, 1).contiguous()
        return y.float().mean(dim=0, keepdim=True), y.shape, y.dtype, y.size(1), x.T
    check(f, m34)


def test_indexing_and_slicing():
    def f(x):
        return x[0], x[:, 1:3], x[..., -1], x[None, 1], x[x.shape[0] - 1]
    check(f, m34)


def test_setitem_on_new_tensor():
    def f(x):
        y = x.clone()
        y[0] = 0
        y[:, 1] += 1
        return y
    check(f, m34)


def test_inplace_on_input_is_visible_to_caller():
    def f(x):
        x.add_(1)
        return x * 2
    check(f, torch.randn(4))


def test_returned_input_keeps_identity():
    def f(x, y):
        return x, y + 1

    import dynamo
    jitted = dynamo.jit(f, backend="eager")
    a, b = torch.randn(2), torch.randn(2)
    out = jitted(a, b)
    assert out[0] is a


def test_f_strings_and_string_methods():
    def f(x, name):
        key = f"{name}_{x.shape[0]:03d}".upper()
        return {key: x.sum()}, key.split("_")
    check(f, x4, "layer")


def test_operator_module_and_builtins():
    def f(x, values):
        total = operator.add(x, 1)
        return total * max(values) + min(values) + abs(-2) + len(values), sorted(values)
    check(f, x4, [3, 1, 2])


def test_isinstance_and_type_checks():
    def f(x, maybe):
        out = x
        if isinstance(maybe, torch.Tensor):
            out = out + maybe
        if isinstance(maybe, (int, float)):
            out = out * maybe
        return out, type(maybe).__name__
    check(f, x4, 2)
    check(f, x4, x4)


def test_enumerate_zip_reversed():
    def f(xs, ws):
        out = 0
        for i, (t, w) in enumerate(zip(xs, ws)):
            out = out + t * w * i
        for t in reversed(xs):
            out = out - t
        return out
    check(f, [x4, x4, x4], [1.0, 2.0, 3.0])


def test_walrus_and_ternary():
    def f(x):
        y = (n := x.shape[0]) * 2
        return x * y if n > 2 else x
    check(f, x4)


def test_match_on_constants():
    def f(x, mode):
        match mode:
            case "double":
                return x * 2
            case "neg" | "negate":
                return -x
            case _:
                return x
    for mode in ("double", "neg", "negate"):
        check(f, x4, mode)
    check(f, x4, "other", graphs=0)  # returns its input: no tensor work to compile


def test_assert_that_holds():
    def f(x):
        assert x.dim() == 1, "expected a vector"
        return x + 1
    check(f, x4)


def test_try_except_that_does_not_fire():
    def f(x):
        try:
            y = x * 2
        except RuntimeError:
            y = x
        return y
    check(f, x4)


def test_with_no_grad_and_enable_grad():
    def f(x):
        with torch.no_grad():
            y = x * 2
        with torch.enable_grad():
            z = x * 3
        return y, z, y.requires_grad, z.requires_grad
    check(f, torch.randn(3, requires_grad=True))


def test_torch_functions_with_kwargs():
    def f(x):
        return torch.cat([x, x], dim=0), torch.stack((x, x), 1), torch.where(x > 0, x, 0.0), \
            torch.ones(3, dtype=torch.float64), torch.arange(4) * 2
    check(f, x4)


def test_functional_ops():
    import torch.nn.functional as F

    def f(x):
        return F.gelu(x), F.softmax(x, dim=-1), F.layer_norm(x, (4,)), F.dropout(x, 0.5, False)
    check(f, m34)


@pytest.mark.static_shapes(reason="with every int >= 2 symbolic, a + b of ints is graph work")
def test_no_tensor_work_is_not_compiled():
    def f(a, b):
        return a + b
    check(f, 1, 2, graphs=0)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                operator.floordiv, operator.pow, operator.lt, operator.ge,
                                operator.eq, operator.ne])
def test_binary_operators_with_scalars(op):
    check(lambda x: (op(x, 2), op(3, x)), x4.abs() + 1)
