"""Program fuzzer, inductor seed 24483: a training graph whose backward recomputes a value from
an input the graph writes (`x[x > 0] = -1`, then `x.amin(-1)` read by a gradient) raised
`AssertionError: the backward needs inputs that were not saved: ['primals_2']` at compile time
(partition.build_backward). The minimum cut severed the input's `unsafe` edge (UNWATCHED_COST,
2**40: cheaper than saving a mutated input, MUTATED_COST 2**50), and choose_saved read a cut
edge `in -> unsafe` as "not saved"."""
import torch

import dynamo
from tests.repros.conftest import values


def _program(t0, x, w, out):
    t1 = t0 + 1.0
    p = torch.full_like(x, 0.5) * (t1 @ w.T)
    out.append(p)
    x[x > 0] = -1.0
    t1 *= p
    t3 = x.amin(-1).mul(t1[:, -2])
    out.append(t3)
    return t1, x, (t3 @ x) * 0.5


def _run(fn):
    args = (values((2, 3), 1), values((2, 3), 300), values((3, 3), 308).requires_grad_(), [])
    result = fn(*args)
    try:
        (result[0].sum() + result[2].sum() * 2 + args[3][0].sum() * 3).backward()
        backward = args[2].grad
    except RuntimeError as error:    # eager: t1 was saved by the product, then written
        backward = type(error), str(error).split(":")[0]
    return result, args, backward


def test_written_input_read_by_a_gradient(code_generator):
    expected, expected_args, expected_backward = _run(_program)
    actual, actual_args, actual_backward = _run(dynamo.jit(_program, backend=code_generator))
    for a, e in zip(list(actual) + actual_args[3], list(expected) + expected_args[3]):
        torch.testing.assert_close(a, e, rtol=0, atol=0)
    torch.testing.assert_close(actual_args[1], expected_args[1], rtol=0, atol=0)
    assert actual_backward == expected_backward
