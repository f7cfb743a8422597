"""In-place updates of inputs applied in program order, once (Soundness II, class 1). The
update of `s` read `x` after `x`'s own update had been written (the scheduler put every input
update last, in lowering order, with no edge from a reader of the old `x` that was itself an
update): `x.add_(1); s.add_(x)` left `s` one too high, and an SGD-with-momentum step was wrong.
Both backends, through `dynamo.jit`."""
import torch

from tests.capture.differential import check

STATE = torch.zeros(3)


def test_update_reads_an_input_updated_before_it(backend):
    def f(x, s):
        x.add_(1)
        s.add_(x)
        return s
    check(f, torch.ones(3), torch.zeros(3), backend=backend)


def test_global_updated_after_an_input(backend):
    def f(x):
        x.add_(1)
        STATE.add_(x)
        return STATE.clone()
    check(f, torch.ones(3), backend=backend)


def test_sgd_momentum_step(backend):
    def sgd(p, g, buf, lr):
        buf.mul_(0.9).add_(g)
        p.add_(buf, alpha=-lr)
        return p
    check(sgd, torch.ones(3), torch.full((3,), 0.1), torch.full((3,), 0.5), 0.1,
          backend=backend)


def test_swap_and_shift(backend):
    def f(x, s, y):
        t = x.clone()
        x.copy_(s)
        s.copy_(t)
        y[1:] = y[:-1] * 2
        return x + s, y
    check(f, torch.arange(3.0), torch.arange(3.0) + 10, torch.arange(5.0), backend=backend)
