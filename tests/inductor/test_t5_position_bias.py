"""T5's relative position bias on the CPU: the bucket of each (query, key) pair (a logarithm
of the distance) indexes an embedding of one column per head. The bucket is computed once
per pair (realized) instead of inlined into the gather, where it was recomputed per head,
with its VML logarithm per row (docs/performance-notes.md, T5). Values are compared with
eager; the structure is read from the generated C++.
"""
import math
import re

import pytest
import torch

from tests.inductor.conftest import check_same

LOG_CALL = re.compile(r"\blogf?\(|jit_vml_logf_block\(")
LOOP_BOUND = re.compile(r"for \(int64_t \w+ = [^;]*; \w+ < (\d+);")


def bucket(distance, bidirectional: bool, buckets: int = 32, max_distance: int = 128):
    """The bucket of a key's distance from a query, as T5 computes it: exact below half of
    the (per direction) buckets, logarithmic above, the last bucket from `max_distance`."""
    result = torch.zeros_like(distance)
    if bidirectional:
        buckets //= 2
        result = result + (distance > 0).to(torch.long) * buckets
        distance = torch.abs(distance)
    else:
        distance = -torch.min(distance, torch.zeros_like(distance))
    exact = buckets // 2
    scaled = torch.log(distance.float() / exact) / math.log(max_distance / exact)
    large = exact + (scaled * (buckets - exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, buckets - 1))
    return result + torch.where(distance < exact, distance, large)


def position_bias(encoder_table, decoder_table, mask, positions):
    """Encoder (bidirectional, masked) and decoder (causal) biases `[1, heads, q, k]`."""
    distance = positions[None, :] - positions[:, None]
    encoder = encoder_table[bucket(distance, True)].permute(2, 0, 1).unsqueeze(0)
    decoder = decoder_table[bucket(distance, False)].permute(2, 0, 1).unsqueeze(0)
    causal = positions[:, None] >= positions[None, :]
    low = torch.finfo(torch.float32).min
    return (torch.where(mask[:, None] & mask[None, :], encoder, low),
            torch.where(causal, decoder, low))


def _inputs(tokens=40, heads=3):
    torch.manual_seed(0)
    mask = torch.ones(tokens, dtype=torch.bool)
    mask[-3:] = False
    return (torch.randn(32, heads), torch.randn(32, heads), mask, torch.arange(tokens))


def _kernels(source: str) -> list:
    kernels = source.split("call.with_argument_list = call_with_argument_list")[-1]
    return kernels.split("static void kernel")[1:]


def test_bucket_is_computed_once_per_position_pair():
    compiled = check_same(position_bias, *_inputs())
    with_log = [text for text in _kernels(compiled.report.source) if LOG_CALL.search(text)]
    assert with_log, compiled.report.source
    # Before: the logarithm ran inside the gather's loop over the 3 heads.
    for text in with_log:
        assert "3" not in LOOP_BOUND.findall(text), text


@pytest.mark.parametrize("tokens, heads", [(1, 2), (17, 4), (128, 8)])
def test_position_bias_matches_eager_at_other_sizes(tokens, heads):
    check_same(position_bias, *_inputs(tokens, heads))


def test_t5_matches_eager():
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(
        vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
        dropout_rate=0.0, use_cache=False)
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(config).eval()
    ids = torch.randint(0, 128, (1, 24))
    import inductor
    with torch.no_grad():
        expected = model(input_ids=ids, decoder_input_ids=ids).logits
        compiled = torch.compile(model, backend=inductor.compile_fx, dynamic=False)
        actual = compiled(input_ids=ids, decoder_input_ids=ids).logits
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
