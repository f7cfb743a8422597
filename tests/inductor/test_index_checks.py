"""Indirect indices are checked inside vectorisable loops (codegen/cpp/lines.py): the check
ORs into a flag scoped to the innermost loop (a `reduction` of its `omp simd` pragma), and the
kernel reports it after the loop; an index out of range still raises IndexError, in every
loop shape (pointwise, reduction lanes and tails, inner stages, collapsed parallel loops)."""
import pytest
import torch

from inductor.codegen.cpp.lines import Lines
from tests.inductor.conftest import check_same, compile_function


def _bias_softmax(scores, table, index):
    """swin_t's attention: a relative-position bias gathered through an index table."""
    bias = table[index.view(-1)].view(49, 49, 3).permute(2, 0, 1)
    return torch.softmax(scores + bias, dim=-1)


def _inputs(bad: bool = False):
    torch.manual_seed(0)
    index = torch.randint(0, 169, (49, 49))
    if bad:
        index[17, 30] = 169
    return torch.randn(8, 3, 49, 49), torch.randn(169, 3), index


def _bias_transposed(scores, table, index):
    """The gathered bias laid out with the index varying along the innermost loop."""
    return scores + table[index.view(-1)].t().contiguous().view(3, 49, 49)


def test_gathered_bias_softmax_matches_eager_with_flags_on_simd_loops():
    compiled = check_same(_bias_softmax, *_inputs(), atol=1e-5, rtol=1e-5)
    source = compiled.report.source
    # the bias kernel's row index does not vary along its innermost loop: it is checked
    # once per row before that loop (test_pointwise_hoist.py), its flag on the row loop
    assert "reduction(|:jit_index_error)" in source or "{ int jit_index_error = 0;" in source
    assert source.count("{ int jit_index_error = 0;") == \
        source.count("if (jit_index_error) jit_fail(JIT_ERROR_INDEX); }")
    # an index that varies along the innermost loop is checked in it, through the flag
    source = check_same(_bias_transposed, *_inputs(), atol=1e-5, rtol=1e-5).report.source
    assert "#pragma omp simd reduction(|:jit_index_error)" in source, source
    assert source.count("{ int jit_index_error = 0;") == \
        source.count("if (jit_index_error) jit_fail(JIT_ERROR_INDEX); }")


@pytest.mark.parametrize("function", [
    _bias_softmax, _bias_transposed,
    lambda scores, table, index: scores + table[index.view(-1)].view(49, 49, 3).permute(2, 0, 1),
    lambda scores, table, index: table[index].sum(dim=1) + scores.sum(dim=(0, 1))[:, :1],
], ids=["softmax", "transposed", "pointwise", "reduction"])
def test_an_index_out_of_range_raises(function):
    scores, table, index = _inputs(bad=True)
    with pytest.raises(IndexError):
        function(scores, table, index)
    compiled = compile_function(function, scores, table, index)
    with pytest.raises(IndexError):
        compiled(scores, table, index)
    good = _inputs()
    torch.testing.assert_close(compiled(*good), function(*good), atol=1e-5, rtol=1e-5)


def test_an_embedding_lookup_with_a_bad_token_raises_after_good_calls():
    weight = torch.randn(100, 64)

    def function(tokens):
        return torch.nn.functional.embedding(tokens, weight) * 2

    tokens = torch.randint(0, 100, (4, 512))
    compiled = check_same(function, tokens)
    tokens[3, 500] = 100
    with pytest.raises(IndexError):
        compiled(tokens)


def test_flags_go_around_the_innermost_loop_or_its_collapse_owner():
    lines = Lines()
    lines.add("#pragma omp parallel for collapse(2) schedule(static)")
    lines.open("for (int64_t x0 = 0; x0 < 4; ++x0)")
    lines.open("for (int64_t x1 = 0; x1 < 4; ++x1)")
    lines.add("const int64_t i = jit_wrap_index(v, 4, jit_index_error);")
    lines.close()
    lines.close()
    lines.add("#pragma omp simd")
    lines.open("for (int64_t y0 = 0; y0 < 4; ++y0)")
    lines.add("const int64_t j = jit_wrap_index(v, 4, jit_index_error);")
    lines.close()
    text = [line.strip() for line in lines.function_lines()]
    assert text[0] == "{ int jit_index_error = 0;"
    assert text[1] == "#pragma omp parallel for collapse(2) schedule(static) " \
                      "reduction(|:jit_index_error)"
    assert text[2].startswith("for (int64_t x0") and text[3].startswith("for (int64_t x1")
    assert text[7] == "if (jit_index_error) jit_fail(JIT_ERROR_INDEX); }"
    assert text[8:10] == ["{ int jit_index_error = 0;",
                          "#pragma omp simd reduction(|:jit_index_error)"]
    assert text[-1] == "if (jit_index_error) jit_fail(JIT_ERROR_INDEX); }"
    region = Lines()
    region.open("for (int64_t x0 = 0; x0 < 4; ++x0)")
    region.add("#pragma omp parallel num_threads(jit_teams)")
    region.open("")
    region.add("const int64_t k = jit_wrap_index(v, 4, jit_index_error);")
    region.close()
    region.close()
    text = [line.strip() for line in region.function_lines()]
    assert text[1:3] == ["{ int jit_index_error = 0;", "#pragma omp parallel "
                         "num_threads(jit_teams) reduction(|:jit_index_error)"], text
    outside = Lines()
    outside.add("const int64_t k = jit_wrap_index(v, 4, jit_index_error);")
    assert outside.function_lines()[0].strip() == "int jit_index_error = 0;"
