"""Soundness of what tracing learns about symbolic sizes (issue 23): a relation learned while
tracing (`x.size(0) > 4`, `x.size(0) == y.size(0)`, `x.size(0) % 2 == 0`, a size used as a
Python int) and violated by a later call makes that call recompile or take another entry and
return eager's answer, never run the wrong graph; unchanged inputs never recompile;
`mark_static`, `dynamic=False` and the 0/1 rule keep sizes static; guards and recompile logs
print relations in the user's terms (`L['x'].size()[0]`, `x.size(0)`).

Each case runs eager and jitted with the same arguments (`dynamic_programs.outcome`) on both
backends.
"""
import logging
import re

import pytest
import torch

import dynamo
from dynamic_programs import BACKENDS as BACKEND_NAMES
from dynamic_programs import assert_same_outcome, counting_backend, outcome

BACKENDS = pytest.mark.parametrize("backend", BACKEND_NAMES)
pytestmark = pytest.mark.filterwarnings("ignore:dynamo.jit\\(dynamic=True\\):UserWarning")


def jit(function, backend, dynamic=True):
    dynamo.reset()
    counting = counting_backend(backend)
    return dynamo.jit(function, backend=counting, dynamic=dynamic), counting


def tensors(*shapes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=generator) for shape in shapes)


def check_calls(function, jitted, calls) -> None:
    """Each call's arguments (shapes) eagerly and jitted: the same outcome."""
    for index, shapes in enumerate(calls):
        expected = outcome(function, tensors(*shapes, seed=index))
        actual = outcome(jitted, tensors(*shapes, seed=index))
        assert_same_outcome(expected, actual, f"call {index} with shapes {shapes}")


# -- relations learned while tracing ------------------------------------------------------------
def greater_than(x):
    if x.size(0) > 4:
        return x * 2
    return x - 1


def equal_sizes(x, y):
    if x.size(0) == y.size(0):
        return x + y
    return x.sum(0) - y.sum(0)


def broadcast_add(x, y):
    return x + y  # learns x.size(0) == y.size(0) (or a broadcast of size 1)


def even(x):
    if x.size(0) % 2 == 0:
        return x.view(2, -1, x.size(1)).sum(0)
    return x[1:]


def halves(x):
    return x[: x.size(0) // 2] * x[x.size(0) // 2:][: x.size(0) // 2]


def python_int(x):
    total = 0
    for index in range(x.size(0)):
        total += index
    return x * total, [1.5] * (x.size(0) % 3), x.size(0) * 0.5


RELATIONS = {
    "greater_than": (greater_than, [[(7, 3)], [(9, 3)], [(3, 3)], [(5, 3)], [(4, 3)]]),
    "equal_sizes": (equal_sizes, [[(5, 3), (5, 3)], [(6, 3), (6, 3)], [(5, 3), (7, 3)],
                                  [(8, 3), (8, 3)]]),
    "broadcast_add": (broadcast_add, [[(5, 3), (5, 3)], [(7, 3), (7, 3)], [(7, 3), (1, 3)],
                                      [(5, 3), (3, 3)], [(1, 3), (6, 3)], [(9, 3), (9, 3)]]),
    "even": (even, [[(6, 2)], [(8, 2)], [(7, 2)], [(10, 2)], [(3, 2)]]),
    "halves": (halves, [[(6, 2)], [(9, 2)], [(7, 2)], [(2, 2)], [(11, 2)]]),
    "python_int": (python_int, [[(4, 2)], [(5, 2)], [(4, 2)], [(7, 2)], [(13, 2)]]),
}


@BACKENDS
@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("case", sorted(RELATIONS))
def test_a_violated_relation_never_runs_the_wrong_graph(case, dynamic, backend):
    function, calls = RELATIONS[case]
    jitted, _ = jit(function, backend, dynamic)
    check_calls(function, jitted, calls)


@BACKENDS
@pytest.mark.parametrize("case", sorted(RELATIONS))
def test_unchanged_inputs_never_recompile(case, backend):
    function, calls = RELATIONS[case]
    jitted, counting = jit(function, backend)
    check_calls(function, jitted, calls)
    compiled = counting.frame_count
    check_calls(function, jitted, calls)
    assert counting.frame_count == compiled


@BACKENDS
def test_sizes_within_a_learned_relation_share_one_entry(backend):
    """`x.size(0) > 4` learned at size 7: sizes 9, 13 and 100 satisfy it: no recompile."""
    jitted, counting = jit(greater_than, backend)
    check_calls(greater_than, jitted, [[(7, 3)], [(9, 3)], [(13, 3)], [(100, 3)]])
    assert counting.frame_count == 1


def test_an_equality_learned_between_two_sizes_serves_every_equal_pair():
    jitted, counting = jit(broadcast_add, "eager")
    check_calls(broadcast_add, jitted, [[(n, 3), (n, 3)] for n in (5, 7, 11, 64)])
    assert counting.frame_count == 1


def test_divisibility_learned_serves_every_even_size():
    jitted, counting = jit(even, "eager")
    check_calls(even, jitted, [[(n, 2)] for n in (6, 8, 10, 100)])
    assert counting.frame_count == 1
    check_calls(even, jitted, [[(7, 2)]])  # odd: the relation fails, another entry
    assert counting.frame_count == 2


# -- what stays static --------------------------------------------------------------------------
def scale(x):
    return x * 2 + 1


@BACKENDS
def test_dynamic_false_compiles_one_entry_per_size(backend):
    jitted, counting = jit(scale, backend, dynamic=False)
    sizes = [3, 5, 3, 7, 5]
    check_calls(scale, jitted, [[(n, 2)] for n in sizes])
    assert counting.frame_count == len(set(sizes))


def test_sizes_0_and_1_specialise_apart_from_the_others():
    """torch's 0/1 rule: sizes 0 and 1 each get an entry; the other sizes share one."""
    jitted, counting = jit(scale, "eager")
    check_calls(scale, jitted, [[(5, 2)], [(1, 2)], [(0, 2)], [(1, 2)], [(0, 2)]])
    assert counting.frame_count == 3


def test_sizes_0_and_1_specialise_and_the_rest_share_one_entry():
    jitted, counting = jit(scale, "eager")
    check_calls(scale, jitted, [[(5, 2)], [(1, 2)], [(7, 2)], [(0, 2)], [(13, 2)]])
    assert counting.frame_count == 3


def test_mark_static_keeps_a_dimension_static_under_dynamic_true():
    jitted, counting = jit(scale, "eager")
    for index, n in enumerate([5, 7, 5]):
        expected = outcome(scale, tensors((n, 2), seed=index))
        arguments = tensors((n, 2), seed=index)
        dynamo.mark_static(arguments[0], 0)
        assert_same_outcome(expected, outcome(jitted, arguments), f"n={n}")
    assert counting.frame_count == 2


@BACKENDS
def test_mark_dynamic_makes_one_entry_serve_every_size(backend):
    jitted, counting = jit(scale, backend, dynamic=None)
    for index, n in enumerate([5, 7, 11, 64]):
        expected = outcome(scale, tensors((n, 2), seed=index))
        arguments = tensors((n, 2), seed=index)
        dynamo.mark_dynamic(arguments[0], 0, min=2, max=1024)
        assert_same_outcome(expected, outcome(jitted, arguments), f"n={n}")
    assert counting.frame_count == 1


def test_automatic_dynamic_recompiles_once_then_serves_every_size():
    jitted, counting = jit(scale, "eager", dynamic=None)
    check_calls(scale, jitted, [[(n, 2)] for n in (5, 7, 11, 97, 1000)])
    assert counting.frame_count == 2


# -- readable relations -------------------------------------------------------------------------
SIZE_SOURCES = ("L['x'].size()[0]", "x.size(0)", "L['x'].shape[0]", "x.shape[0]")
INTERNAL_SYMBOL = re.compile(r"\b[su]\d+\b")  # sympy names (s0, u1) leaking into the text


def relation_lines(texts) -> list:
    return [text for text in texts if any(source in text for source in SIZE_SOURCES)
            and re.search(r"[<>]=?|==|!=|%", text)]


def test_explain_prints_the_learned_relation_in_the_users_terms():
    report = dynamo.explain(greater_than, dynamic=True)(torch.ones(7, 3))
    lines = relation_lines(str(guard) for guard in report.guards)
    assert any("4" in line or "5" in line for line in lines), report.guards
    assert not any(INTERNAL_SYMBOL.search(line) for line in lines), lines


def test_recompile_log_names_the_violated_relation(caplog):
    jitted, _ = jit(greater_than, "eager")
    with caplog.at_level(logging.DEBUG, logger="framejit.recompiles"):
        check_calls(greater_than, jitted, [[(7, 3)], [(3, 3)]])
    messages = [record.getMessage() for record in caplog.records]
    lines = relation_lines(messages)
    reasons = [line.split("): ", 1)[-1] for line in lines]   # not the file path ("/tmp/s37")
    assert reasons and not any(INTERNAL_SYMBOL.search(reason) for reason in reasons), messages


def test_recompile_log_names_the_size_that_changed(caplog):
    """Today's specialised guards already name the user's source of the size."""
    jitted, _ = jit(scale, "eager", dynamic=False)
    with caplog.at_level(logging.DEBUG, logger="framejit.recompiles"):
        check_calls(scale, jitted, [[(7, 3)], [(3, 3)]])
    messages = [record.getMessage() for record in caplog.records]
    assert any("L['x'].size()[0]" in message for message in messages), messages


# -- the check itself can fail ------------------------------------------------------------------
def wrong_for_size_three(gm, example_inputs):
    """A backend that is wrong for inputs of size 3 only (a stale specialisation's shape)."""
    def run(*args):
        result = gm(*args)
        if args and isinstance(args[0], torch.Tensor) and args[0].shape[:1] == (3,):
            return type(result)(value + 1 for value in result) \
                if isinstance(result, (tuple, list)) else result + 1
        return result
    return run


def test_the_differential_check_catches_a_graph_wrong_at_one_size():
    dynamo.reset()
    jitted = dynamo.jit(scale, backend=wrong_for_size_three)
    check_calls(scale, jitted, [[(5, 2)], [(7, 2)]])
    with pytest.raises(AssertionError, match="call 1"):
        check_calls(scale, jitted, [[(5, 2)], [(3, 2)]])
