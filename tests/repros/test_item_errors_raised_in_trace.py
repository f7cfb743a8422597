"""Program-fuzzer finding P12 (tests/fuzz/FINDINGS.md): `del lst[i]`, `lst[i] = v` or
`del d[k]` that fails on a list or dict the trace models (an index out of range after the
list was emptied through an alias, a missing key, an extended slice of another length)
raised its error out of the tracer: an internal error that looked like the user's, without
the function's frame, and the mutations before it were lost. The error is now raised in the
traced code, as the real operation raises it."""
import torch

from tests.capture.differential import check


def test_delete_from_a_list_emptied_through_an_alias(backend):  # seed 12049
    def f(lst, lst2):
        first = lst.pop(0)
        del lst[-1]
        lst2.pop()
        del lst2[0]
        return first
    shared = [torch.ones(2), torch.ones(2) * 2, torch.ones(2) * 3]
    check(f, shared, shared, graphs=None, breaks=None, backend=backend)


def test_store_out_of_range_caught(backend):
    def f(x, lst):
        lst.append(x + 1)
        try:
            lst[5] = x
        except IndexError as error:
            return x * len(lst), str(error)
    check(f, torch.ones(2), [], graphs=None, breaks=None, backend=backend)


def test_extended_slice_of_another_length(backend):
    def f(x, lst):
        lst.append(x)
        lst[::2] = [x, x, x]
    check(f, torch.ones(2), [1, 2], graphs=None, breaks=None, backend=backend)


def test_delete_a_missing_key(backend):
    def f(x, d):
        d[1] = x + 1
        try:
            del d[3]
        except KeyError as error:
            return x, str(error)
    check(f, torch.ones(2), {}, graphs=None, breaks=None, backend=backend)


def test_delete_a_missing_key_uncaught(backend):
    def f(x, d):
        d[1] = x + 1
        del d[(3, "k")]
    check(f, torch.ones(2), {}, graphs=None, breaks=None, backend=backend)
