"""Symbolic sizes in capture (dynamo/shapes, dynamo/variables/symbolic.py), on the eager
backend: how sizes become dynamic, what one graph serves, and that every fact the trace relied
on is guarded (a call violating it takes another entry, never the wrong graph)."""
import pytest
import torch

import dynamo


class Counting:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def _jit(fn, **kwargs):
    backend = Counting()
    return dynamo.jit(fn, backend=backend, **kwargs), backend


def _same(fn, jitted, *args):
    expected, actual = fn(*args), jitted(*args)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected)
        assert actual.shape == expected.shape and actual.stride() == expected.stride()
    else:
        assert actual == expected and type(actual) is type(expected)


def _pointwise(x):
    return (x * 2).relu().sum(-1)


@pytest.mark.parametrize("sizes", [(2, 3, 5, 8, 64, 255), (7, 2, 97, 3)])
def test_dynamic_true_one_graph_for_every_size(sizes):
    jitted, backend = _jit(_pointwise, dynamic=True)
    for size in sizes:
        _same(_pointwise, jitted, torch.randn(size, 4))
    assert len(backend.graphs) == 1


@pytest.mark.static_shapes(reason="counts automatic dynamic's compiles")
def test_automatic_dynamic_compiles_twice_for_a_sweep():
    jitted, backend = _jit(_pointwise)
    for size in range(2, 40, 3):
        _same(_pointwise, jitted, torch.randn(size, 4))
    assert len(backend.graphs) == 2
    again = len(backend.graphs)
    _same(_pointwise, jitted, torch.randn(2, 4))   # the first size keeps its static entry
    assert len(backend.graphs) == again


@pytest.mark.static_shapes(reason="automatic dynamic's counts, a static size in a guard")
def test_automatic_dynamic_only_makes_the_changed_dimension_symbolic():
    jitted, backend = _jit(_pointwise)
    for size in (3, 4, 5):
        _same(_pointwise, jitted, torch.randn(size, 6))
    _same(_pointwise, jitted, torch.randn(5, 7))      # the other dimension: a recompile
    assert len(backend.graphs) == 3
    guards = [record.guards for record in jitted._framejit_driver.records]
    assert any("size=[*, 6]" in line for line in guards[1])


def test_dynamic_false_specialises_every_size():
    jitted, backend = _jit(_pointwise, dynamic=False)
    for size in (2, 3, 4):
        _same(_pointwise, jitted, torch.randn(size, 4))
    assert len(backend.graphs) == 3


def test_sizes_zero_and_one_specialise():
    jitted, backend = _jit(_pointwise, dynamic=True)
    for size in (5, 1, 0, 6, 1):
        _same(_pointwise, jitted, torch.randn(size, 4))
    assert len(backend.graphs) == 3


def test_mark_dynamic_and_mark_static():
    jitted, backend = _jit(_pointwise, dynamic=False)
    first = torch.randn(4, 3)
    dynamo.mark_dynamic(first, 0)
    _same(_pointwise, jitted, first)
    _same(_pointwise, jitted, torch.randn(9, 3))
    assert len(backend.graphs) == 1
    jitted, backend = _jit(_pointwise, dynamic=True)
    pinned = torch.randn(4, 3)
    dynamo.mark_static(pinned, 0)
    _same(_pointwise, jitted, pinned)
    _same(_pointwise, jitted, torch.randn(9, 3))
    assert len(backend.graphs) == 2


def test_mark_dynamic_bounds_are_guarded():
    jitted, backend = _jit(_pointwise, dynamic=False)
    first = torch.randn(4, 3)
    dynamo.mark_dynamic(first, 0, min=3, max=10)
    _same(_pointwise, jitted, first)
    _same(_pointwise, jitted, torch.randn(10, 3))
    assert len(backend.graphs) == 1
    _same(_pointwise, jitted, torch.randn(11, 3))
    assert len(backend.graphs) == 2


def test_mark_dynamic_rejects_bad_dimensions():
    with pytest.raises(IndexError, match="out of range"):
        dynamo.mark_dynamic(torch.ones(2, 2), 2)
    with pytest.raises(ValueError, match="min=5 is larger than max=3"):
        dynamo.mark_dynamic(torch.ones(4), 0, min=5, max=3)


def _branch(x):
    if x.size(0) > 4:
        return x.sum(0)
    return x.mean(0)


def test_a_branch_on_a_size_is_guarded_both_ways():
    jitted, backend = _jit(_branch, dynamic=True)
    for size in (6, 9, 3, 2, 5, 4, 12):
        _same(_branch, jitted, torch.randn(size, 3))
    assert len(backend.graphs) == 2


def _add(x, y):
    return x + y


def test_a_learned_equality_is_guarded():
    jitted, backend = _jit(_add, dynamic=True)
    _same(_add, jitted, torch.randn(5, 3), torch.randn(5, 3))
    _same(_add, jitted, torch.randn(8, 3), torch.randn(8, 3))
    assert len(backend.graphs) == 1
    _same(_add, jitted, torch.randn(8, 3), torch.randn(1, 3))   # broadcasts: another entry
    with pytest.raises(RuntimeError):
        jitted(torch.randn(8, 3), torch.randn(7, 3))               # eager's error


def _computed_view(x):
    batch, rest = x.shape[0], x.shape[-1] // 2
    y = x.reshape(batch, 2, rest) * torch.arange(x.size(0)).view(-1, 1, 1)
    return y.view(batch * 2, -1).sum(1), x.numel(), len(x)


def test_computed_sizes_stay_in_the_graph():
    jitted, backend = _jit(_computed_view, dynamic=True)
    for size in (3, 4, 17):
        expected, actual = _computed_view(torch.ones(size, 6)), jitted(torch.ones(size, 6))
        torch.testing.assert_close(actual[0], expected[0])
        assert actual[1:] == expected[1:]
    assert len(backend.graphs) == 1


def _loop(x):
    total = x[0]
    for index in range(1, x.size(0)):
        total = total + x[index]
    return total


def test_a_size_used_as_a_python_int_specialises():
    jitted, backend = _jit(_loop, dynamic=True)
    for size in (3, 4, 3):
        _same(_loop, jitted, torch.randn(size, 2))
    assert len(backend.graphs) == 2


def _with_position(cache, new, position):
    cache = torch.cat([cache, new], dim=1)
    return cache, cache[:, :position + 1].sum(1)


def test_int_arguments_become_symbolic_when_they_change():
    jitted, backend = _jit(_with_position)
    cache = torch.zeros(2, 1, 4)
    for position in range(1, 12):
        new = torch.randn(2, 1, 4)
        expected = _with_position(cache, new, position)
        actual = jitted(cache, new, position)
        for a, b in zip(actual, expected):
            torch.testing.assert_close(a, b)
        cache = expected[0]
    assert len(backend.graphs) <= 3


def _printing(x):
    n = x.size(0) * 2
    print("rows", n)
    return x.sum() + n


def test_symbolic_values_across_a_graph_break(capsys):
    jitted, backend = _jit(_printing, dynamic=True)
    for size in (3, 5, 8):
        _same(_printing, jitted, torch.ones(size))
    out = capsys.readouterr().out
    assert out == "".join(f"rows {2 * size}\n" * 2 for size in (3, 5, 8))
    assert len(backend.graphs) <= 2


def test_recompile_reason_names_the_relation():
    jitted, _ = _jit(_branch, dynamic=True)
    jitted(torch.randn(6, 3))
    jitted(torch.randn(3, 3))
    reason = jitted._framejit_driver.records[-1].reason
    assert "L['x'].size()[0]" in reason and "does not hold" in reason, reason


def test_explain_lists_the_shape_guard():
    report = dynamo.explain(_branch, dynamic=True)(torch.randn(6, 3))
    guards = "\n".join(report.guards[0])
    assert "shapes: " in guards and "L['x'].size()[0] > 4" in guards, guards
    assert "size=[*, *]" in guards
