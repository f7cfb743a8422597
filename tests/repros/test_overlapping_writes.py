"""Program-fuzzer finding P7: `torch.add(a, w.T, out=w)` (a write into a tensor that shares
elements with another argument) passes on fake tensors, which do not check memory overlap,
so it was compiled; eager refuses it when it runs, and the error then came out of the
compiled graph (traceback through framejit's glue, not the user's closure). Writes that share
elements with another argument, or into an expanded view, now break the graph at the
compiled frame's call, so the op runs eagerly in its real frames: eager's error, or eager's
result where eager allows it."""
import torch

from tests.capture.differential import check
from tests.repros.test_tracebacks_and_frames import same_traceback


def test_out_overlapping_an_input(backend):
    def f(x, w):
        for t in [w.T]:
            def write(a):
                torch.add(torch.ones(2, 2), t, out=w)
            write(x)
    check(f, torch.ones(2, 2), torch.ones(2, 2), graphs=None, breaks=None, backend=backend)


def overlapping(x, w):
    for t in [w.T]:
        def write(a):
            torch.add(torch.ones(2, 2), t, out=w)
        write(x)


def test_out_overlapping_an_input_traceback():
    same_traceback(overlapping, torch.ones(2, 2), torch.ones(2, 2))


def test_writes_eager_allows(backend):
    def f(x):
        x[:, 0] += x[:, 1]      # same storage, no shared element: compiled
        x.add_(x)               # the same view
        return x * 2
    check(f, torch.arange(16.0).reshape(4, 4), backend=backend)


def test_shifted_copy(backend):
    def f(x):
        x[1:] = x[:-1]          # shares elements: eager refuses it
        return x
    check(f, torch.arange(16.0).reshape(4, 4), graphs=None, breaks=None, backend=backend)
