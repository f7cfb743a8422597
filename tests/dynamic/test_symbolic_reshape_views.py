"""Reshapes that merge symbolic dims are views, as with static sizes (found under
`JIT_DYNAMIC_BY_DEFAULT=1`: tests/inductor/test_embedding_gradient.py's tied-embedding backward
copied the (s0, s1, 997) logits' gradient twice before its two matmuls). `(s0, s1, 997) ->
(s0*s1, 997)` was one block of dims (`inductor/lower/views.py`), read as `(997*x0 + x1) //
(997*s1)` and `% s1`, and `997*s1*(x0 // s1) + 997*(x0 % s1)` did not fold back into `997*x0`
(`inductor/ir/symbols._fold_div_mod` compared integer coefficients only): the matmul's operand
was not a strided view of the input, so a copy kernel ran. Now dims pair into blocks whose
products are the same expression, and the fold takes size-expression multiples: the operands
are the input's memory (`as_strided`/`view` in the wrapper, no copy kernel). Values, strides
and the generated code compared with eager and with the static compile."""
import sympy
import torch

import inductor
from inductor.ir.symbols import FloorDiv, ModularIndexing, simplify_index
from inductor.lower.views import reshape_indexer
from tests.inductor.symbolic_graphs import symbolic_graph


def test_merge_of_symbolic_dims_pairs_blocks():
    s0, s1 = sympy.symbols("s0 s1", positive=True, integer=True)
    x0, x1 = sympy.symbols("x0 x1", nonnegative=True, integer=True)
    old = reshape_indexer([s0, s1, 997], [s0 * s1, 997])([x0, x1])
    assert old == [FloorDiv(x0, s1), ModularIndexing(x0, 1, s1), x1]
    split = reshape_indexer([s0 * s1, 997], [s0, s1, 997])([x0, x1, sympy.Symbol("x2")])
    assert split[1] == sympy.Symbol("x2")


def test_multiple_of_a_size_folds():
    s1 = sympy.Symbol("s1", positive=True, integer=True)
    x0 = sympy.Symbol("x0", nonnegative=True, integer=True)
    index = 997 * s1 * FloorDiv(x0, s1) + 997 * ModularIndexing(x0, 1, s1) + 3
    assert simplify_index(index, {x0: 10 * s1}) == 997 * x0 + 3
    nested = 5 * s1 * ModularIndexing(x0, s1, 7) + 5 * ModularIndexing(x0, 1, s1)
    assert simplify_index(nested, {}) == 5 * ModularIndexing(x0, 1, 7 * s1)


def products_of_a_merged_batch(logits, hidden):
    merged = logits.reshape(logits.shape[0] * logits.shape[1], logits.shape[2])
    return merged.t() @ hidden.reshape(-1, hidden.shape[-1]), merged @ torch.ones(997, 3)


def test_matmul_operands_read_the_input_memory():
    logits, hidden = torch.randn(2, 16, 997), torch.randn(2, 16, 24)
    graph = symbolic_graph(products_of_a_merged_batch, [logits, hidden], [[0, 1], [0, 1]])
    compiled = inductor.compile_fx(graph, [logits, hidden])
    source = compiled.report.source
    assert compiled.report.size_reason is None, compiled.report.size_reason
    assert "for (" not in source, source     # before: two copy kernels over the logits
    for sizes in ((2, 16), (3, 5), (7, 2)):
        logits, hidden = torch.randn(*sizes, 997), torch.randn(*sizes, 24)
        actual = compiled(logits, hidden)
        expected = products_of_a_merged_batch(logits, hidden)
        for got, want in zip(actual, expected):
            torch.testing.assert_close(got, want)
            assert got.stride() == want.stride()
