"""Outputs that alias inputs or each other in a graph compiled once over symbolic sizes (issue
23, the decode benchmark's KV-cache graphs): one compile, no `per_size` variant, and at every
size each output is what eager returns: values, dtype, shape, strides, storage offset, the
same storage as eager's (its `_base` the input, or the output eager's views), version
counters shared as eager's are; on the C++ backend and on Triton's (interpreted on CPU)."""
import copy

import torch

import inductor
from inductor.runtime import fallbacks
from tests.inductor.symbolic_graphs import shape_env_of, symbolic_graph

SIZES = (5, 2, 3, 7, 16, 97)


def _owner(value, inputs, outputs):
    """What eager's (or ours) `value` views: ("input", i), ("output", j) or None (fresh)."""
    base = value._base
    if base is None:
        return None
    for position, tensor in enumerate(inputs):
        if base is tensor:
            return ("input", position)
    for position, tensor in enumerate(outputs):
        if base is tensor:
            return ("output", position)
    return ("other", tuple(base.shape), base.stride(), base.storage_offset())


def check_every_size(function, make_inputs, dynamic, sizes=SIZES):
    """Compile once at `sizes[0]`, then compare every size with eager (see the module
    docstring); the compile must add no guard and make no variant or fallback."""
    first = make_inputs(sizes[0])
    before = fallbacks.fallbacks()
    gm = symbolic_graph(function, first, dynamic)
    guards = list(shape_env_of(gm).guards)
    compiled = inductor.compile_fx(gm, copy.deepcopy(first))
    assert list(shape_env_of(gm).guards) == guards
    for size in sizes:
        inputs = make_inputs(size)
        ours_in, eager_in = copy.deepcopy(inputs), copy.deepcopy(inputs)
        ours, eager = compiled(*ours_in), function(*eager_in)
        assert len(ours) == len(eager)
        for got, want in zip(ours, eager):
            torch.testing.assert_close(got, want)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.stride() == want.stride(), (size, got.stride(), want.stride())
            assert got.storage_offset() == want.storage_offset(), size
            assert _owner(got, ours_in, ours) == _owner(want, eager_in, eager), size
            assert got.requires_grad == want.requires_grad
        for got, want in zip(ours, eager):      # which outputs share memory and counters
            for got_other, want_other in zip(ours, eager):
                assert (got.untyped_storage()._cdata == got_other.untyped_storage()._cdata) \
                    == (want.untyped_storage()._cdata == want_other.untyped_storage()._cdata)
            for got_in, want_in in zip(ours_in, eager_in):
                assert (got.untyped_storage()._cdata == got_in.untyped_storage()._cdata) == \
                    (want.untyped_storage()._cdata == want_in.untyped_storage()._cdata)
        torch.testing.assert_close(ours_in, eager_in)
        def versions(inputs, outputs):
            return [tensor._version for tensor in list(inputs) + list(outputs)]
        assert versions(ours_in, ours) == versions(eager_in, eager), size
        with torch.no_grad():   # a write through each view reaches its base and counters
            for got, want in zip(ours, eager):
                got.add_(1)
                want.add_(1)
        assert versions(ours_in, ours) == versions(eager_in, eager), size
        torch.testing.assert_close(ours_in, eager_in)
    assert compiled.report.size_reason is None, compiled.report.size_reason
    assert compiled.report.size_variants == 0
    assert fallbacks.since(before) == {}
    return compiled


def test_views_of_an_input(code_generator):
    def function(x):
        return x[:, 1], x.t(), x[1], x[-1], x.view(-1), x.unsqueeze(0), x.sum(0) + 1
    check_every_size(function, lambda n: [torch.randn(n, 3)], [[0]])


def test_views_of_an_output_and_outputs_aliasing_each_other(code_generator):
    def function(x):
        y = x * 2
        return y, y[-1], y.t(), y.view(-1), y[:, 1:], x.transpose(0, 1)
    check_every_size(function, lambda n: [torch.randn(n, 4)], [[0]])


def test_views_of_an_intermediate_the_graph_does_not_return(code_generator):
    def function(x, y):
        product = x * y
        return product[:, 0], product[-1], product.t()
    check_every_size(function, lambda n: [torch.randn(n, 3), torch.randn(3)], [[0], []])


def test_a_growing_cache_read_back_through_views(code_generator):
    """The decode step's shape: a cache over a symbolic axis, computed, returned and viewed
    (heads split off by `view` + `transpose`, the last position read), and the input cache
    viewed the same way. (Growing it by `cat` along the symbolic axis is still compiled per
    size: lower/indexing.py `_in_range` needs an int size.)"""
    def function(cache, scale):
        grown = cache * scale
        heads = grown.view(2, grown.size(1), 2, 4).transpose(1, 2)
        return grown, heads, heads[:, :, -1], cache.view(2, cache.size(1), 2, 4)[:, -1]
    check_every_size(function, lambda n: [torch.randn(2, n, 8), torch.randn(8)], [[1], []])


def test_a_view_of_a_non_contiguous_input(code_generator):
    def function(x):
        return x.t()[1:], x[:, -1], x + 1
    check_every_size(function, lambda n: [torch.randn(4, n).t()], [[0]])


def test_the_input_itself_returned(code_generator):
    def function(x, y):
        return x, y.view(-1), x + y
    check_every_size(function, lambda n: [torch.randn(n, 2), torch.randn(n, 2)], [[0], [0]])
