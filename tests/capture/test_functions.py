"""Corpus: user functions inlined — defaults, `*args`/`**kwargs`, keyword-only and
positional-only parameters, closures and nested functions, lambdas, `functools.partial`,
decorators built with `functools.wraps`, recursion, generators, globals read and written."""
import functools

import torch

from tests.capture.differential import check

x4 = torch.randn(4)
m34 = torch.randn(3, 4)

SCALE = 3.0
COUNTERS = {"calls": 0}
HISTORY = []
LIMIT = 2


def scaled(x, factor=SCALE):
    return x * factor


def with_everything(a, b=2, *rest, c, d=4, **options):
    return a * b + sum(rest) + c * d + sum(options.values())


def positional_only(x, y, /, z=1):
    return x + y * z


def keyword_only(x, *, scale, shift=0.0):
    return x * scale + shift


def trace_calls(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs) + 1
    return wrapper


@trace_calls
def decorated(x, k=2):
    return x * k


def repeat(times):
    def decorate(function):
        @functools.wraps(function)
        def wrapper(x):
            for _ in range(times):
                x = function(x)
            return x
        return wrapper
    return decorate


@repeat(3)
def doubled(x):
    return x * 2


def factorial(n):
    return 1 if n <= 1 else n * factorial(n - 1)


def tree_sum(x, depth):
    if depth == 0:
        return x
    return tree_sum(x, depth - 1) + tree_sum(x * 0.5, depth - 1)


def test_module_level_function_with_default_from_global():
    check(lambda x: scaled(x) + scaled(x, 0.5), x4)


def test_every_kind_of_parameter():
    def f(x):
        return with_everything(x, 3, x, x, c=x, extra=x) + with_everything(x, c=1, d=x)
    check(f, x4)


def test_positional_only_and_keyword_only():
    check(lambda x: positional_only(x, x, z=3) + keyword_only(x, scale=2) +
          keyword_only(x, shift=1.0, scale=0.5), x4)


def test_star_args_and_kwargs_forwarding():
    def inner(x, y, *, scale=1.0):
        return (x + y) * scale

    def forward(*args, **kwargs):
        return inner(*args, **kwargs)
    check(lambda x: forward(x, x, scale=2.0) + forward(*[x, 1], **{"scale": 3.0}), x4)


def test_argument_unpacking_from_containers():
    def inner(a, b, c=0):
        return a * b + c

    def f(x, pair, options):
        return inner(*pair) + inner(x, *pair[:1], **options)
    check(f, x4, (x4, 2.0), {"c": 5})


def test_closure_reads_enclosing_values():
    def make(offset):
        def add(x):
            return x + offset
        return add
    add_three = make(3.0)
    check(lambda x: add_three(x) * 2, x4)


def test_nested_function_defined_and_called_in_frame():
    def f(x, k):
        def inner(y, power=2):
            return y ** power * k
        return inner(x) + inner(x, power=3)
    check(f, x4, 2.0)


def test_nonlocal_rebinding_inside_nested_function():
    def f(x):
        total = x

        def accumulate(value):
            nonlocal total
            total = total + value
        accumulate(x)
        accumulate(1.0)
        return total
    check(f, x4)


def test_closure_over_loop_variable_with_default_binding():
    def f(x):
        functions = [lambda y, i=i: y * i for i in range(3)]
        return [function(x) for function in functions]
    check(f, x4)


def test_lambdas_as_values():
    def f(x, activation):
        transforms = {"double": lambda t: t * 2, "neg": lambda t: -t}
        return transforms[activation](x), (lambda *args: len(args))(1, 2, 3)
    check(f, x4, "neg")


def test_function_passed_as_argument():
    def apply_twice(function, x):
        return function(function(x))
    check(lambda x, g: apply_twice(g, x), x4, torch.tanh)
    check(lambda x, g: apply_twice(g, x), x4, lambda t: t + 1)


def test_partial_of_user_function_and_torch_function():
    def affine(x, weight, bias=0.0):
        return x * weight + bias
    double = functools.partial(affine, weight=2.0)
    softmax = functools.partial(torch.softmax, dim=-1)
    check(lambda x: double(x, bias=1.0) + softmax(x), x4)


def test_partial_created_in_frame():
    def f(x, power):
        raise_to = functools.partial(torch.pow, exponent=power)
        return raise_to(x), raise_to.keywords["exponent"]
    check(f, x4.abs(), 3)


def test_functools_wraps_decorator():
    check(lambda x: decorated(x) + decorated(x, k=3), x4)


def test_decorator_factory_with_arguments():
    check(lambda x: doubled(x), x4)


def test_decorated_function_metadata():
    def f(x):
        return {decorated.__name__: x + 1, doubled.__wrapped__.__name__: x - 1}
    check(f, x4)


def test_recursion_on_python_values():
    check(lambda x: x * factorial(5), x4)


def test_recursion_building_a_graph():
    check(lambda x: tree_sum(x, 3), x4)


def test_deep_recursion_beyond_the_inline_limit_runs_eagerly():
    def deep(x, n):
        return x if n == 0 else deep(x + 1, n - 1)
    import dynamo
    limit = dynamo.config.inline_depth
    check(lambda x: deep(x, limit + 5), x4, graphs=None, breaks=None)


def test_global_read_in_helper():
    def f(x):
        return x * SCALE + LIMIT
    check(f, x4)


def test_global_rebound_in_frame():
    def f(x):
        global LIMIT
        LIMIT = LIMIT + 1
        return x * LIMIT
    check(f, x4)


def test_global_container_mutated():
    def f(x):
        COUNTERS["calls"] += 1
        HISTORY.append(x.shape[0])
        return x * COUNTERS["calls"]
    check(f, x4)


def test_generator_function_with_state():
    def running_sum(values):
        total = 0
        for value in values:
            total += value
            yield total

    def f(x, values):
        return [x * partial_sum for partial_sum in running_sum(values)]
    check(f, x4, [1, 2, 3])


def test_method_of_builtin_passed_as_function():
    def f(x, names):
        upper = str.upper
        return {upper(name): x + len(name) for name in names}
    check(f, x4, ["a", "bc"])


def test_default_argument_is_mutable_list():
    """A mutable default keeps its state across calls, compiled or not (eager and jitted
    runs use separate function objects here, since they would share the default)."""
    import dynamo

    def make():
        def append_to(value, target=[]):  # noqa: B006 (the shared default is the point)
            target.append(value)
            return len(target)

        def f(x):
            return x * append_to(1)
        return f, append_to
    eager, eager_helper = make()
    jitted_source, jit_helper = make()
    jitted = dynamo.jit(jitted_source, backend="eager")
    for _ in range(3):
        torch.testing.assert_close(jitted(x4), eager(x4))
    assert jit_helper.__defaults__[0] == eager_helper.__defaults__[0] == [1, 1, 1]


def test_keyword_argument_errors_raise_like_eager():
    def inner(x, scale):
        return x * scale

    def f(x):
        return inner(x, scale=1, bogus=2)
    check(f, x4, graphs=0, breaks=None)
