"""A pointwise kernel whose body tests positions along the innermost loop (a `cat` along the
last dimension, `F.pad`) runs that loop in segments, one per outcome of the tests
(codegen/cpp/segments.py): each loop reads one input, with no masked loads and no select
per element. Was: every element tested its position against each input's range and loaded
each input under a mask (op sweep timing, cat along dim 1 of two 1024x1024: 0.9-1.3 ms
against eager's 0.46-0.76).

Values are compared with eager bit for bit (NaN, infinities, -0.0 included): inputs of
several widths (one and zero columns), promoted dtypes, bfloat16, a transposed input, fused
readers (exp, flip: a decreasing index), pads that crop, gathers under a piece (an index
out of range still raises), several threads; each both split (every row length allowed) and
as the kernel is built by default (rows of up to SPLIT_ABOVE elements stay whole). The
generated C++ is read for the structure, and the segment arithmetic is checked against every
position.
"""
import itertools

import pytest
import torch
import torch.nn.functional as F

import inductor
from inductor.codegen.cpp import segments
from inductor.codegen.cpp.segments import Segment, SegmentFacts, innermost_segments
from tests.inductor.conftest import compile_function
from tests.inductor.test_cpp_hoisted_index import _innermost_loops


def _values(rows, columns, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(rows, columns, generator=generator) * 100
    flat = values.view(-1)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0])
    flat[:min(flat.numel(), 5)] = specials[:min(flat.numel(), 5)]
    return values.to(dtype)


def _bits(tensor):
    if tensor.dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        widths = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        return tensor.contiguous().view(widths[tensor.element_size()])
    return tensor


def _same_bits(function, *inputs):
    compiled = compile_function(function, *inputs)
    expected, actual = function(*inputs), compiled(*inputs)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(_bits(actual), _bits(expected)), (actual, expected)
    return compiled


def _kernels(compiled) -> str:
    return compiled.report.source.split("call.with_argument_list")[-1]


def cat_last(x, y):
    return torch.cat([x, y], 1)


@pytest.fixture(params=["split", "default"])
def split(request, monkeypatch):
    if request.param == "split":
        monkeypatch.setattr(segments, "SPLIT_ABOVE", 1)
    return request.param


def test_a_cat_along_the_last_dim_reads_one_input_per_loop():
    compiled = _same_bits(cat_last, _values(33, 150), _values(33, 90, seed=1))
    loops = _innermost_loops(_kernels(compiled))
    assert len(loops) == 2, loops
    assert "x1 = 0; x1 < 150;" in loops[0] and "x1 = 150; x1 < 240;" in loops[1], loops
    for body in loops:
        assert "?" not in body, body          # no masked load, no select per element
        assert body.count("p0[") + body.count("p1[") == 1, body


def test_a_one_dimensional_cat_reads_one_input_per_loop():
    compiled = _same_bits(lambda x, y: torch.cat([x, y]), _values(1, 1000)[0],
                          _values(1, 500, 1)[0])
    loops = _innermost_loops(_kernels(compiled))
    assert len(loops) == 2 and not any("?" in body for body in loops), loops


def test_short_rows_stay_whole():
    compiled = _same_bits(cat_last, _values(33, 64), _values(33, 64, seed=1))
    assert len(_innermost_loops(_kernels(compiled))) == 1


CASES = {
    "two widths": (cat_last, lambda: (_values(9, 37), _values(9, 64, 1))),
    "one and zero columns": (lambda x, y, z: torch.cat([x, y, z, x], 1),
                             lambda: (_values(7, 1), _values(7, 0, 1), _values(7, 19, 2))),
    "promoted dtypes": (lambda x, i, b: torch.cat([x, i, b], 1),
                        lambda: (_values(6, 11), torch.arange(-30, 30).view(6, 10),
                                 torch.arange(18).view(6, 3) % 2 == 0)),
    "integers": (lambda a, b: torch.cat([a, b * 3], 1) + 1,
                 lambda: (torch.arange(40).view(4, 10), torch.arange(-12, 0).view(4, 3))),
    "bfloat16": (cat_last, lambda: (_values(5, 24, dtype=torch.bfloat16),
                                    _values(5, 9, 1, dtype=torch.bfloat16))),
    "transposed input": (lambda x, y: torch.cat([x.t(), y], 1),
                         lambda: (_values(30, 8), _values(8, 17, 1))),
    "three dims": (lambda x, y: torch.cat([x, y.exp()], 2),
                   lambda: (_values(3, 28).view(3, 4, 7), _values(3, 20, 1).view(3, 4, 5))),
    "middle dim": (lambda x, y: torch.cat([x, y], 1),
                   lambda: (_values(6, 28).view(2, 3, 28), _values(8, 28, 1).view(2, 4, 28))),
    "fused exp": (lambda x, y: torch.cat([x, y.sin()], 1).exp(),
                  lambda: (_values(6, 50), _values(6, 13, 1))),
    "flipped": (lambda x, y: torch.cat([x, y], 1).flip(1) * 2,
                lambda: (_values(4, 21), _values(4, 10, 1))),
    "pad": (lambda x: F.pad(x, (3, 2, 1, 1), value=1.5), lambda: (_values(6, 30),)),
    "pad that crops": (lambda x: F.pad(x, (-2, 3)) - 1, lambda: (_values(6, 30),)),
    "cat of a pad": (lambda x, y: torch.cat([F.pad(x, (2, 2)), y], 1),
                     lambda: (_values(5, 12), _values(5, 6, 1))),
    "1-D": (lambda x, y: torch.cat([x, y * 2]), lambda: (_values(1, 300)[0], _values(1, 77, 1)[0])),
    "1-D pad": (lambda x: F.pad(x, (3, 5)), lambda: (_values(1, 200)[0],)),
    "1-D broadcast scalar": (lambda x, y: torch.cat([x + y[0], y]),
                             lambda: (_values(1, 140)[0], _values(1, 9, 1)[0])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_values_match_eager_bit_for_bit(name, split):
    function, make = CASES[name]
    _same_bits(function, *make())


def gather_then_cat(table, index, other):
    return torch.cat([table[:, index], other], 1)   # negative indices wrap


def test_a_gather_under_a_piece_checks_its_indices(split):
    table, other = _values(6, 40), _values(6, 9, 1)
    index = torch.tensor([3, -1, 39, 0, 7])
    compiled = _same_bits(gather_then_cat, table, index, other)
    bad = torch.tensor([3, 40, 0, 0, 7])
    with pytest.raises(IndexError):
        gather_then_cat(table, bad, other)
    with pytest.raises(IndexError):
        compiled(table, bad, other)


def test_several_threads():
    saved = inductor.config.snapshot()
    inductor.config.update(threads=2, parallel_threshold=1)
    try:
        compiled = _same_bits(cat_last, _values(64, 148), _values(64, 80, 1))
        source = _kernels(compiled)
        assert "omp parallel" in source and len(_innermost_loops(source)) == 2, source
    finally:
        inductor.config.update(**saved)


@pytest.mark.parametrize("operation", ["lt", "le", "gt", "ge", "eq", "ne"])
def test_segments_decide_every_position(operation, monkeypatch):
    """Over each segment of its boundaries, `c * x + d <op> k` has the outcome the
    segment's intervals decide, at every x (coefficients of both signs)."""
    check = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
             "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}
    size = 23
    monkeypatch.setattr(segments, "SPLIT_ABOVE", 1)
    for coefficient, offset, bound in itertools.product((1, 2, 3, -1, -2), (-5, 0, 4),
                                                        (-3, 0, 7, 22, 40)):
        def boundaries(segment):
            facts = SegmentFacts(segment)
            facts.index("a", coefficient * _x() + offset)
            facts.constant("b", bound, torch.int64)
            facts.compare(operation, "a", "b")
            facts.constant("c", bound, torch.int64)
            facts.compare(operation, "c", "a")   # the constant on the left
            return facts.boundaries

        pieces = innermost_segments(boundaries, "x1", size) or [Segment("x1", 0, size)]
        assert pieces[0].start == 0 and pieces[-1].end == size
        for piece in pieces:
            facts = SegmentFacts(piece)
            facts.index("a", coefficient * _x() + offset)
            facts.constant("b", bound, torch.int64)
            left, right = facts.compare(operation, "a", "b"), facts.compare(operation, "b", "a")
            for x in range(piece.start, piece.end):
                value = coefficient * x + offset
                assert left == check[operation](value, bound), (coefficient, offset, bound, x)
                assert right == check[operation](bound, value), (coefficient, offset, bound, x)


def _x():
    import sympy
    return sympy.Symbol("x1", integer=True, nonnegative=True)
