"""Index inputs invariant in an inner loop nest are computed once before it
(codegen/cpp/hoist.py): an embedding's row index and its bounds check move out of the
per-element `omp simd` loops of the gather + RMSNorm/LayerNorm kernel. Values match eager at
sizes with a lane tail; negative indices wrap; an index out of range raises IndexError as
eager's does; the generated C++ loads the index outside the innermost loop."""
import re

import pytest
import torch

from tests.inductor.conftest import check_same, compile_function

WIDTH = 203     # not a multiple of the 16 lanes: the reductions have a scalar tail


def _weights(rows=50, width=WIDTH):
    torch.manual_seed(0)
    return torch.randn(rows, width), torch.randn(width), torch.randn(width)


def embedding_rms_norm(tokens, table, gain):
    hidden = torch.nn.functional.embedding(tokens, table)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    return hidden * torch.rsqrt(variance + 1e-6) * gain


def embedding_layer_norm(tokens, table, gain, bias):
    hidden = torch.nn.functional.embedding(tokens, table) * 2.0
    return torch.nn.functional.layer_norm(hidden, (table.shape[1],), gain, bias)


def gather_rows(source, index):
    return torch.gather(source, 0, index).sum(-1) + source.index_select(0, index[:, 0]).sum(-1)


def index_select_scaled(source, index):
    return source.index_select(0, index) * 3.0 + 1.0


def _tokens(count=37, rows=50):
    torch.manual_seed(1)
    return torch.randint(0, rows, (1, count))


def _innermost_loops(source: str) -> list:
    """The bodies of the loops that contain no loop (lines between their braces)."""
    lines = source.splitlines()
    bodies = []
    for start, line in enumerate(lines):
        if not line.strip().startswith("for ("):
            continue
        depth, body = 0, []
        for inner in lines[start:]:
            depth += inner.count("{") - inner.count("}")
            body.append(inner)
            if depth <= 0:
                break
        if not any(text.strip().startswith("for (") for text in body[1:]):
            bodies.append("\n".join(body))
    return bodies


def test_embedding_rms_norm_matches_eager():
    table, gain, _ = _weights()
    check_same(embedding_rms_norm, _tokens(), table, gain, atol=1e-5, rtol=1e-5)


def test_embedding_layer_norm_matches_eager():
    table, gain, bias = _weights()
    check_same(embedding_layer_norm, _tokens(count=19), table, gain, bias,
               atol=1e-5, rtol=1e-5)


def test_negative_tokens_wrap_like_eager_indexing():
    table, gain, _ = _weights()
    tokens = _tokens()
    negative = tokens - 50      # table[-k] is row 50 - k for every reader below

    def function(index, table, gain):
        hidden = table[index]
        return hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + 1e-6) * gain

    compiled = check_same(function, negative, table, gain, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(compiled(negative, table, gain),
                               function(tokens, table, gain), atol=1e-5, rtol=1e-5)


def test_gather_and_index_select_match_eager():
    torch.manual_seed(2)
    source = torch.randn(40, WIDTH)
    index = torch.randint(0, 40, (23, WIDTH))
    check_same(gather_rows, source, index, atol=1e-4, rtol=1e-5)
    check_same(index_select_scaled, source, torch.randint(0, 40, (29,)))


@pytest.mark.parametrize("bad", [50, -51], ids=["past_the_end", "below_minus_rows"])
def test_an_index_out_of_range_raises_like_eager(bad):
    table, gain, _ = _weights()
    tokens = _tokens()
    compiled = compile_function(embedding_rms_norm, tokens, table, gain)
    tokens[0, 30] = bad
    with pytest.raises(IndexError):
        embedding_rms_norm(tokens, table, gain)
    with pytest.raises(IndexError):
        compiled(tokens, table, gain)
    tokens[0, 30] = 3
    torch.testing.assert_close(compiled(tokens, table, gain),
                               embedding_rms_norm(tokens, table, gain), atol=1e-5, rtol=1e-5)


def test_the_row_index_is_loaded_outside_the_innermost_loops():
    table, gain, _ = _weights()
    compiled = check_same(embedding_rms_norm, _tokens(), table, gain, atol=1e-5, rtol=1e-5)
    source = compiled.report.source.split("call.with_argument_list")[-1]
    assert "jit_wrap_index(" in source, source
    loops = _innermost_loops(source)
    assert loops, source
    for body in loops:
        assert "jit_wrap_index(" not in body, body
        # the only int64 reads are the tokens, at the row's index
        assert not re.search(r"const int64_t \w+ = p\d+\[", body), body
