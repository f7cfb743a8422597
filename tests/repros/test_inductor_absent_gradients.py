"""A compiled backward where some outputs' gradients never arrive (program fuzzer P23, P24:
inductor seeds 306, 310, 689, 1133, 1144, 2154, 2459, 3795, 5033, 5455, 6016, 6352, 6654,
6887, 7471).

Eager's backward never runs a node that no arriving gradient reaches. The compiled backward
took zeros for the missing gradients and computed every path: it read saved values eager
never reads, so a saved input changed in place after the call raised framejit's
`ModifiedSavedInput` (or autograd's "modified by an inplace operation" when the backward
unpacked it), and a zero met what the forward made: `amax`'s backward of an output the graph
wrote after saving it divided 0 by 0, `std` of one element multiplied 0 by inf, and the
gradients came back NaN where eager's are finite. Each case runs eagerly and jitted and
compares the gradients or the exact error. Backends: `eager` (control), inductor with the
C++ and the Triton (interpreted on the CPU) code generators.
"""
import pytest
import torch

import dynamo
from tests.repros.conftest import values


def _outcome(fn, backend, make, after, calls=1):
    """Per call: the gradients of the leaves (None where unset), or the error's type and
    message."""
    function = fn if backend is None else dynamo.jit(fn, backend=backend)
    outcomes = []
    for call in range(calls):
        arguments, leaves = make()
        results = function(*arguments)
        try:
            after(call, arguments, results).backward()
        except RuntimeError as error:
            outcomes.append((type(error).__name__, str(error)))
            continue
        outcomes.append([None if leaf.grad is None else leaf.grad.clone() for leaf in leaves])
    return outcomes


def _assert_same(fn, backend, make, after, calls=1):
    expected = _outcome(fn, None, make, after, calls)
    actual = _outcome(fn, backend, make, after, calls)
    for got, want in zip(actual, expected):
        if isinstance(want, tuple):
            assert got == want
            continue
        assert isinstance(got, list), got
        assert [g is None for g in got] == [w is None for w in want]
        torch.testing.assert_close([g for g in got if g is not None],
                                   [w for w in want if w is not None], equal_nan=False)


def _x_and_w():
    x = values((2, 2), 1).requires_grad_()
    w = values((2, 2), 2).requires_grad_()
    return [x, w], [x, w]


def test_saved_input_changed_for_an_output_without_gradient(code_generator):
    # seeds 1133, 306, 310: `mm` saves w for `h` only; h gets no gradient, so eager's
    # backward never reads w and the write into it is legal (raised ModifiedSavedInput, or
    # autograd's error when the backward unpacked the saved w)
    def fn(x, w):
        return x.sin(), w @ x

    def after(call, arguments, results):
        with torch.no_grad():
            arguments[1].mul_(2)
        return results[0].sum()
    _assert_same(fn, code_generator, _x_and_w, after)


@pytest.mark.parametrize("through", [(0,), (0, 1)], ids=["t4", "t4_and_h"])
def test_saved_output_changed_for_an_output_without_gradient(code_generator, through):
    # seed 310 (P23): `t1 @ t4` saves t1, which the graph returns (it lives across a break
    # in the program) and the caller writes; h gets no gradient, so eager's backward never
    # reads t1 (through h too: eager's error, with eager's message)
    def fn(x, w):
        t1 = w @ w.T
        t4 = x.sin()
        return t4, t1 @ t4, t1

    def after(call, arguments, results):
        results[2][results[2] > 0] = 0.5
        return sum(results[position].sum() for position in through)
    _assert_same(fn, code_generator, _x_and_w, after)


def test_input_saved_for_one_output_not_read_for_another(code_generator):
    # seeds 1144, 2459: eager saves y for `mm` (t4's gradient) and the sum for `div` (t3's);
    # the partitioner saved y alone and recomputed the sum from it, so t3's gradient read y
    def fn(y, w):
        t3 = y.sum(0) / (w[..., 0].abs() + 1)
        return t3, y.matmul(w)

    def make():
        y = values((4, 3), 9)
        w = values((3, 3), 10).requires_grad_()
        return [y, w], [w]

    def after(call, arguments, results):
        arguments[0].mul_(2)
        return results[0].sum()
    _assert_same(fn, code_generator, make, after)


def test_graph_reached_without_any_gradient_reads_nothing(code_generator):
    # seed 2459: the second graph computes x * 0.5 (dead in the program, an output of the
    # graph), so its node links x's history, the first graph's, to the backward; no gradient
    # arrives there, but the backward read w through a `new_empty_strided` of the absent
    # tangent (which reads only its shape) and raised for the write into w
    def fn(x, w):
        x[1:2] = w.logsumexp(0, keepdim=True)
        print("break")
        with torch.no_grad():
            w.add_(w, alpha=-0.1)
        l1 = (w, w, w.clone())
        x = x * 0.5
        return l1

    def make():
        leaf = values((3, 2), 11).requires_grad_()
        return [values((3, 2), 12)[1:], leaf[1:]], [leaf]

    def after(call, arguments, results):
        return sum(result.sum() for result in results)
    _assert_same(fn, code_generator, make, after)


def test_written_output_without_gradient_gives_no_nan(code_generator):
    # seed 689 (P24): amax saves its result, which the graph then writes; eager's backward
    # of t5 never runs, the compiled one divided a zero gradient by a count of zero
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(values((2, 2), 5))
        lin.bias.copy_(values((2,), 6))

    def fn(a):
        t3 = lin(a)
        t5 = torch.stack([t3, t3]).amax(0)
        t5.add_(0.5)
        return t3, t5

    def make():
        lin.zero_grad(set_to_none=True)
        return [values((2, 2), 7)], [lin.weight, lin.bias]
    _assert_same(fn, code_generator, make, lambda call, arguments, results: results[0].sum())


def test_std_of_one_element_without_gradient_gives_no_nan(code_generator):
    # seed 2154 (P24): std over a dimension of one element is NaN, its backward multiplies
    # by inf; the output gets no gradient, eager's gradient of x is finite
    def fn(x):
        v = x.unsqueeze(0)
        return x.abs(), v.std(0)

    def make():
        x = values((3, 3), 8).requires_grad_()
        return [x], [x]
    with pytest.warns(UserWarning, match="degrees of freedom"):
        _assert_same(fn, code_generator, make, lambda call, arguments, results: results[0].sum())


def test_each_call_gets_the_gradients_that_arrive(code_generator):
    # one graph, backward through different outputs on each call: one backward per set
    def fn(x, w):
        y = x * w
        return y.exp(), (y * 3).sum(0), w.square()

    picks = [(0, 1, 2), (1,), (0, 2), (2,), (0,)]

    def after(call, arguments, results):
        return sum(results[position].sum() for position in picks[call])
    _assert_same(fn, code_generator, _x_and_w, after, calls=len(picks))


def test_eager_error_where_the_arriving_gradient_reads_the_input(code_generator):
    # the read that remains: h's gradient arrives, so eager's backward reads w and raises
    def fn(x, w):
        return x.sin(), w @ x

    def after(call, arguments, results):
        with torch.no_grad():
            arguments[1].mul_(2)
        return results[0].sum() + results[1].sum()
    _assert_same(fn, code_generator, _x_and_w, after)
