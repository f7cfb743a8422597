"""Stage-level tests: index expressions, reshape index maps, the IR printer and verifier, and
the scheduler's decisions (fusion, loop merging, values kept in registers)."""
import itertools

import pytest
import sympy
import torch
import torch.fx

from inductor.decompose import trace_aten
from inductor.ir.nodes import ComputedBuffer, Pointwise
from inductor.ir.ops import ops
from inductor.ir.printer import format_graph
from inductor.ir.symbols import (FloorDiv, ModularIndexing, index_symbol, simplify_index,
                                 upper_bound)
from inductor.ir.verifier import IRVerificationError, verify_graph, verify_plan
from inductor.lower import lower
from inductor.lower.views import reshape_indexer
from inductor.schedule.plans import KernelPlan
from inductor.schedule.scheduler import schedule

i0, i1 = index_symbol("i", 0), index_symbol("i", 1)


def test_division_and_modulo_fold_back_into_the_index():
    ranges = {i0: sympy.Integer(24)}
    assert simplify_index(3 * FloorDiv(i0, 3) + ModularIndexing(i0, 1, 3), ranges) == i0
    assert simplify_index(12 * FloorDiv(i0, 12) + 4 * ModularIndexing(i0, 4, 3) +
                          ModularIndexing(i0, 1, 4), ranges) == i0
    assert simplify_index(ModularIndexing(i0, 1, 32), ranges) == i0
    assert simplify_index(FloorDiv(i0, 32), ranges) == 0
    assert FloorDiv(6 * i0 + i1 + 2, 3) == 2 * i0 + FloorDiv(i1 + 2, 3)
    assert ModularIndexing(12544 * i0 + i1, 112, 112) == ModularIndexing(i1, 112, 112)
    assert upper_bound(3 * i0 + i1, {i0: sympy.Integer(4), i1: sympy.Integer(3)}) == 12


def test_negative_remainders_are_not_split():
    """(3*i0 - 1) % 3 must not become (-1) % 3, which C would print as -1."""
    assert isinstance(ModularIndexing(3 * i0 - 1, 1, 3).args[0], sympy.Add)


@pytest.mark.parametrize("old,new", [((2, 3, 4), (6, 4)), ((6, 4), (2, 12)), ((24,), (2, 3, 4)),
                                     ((2, 1, 6), (3, 4)), ((4, 6), (3, 8)), ((5,), (1, 5, 1))])
def test_reshape_index_maps_agree_with_torch(old, new):
    reindex = reshape_indexer(old, new)
    symbols = [index_symbol("i", n) for n in range(len(new))]
    expressions = reindex(symbols)
    reference = torch.arange(torch.Size(old).numel()).reshape(old)
    reshaped = reference.reshape(new)
    for position in itertools.product(*(range(extent) for extent in new)):
        values = {symbol: value for symbol, value in zip(symbols, position)}
        source = tuple(int(sympy.sympify(expr).subs(values)) for expr in expressions)
        assert reference[source] == reshaped[position]


def _loop_graph(function, *inputs):
    aten_graph = trace_aten(torch.fx.symbolic_trace(function), list(inputs))
    return lower(aten_graph.module, aten_graph.fake_inputs, aten_graph.output_strides)


def test_printer_shows_layouts_bodies_and_outputs():
    text = format_graph(_loop_graph(lambda x: (x * 2).sum(1), torch.randn(3, 4)))
    assert "arg0 = input FixedLayout(cpu, float32, size=[3, 4], stride=[4, 1])" in text
    assert "Reduction sum over [3] x [4] at (i0, r0)" in text
    assert "load(arg0, 4*i0 + r0)" in text and "mul(" in text
    assert text.splitlines()[-1] == "return (buf0)"


def test_verifier_rejects_reads_of_unknown_buffers():
    graph = _loop_graph(lambda x: x + 1, torch.randn(3))
    broken = graph.buffers[0]
    assert isinstance(broken, ComputedBuffer)
    broken.data = Pointwise(broken.data.device, torch.float32,
                            lambda index: ops.load("nowhere", index[0]), broken.data.ranges)
    with pytest.raises(IRVerificationError, match="reads nowhere"):
        verify_graph(graph)


def _plan(function, *inputs):
    plan = schedule(_loop_graph(function, *inputs))
    verify_plan(plan)
    return plan


def test_pointwise_chain_is_one_flat_loop():
    plan = _plan(lambda x, y: ((x * 2 + y).relu() - 1).sigmoid(), torch.randn(2, 3, 4, 5),
                 torch.randn(2, 3, 4, 5))
    (kernel,) = plan.kernels()
    assert kernel.outer_sizes == [120] and kernel.inner_sizes == []


def test_reversed_read_of_a_realized_buffer_is_not_fused():
    def function(a, b, c, d, e):
        y = a * b + c * d + e            # five loads, two readers: realized on reuse
        return y.flip(1) + y.sum(1, keepdim=True)
    plan = _plan(function, *(torch.randn(8, 8) for _ in range(5)))
    assert len(plan.kernels()) == 2  # y (with its row sums), then the reversed read


def test_reductions_over_different_dimensions_do_not_share_a_kernel():
    """Both read x, but along different axes: fused, one of them would read strided."""
    plan = _plan(lambda x: (x.sum(0), x.sum(1)), torch.randn(64, 64))
    assert len(plan.kernels()) == 2


def test_sibling_reductions_share_one_pass():
    plan = _plan(lambda x: torch.var_mean(x, 1), torch.randn(16, 300))
    (kernel,) = plan.kernels()
    reductions = [stage for stage in kernel.stages if stage.kind == "reduction"]
    assert len(reductions) == 1 and len(reductions[0].members) == 2


def test_softmax_keeps_row_statistics_in_registers():
    plan = _plan(lambda x: torch.softmax(x, -1), torch.randn(16, 300))
    (kernel,) = plan.kernels()
    stored = [member.name for member in kernel.members() if member.store]
    assert len(stored) == 1 and len(plan.allocated) == 1


def test_in_place_update_of_an_input_writes_it_directly():
    def function(x, counter):
        counter.add_(1)
        return x * 2
    plan = _plan(function, torch.randn(4), torch.zeros(4))
    written = {name for kernel in plan.kernels() for name in kernel.stores}
    assert "arg1" in written


def test_extern_between_kernels_splits_them_and_frees_at_last_use():
    plan = _plan(lambda x, w: (torch.relu(x * 2) @ w).exp(), torch.randn(8, 8),
                 torch.randn(8, 8))
    kinds = [type(step).__name__ for step in plan.steps]
    assert kinds == ["KernelPlan", "ExternStep", "KernelPlan"]
    assert isinstance(plan.steps[0], KernelPlan)
    assert any("buf0" in names for names in plan.frees.values())


def test_modulo_of_a_quotient_is_one_modulo():
    x = index_symbol("x", 0)
    assert ModularIndexing(FloorDiv(x, 128), 1, 16) == ModularIndexing(x, 128, 16)
    index = (2048 * FloorDiv(FloorDiv(x, 128), 16) + 128 * ModularIndexing(FloorDiv(x, 128), 1, 16)
             + ModularIndexing(x, 1, 128))
    assert simplify_index(index, {x: sympy.Integer(4096)}) == x


def test_small_remainders_drop_out_of_divisions():
    """A flat index over a view, `(64*i0 + i1) // 1024` with `i1 < 64`, is `i0 // 16`: the
    read-back of a stored value through the view matches the store's own index."""
    ranges = {i0: sympy.Integer(2048), i1: sympy.Integer(64)}
    view = i1 + 1024 * FloorDiv(64 * i0 + i1, 1024) + 64 * ModularIndexing(64 * i0 + i1, 64, 16)
    assert simplify_index(sympy.expand(view), ranges) == 64 * i0 + i1
    wider = {i0: sympy.Integer(2048), i1: sympy.Integer(65)}   # i1 may reach 64: kept
    assert simplify_index(FloorDiv(64 * i0 + i1, 1024), wider) == FloorDiv(64 * i0 + i1, 1024)
