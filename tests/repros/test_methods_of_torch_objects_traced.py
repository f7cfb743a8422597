"""Python methods of torch objects called without a tensor argument ran once, at trace time,
and folded to their result: `torch.no_grad().__exit__` put grad mode back while tracing but
never on the calls that hit the entry. A loop whose `no_grad` block holds a graph break in a
generator (the block entered by eager code, its real `__exit__` left on the stack of the
region after the break) left grad mode off after the call (program fuzzer P18, seed 14527).
Such methods are traced into like any user method."""
import torch

from tests.capture.differential import check


def gen(base):
    print("gen")  # a graph break: the generator runs eagerly
    yield base


def test_grad_mode_after_a_loop_whose_no_grad_block_breaks_in_a_generator(backend):
    def f(x, y, items):
        for _ in items:
            with torch.no_grad():
                for t in gen(y):
                    pass
                u = x.amax()
        return u * 2, torch.is_grad_enabled()
    check(f, torch.randn(3, requires_grad=True), torch.randn(3), [1, 2, 3], graphs=None,
          breaks=None, calls=3, backend=backend)


def test_explicit_enter_and_exit_of_a_grad_mode_object(backend):
    def f(x, manager):
        manager.__enter__()
        y = x.sin()
        manager.__exit__(None, None, None)
        return y * 2, torch.is_grad_enabled()
    x = torch.randn(3, requires_grad=True)
    check(f, x, torch.no_grad(), graphs=None, breaks=None, calls=3, backend=backend)
    check(f, x, torch.enable_grad(), graphs=None, breaks=None, calls=3, backend=backend)


def test_exit_of_a_block_entered_by_the_caller(backend):
    def f(x, leave):
        y = x.sin()
        leave(None, None, None)
        return y * 2, torch.is_grad_enabled()

    def run(fn, x):
        manager = torch.no_grad()
        manager.__enter__()
        try:
            return fn(x, manager.__exit__)
        finally:
            torch.set_grad_enabled(True)
    import dynamo
    x = torch.randn(3, requires_grad=True)
    jitted = dynamo.jit(f, backend=backend)
    for _ in range(3):
        expected, actual = run(f, x), run(jitted, x)
        assert actual[1] == expected[1]
        assert actual[0].requires_grad == expected[0].requires_grad is False
        torch.testing.assert_close(actual[0], expected[0])


def test_methods_of_a_distribution_are_traced_with_tensors(backend):
    normal = torch.distributions.Normal(torch.zeros(3), torch.ones(3), validate_args=False)

    def f(x):
        return normal.log_prob(x) + normal.entropy()
    check(f, torch.randn(3), graphs=1, breaks=0, backend=backend)
