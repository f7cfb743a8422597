"""In-place writes through a view that reads another view of the same memory, over symbolic
sizes (found under `JIT_DYNAMIC_BY_DEFAULT=1`: tests/repros/test_overlapping_writes.py and
test_in_place_partial_overlap.py). `x[:, 0] += x[:, 1]` of an (s0, s1) `x` reads and writes
columns that share no element for every size (strides multiples of s1, offsets 0 and 1 < s1):
the front end broke the graph there (its element check wanted concrete sizes) and inductor
compiled the views passed separately per size (`unsupported`). Both now prove such views
apart without a guard (dynamo/trace/graph.py `_apart_by_residue`,
inductor/symbolic_overlap.py `apart_by_residue`): one graph, generated code. Writes whose
views share elements still run as eager does (eager's values, or eager's error).
Compared with eager on both backends, `dynamic=True` and the default after a size change.
"""
import pytest
import torch

import dynamo
from inductor.runtime import fallbacks


def columns_of_an_input(x):
    x[:, 0] += x[:, 1]
    x.add_(x)
    return x * 2


def columns_of_an_intermediate(x):
    t = x * 2
    t[:, 0] += t[:, 1]
    return t


def last_dim_of_a_batch(x):
    x[..., 0].mul_(x[..., 1])
    return x.sum(-1)


APART = [columns_of_an_input, columns_of_an_intermediate, last_dim_of_a_batch]


def rows_of_an_input(x):         # apart, but not by this proof: the write runs as eager does
    x[0] += x[1]
    return x


def columns_sharing_elements(x):
    t = x * 2
    t[:, :2] += t[:, 1:3]
    return t


def _shape(function, size):
    return (2, size, size) if function is last_dim_of_a_batch else (size, size)


def _calls(function, jitted, sizes):
    for size in sizes:
        shape = _shape(function, size)
        x = torch.arange(float(torch.Size(shape).numel())).reshape(shape) / 4
        expected_input, actual_input = x.clone(), x.clone()
        torch.testing.assert_close(jitted(actual_input), function(expected_input))
        torch.testing.assert_close(actual_input, expected_input)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("dynamic", [True, None])
@pytest.mark.parametrize("function", APART)
def test_writes_apart_compute_as_eager_in_generated_code(function, dynamic, backend):
    before = dict(fallbacks.fallbacks())
    _calls(function, dynamo.jit(function, backend=backend, dynamic=dynamic), (4, 5, 6))
    assert fallbacks.fallbacks() == before


@pytest.mark.parametrize("function", APART)
def test_writes_apart_stay_in_one_graph(function):
    report = dynamo.explain(function, dynamic=True)(torch.ones(_shape(function, 4)))
    assert (report.graph_count, report.graph_break_count) == (1, 0)


@pytest.mark.expect_fallback("unsupported", "per_size", reason="views not proven apart: the "
                             "write runs as eager's kernels run it")
@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("function", [rows_of_an_input, columns_sharing_elements])
def test_other_writes_compute_as_eager(function, backend):
    _calls(function, dynamo.jit(function, backend=backend, dynamic=True), (4, 5))
