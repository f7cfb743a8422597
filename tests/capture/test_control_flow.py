"""Corpus: control flow on values known at trace time: branches, loops (`break`, `continue`,
`else`), comprehensions, generators, `match`, walrus, f-strings, `assert`, `raise` on paths not
taken, and exceptions raised and caught inside the compiled region."""
import pytest
import torch

from tests.capture.differential import check

x4 = torch.randn(4)
m34 = torch.randn(3, 4)


@pytest.mark.parametrize("mode", ["relu", "tanh", "sigmoid", "other"])
def test_if_elif_else_chain(mode):
    def f(x, mode):
        if mode == "relu":
            return x.relu()
        elif mode == "tanh":
            return x.tanh()
        elif mode == "sigmoid":
            return x.sigmoid()
        else:
            return x * 0.5
    check(f, x4, mode)


@pytest.mark.parametrize("value", [None, 0, 3, "", "text", [], [1], (), {}, {"a": 1}])
def test_truthiness_of_python_values(value):
    def f(x, value):
        return x + 1 if value else x - 1
    check(f, x4, value)


def test_branch_on_none_checks():
    def f(x, mask=None, bias=None):
        if mask is not None:
            x = x * mask
        if bias is None:
            bias = 0.5
        return x + bias
    check(f, x4)
    check(f, x4, x4 > 0)
    check(f, x4, bias=x4)


def test_branch_on_tensor_metadata():
    def f(x):
        if x.dtype == torch.float32 and x.is_floating_point() and not x.requires_grad:
            x = x * 2
        if x.device.type == "cpu":
            x = x + 1
        if x.ndim == 2 and x.numel() > 4:
            x = x.sum(0)
        return x
    check(f, m34)


def test_for_with_break_and_else():
    def f(x, limits):
        for limit in limits:
            if limit > 2:
                x = x * limit
                break
            x = x + limit
        else:
            x = -x
        return x
    check(f, x4, [1, 2, 5, 7])
    check(f, x4, [1, 1])


def test_for_with_continue():
    def f(x, n):
        for i in range(n):
            if i % 2:
                continue
            x = x + i
        return x
    check(f, x4, 6)


def test_while_with_break_and_else():
    def f(x):
        i = 0
        while i < 10:
            i += 3
            if i > 6:
                break
            x = x * 1.5
        else:
            x = x * 0
        return x, i
    check(f, x4)


def test_nested_loops_over_shapes():
    def f(x):
        total = x.new_zeros(())
        for row in range(x.shape[0]):
            for column in range(0, x.shape[1], 2):
                total = total + x[row, column]
        return total
    check(f, m34)


def test_loop_over_dict_items_and_keys():
    def f(x, weights):
        out = x
        for name, weight in weights.items():
            out = out + weight * len(name)
        for name in weights:
            out = out - len(name)
        return out
    check(f, x4, {"a": 1.0, "bb": 2.0})


def test_loop_over_tensor_rows():
    def f(x):
        rows = []
        for row in x:
            rows.append(row.max())
        return torch.stack(rows)
    check(f, m34)


def test_list_comprehension_with_condition():
    check(lambda x, n: [x * i for i in range(n) if i % 2 == 0], x4, 5)


def test_nested_comprehension():
    def f(x):
        return [[x[i] * j for j in range(2)] for i in range(3)]
    check(f, m34)


def test_dict_and_set_comprehensions():
    def f(x, names):
        scaled = {name: x * len(name) for name in names}
        lengths = {len(name) for name in names}
        return scaled, sorted(lengths)
    check(f, x4, ["a", "bb", "cc"])


def test_generator_expression_consumed_by_builtins():
    def f(xs):
        return sum(t.sum() for t in xs), max(t.shape[0] for t in xs), tuple(t + 1 for t in xs)
    check(f, [x4, x4 * 2])


def test_generator_function_inlined():
    def pairs(items):
        for index, item in enumerate(items):
            yield index, item

    def f(xs):
        return [t * i for i, t in pairs(xs)]
    check(f, [x4, x4 + 1, x4 + 2])


def test_generator_with_return_and_yield_from():
    def inner(n):
        for i in range(n):
            yield i

    def outer(n):
        yield from inner(n)
        yield 100

    def f(x):
        return [x + value for value in outer(3)]
    check(f, x4)


def test_generator_driven_by_next():
    def counter():
        yield 1
        yield 2

    def f(x):
        numbers = counter()
        first = next(numbers)
        second = next(numbers)
        third = next(numbers, 10)
        return x * first + second + third
    check(f, x4)


@pytest.mark.parametrize("shape", [(2,), (2, 3), (1, 2, 3)])
def test_match_on_sequence_patterns(shape):
    def f(x, shape):
        match shape:
            case (n,):
                return x * n
            case (n, m):
                return x * (n + m)
            case _:
                return x - 1
    check(f, x4, shape)


def test_match_on_mapping_pattern():
    def f(x, options):
        match options:
            case {"scale": scale, "shift": shift}:
                return x * scale + shift
            case {"scale": scale}:
                return x * scale
        return x + 0
    check(f, x4, {"scale": 2.0, "shift": 1.0})
    check(f, x4, {"scale": 3.0})


def test_match_with_guard_and_literals():
    def f(x, n):
        match n:
            case 0:
                return x + 0
            case int() if n > 10:
                return x * 10
            case 1 | 2 | 3:
                return x * n
            case _:
                return -x
    for n in (0, 2, 20, 7):
        check(f, x4, n)


def test_walrus_in_comprehension_and_condition():
    def f(x, values):
        if (count := len(values)) > 2:
            x = x * count
        return [y for v in values if (y := v * 2) > 2], x
    check(f, x4, [1, 2, 3])


def test_f_string_conversions_and_specs():
    def f(x, name, ratio):
        label = f"{name!r}:{ratio:.2f}:{x.shape[0]:>4}:{name!s:^8}:{x.dtype}"
        return {label: x + 1}
    check(f, x4, "w", 0.12345)


def test_string_methods_fold():
    def f(x, name):
        parts = name.replace("-", "_").split("_")
        key = ".".join(part.capitalize() for part in parts)
        return x * len(key), key, name.startswith("a"), name.upper().strip()
    check(f, x4, "attn-proj_out")


def test_assert_with_message_that_holds():
    def f(x, n):
        assert n > 0, f"n must be positive, got {n}"
        assert x.shape == (4,)
        return x * n
    check(f, x4, 3)


def test_raise_on_path_not_taken():
    def f(x, mode):
        if mode not in ("a", "b"):
            raise ValueError(f"unknown mode {mode}")
        return x + 1 if mode == "a" else x - 1
    check(f, x4, "a")
    check(f, x4, "b")


def test_raise_on_taken_path_matches_eager():
    def f(x, mode):
        if mode != "a":
            raise ValueError(f"unknown mode {mode}")
        return x + 1
    check(f, x4, "z", graphs=0, breaks=None)  # raises: the frame runs eagerly


def test_try_except_catches_raised_error():
    def f(x, mode):
        try:
            if mode == "bad":
                raise KeyError(mode)
            y = x * 2
        except KeyError as error:
            y = x * len(error.args)
        return y
    check(f, x4, "bad")
    check(f, x4, "good")


def test_try_except_catches_builtin_errors():
    def f(x, table, items):
        try:
            scale = table["missing"]
        except KeyError:
            scale = 3
        try:
            extra = items[10]
        except IndexError:
            extra = 1
        try:
            bad = int("not a number")
        except ValueError:
            bad = 2
        return x * scale + extra + bad
    check(f, x4, {"present": 1}, [1, 2])


def test_try_finally_runs_on_normal_path():
    def f(x, log):
        try:
            y = x + 1
        finally:
            log.append("done")
        return y
    check(f, x4, [])


def test_try_except_else_finally():
    def f(x, fail):
        steps = []
        try:
            if fail:
                raise RuntimeError("boom")
        except RuntimeError:
            steps.append("except")
        else:
            steps.append("else")
        finally:
            steps.append("finally")
        return x * len(steps), steps
    check(f, x4, True)
    check(f, x4, False)


def test_exception_caught_in_inlined_helper():
    def lookup(table, key):
        try:
            return table[key]
        except KeyError:
            return 0.5

    def f(x, table):
        return x * lookup(table, "a") + lookup(table, "b")
    check(f, x4, {"a": 2.0})


def test_exception_from_helper_caught_by_caller():
    def strict(n):
        if n < 0:
            raise ValueError("negative")
        return n

    def f(x, n):
        try:
            value = strict(n)
        except ValueError:
            value = 0
        return x + value
    check(f, x4, -3)
    check(f, x4, 3)


def test_exception_subclass_and_tuple_match():
    class ConfigError(ValueError):
        pass

    def f(x, flag):
        try:
            if flag:
                raise ConfigError("bad config")
        except (KeyError, ValueError) as error:
            return x * 2, str(error) if isinstance(error, ConfigError) else ""
        return x, ""
    check(f, x4, True)


def test_stop_iteration_ends_manual_iteration():
    def f(x, values):
        iterator = iter(values)
        total = x
        while True:
            try:
                total = total + next(iterator)
            except StopIteration:
                break
        return total
    check(f, x4, [1, 2, 3])


def test_sequence_protocol_iteration_ends_on_index_error():
    class Rows:
        def __init__(self, n):
            self.n = n

        def __getitem__(self, index):
            if index >= self.n:
                raise IndexError(index)
            return index * 2

    def f(x, n):
        return [x + value for value in Rows(n)]
    check(f, x4, 3)


def test_conditional_expression_and_boolean_operators():
    def f(x, a, b):
        scale = a or b or 1
        shift = a and b
        return x * scale + (shift if shift else 0) + (2 if a is None else 3)
    check(f, x4, 0, 4)
    check(f, x4, 2, 5)
    check(f, x4, None, 0)
