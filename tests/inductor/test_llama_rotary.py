"""Llama's rotary position embedding on the CPU: the cos/sin tables, read by the query and key
rotation of every layer, are computed once per graph (realized) instead of inlined into each
rotation kernel, where each reader recomputed them per head (docs/performance-notes.md,
Llama/Mistral). Values are compared with eager; the structure is read from the generated C++.
"""
import re

import pytest
import torch

import inductor
from inductor import debug_artifacts
from tests.inductor.conftest import check_same

COSINE_CALL = re.compile(r"\bcosf?\(|jit_vml_cosf_block\(|\bcos\(")


def _rotate_half(x):
    first, second = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-second, first), dim=-1)


def rotary_layers(inverse_frequency, positions, query, key):
    """Two layers' worth of Llama's rotation (transformers' LlamaRotaryEmbedding and
    apply_rotary_pos_emb): one cos/sin table read by 4 rotations; keys repeated per group."""
    frequencies = (inverse_frequency[None, :, None] @ positions[:, None, :].float())
    frequencies = frequencies.transpose(1, 2)
    table = torch.cat((frequencies, frequencies), dim=-1)
    cos, sin = (table.cos() * 1.0).unsqueeze(1), (table.sin() * 1.0).unsqueeze(1)
    results = []
    for layer in range(2):
        rotated_query = (query + layer) * cos + _rotate_half(query + layer) * sin
        rotated_key = (key * (layer + 1)) * cos + _rotate_half(key * (layer + 1)) * sin
        results.append(rotated_query)
        results.append(rotated_key.repeat_interleave(2, dim=1))
    return results


def _inputs(tokens=16, heads=4, key_heads=2, width=32):
    torch.manual_seed(0)
    inverse_frequency = 1.0 / (10000 ** (torch.arange(0, width, 2).float() / width))
    return (inverse_frequency, torch.arange(tokens)[None],
            torch.randn(1, heads, tokens, width), torch.randn(1, key_heads, tokens, width))


def _cosine_loops(source: str) -> int:
    kernels = source.split("call.with_argument_list = call_with_argument_list")[-1]
    return len(COSINE_CALL.findall(kernels))


def test_rotary_table_is_computed_once_for_every_reader():
    compiled = check_same(rotary_layers, *_inputs())
    # One cos for the table; before, each of the 4 rotations inlined its own.
    assert _cosine_loops(compiled.report.source) == 1, compiled.report.source


def test_rotary_values_match_eager_at_other_sizes():
    check_same(rotary_layers, *_inputs(tokens=7, heads=2, key_heads=1, width=64))


def test_cheap_reused_bodies_stay_inlined():
    """The rule is about transcendental functions: a reused product is still recomputed in
    each reader (one fused kernel, no buffer in between)."""
    def reused(x, y):
        scaled = x * 2.0 + 1.0
        return scaled * y, scaled - y
    compiled = check_same(reused, torch.randn(64, 64), torch.randn(64, 64))
    assert compiled.kernel_count == 1


def _llama(layers=2):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attention_dropout=0.0, use_cache=False)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def test_llama_for_causal_lm_matches_eager_with_one_rotary_table():
    model = _llama()
    ids = torch.randint(0, 128, (1, 24))
    sources = []

    def listen(name, value):
        if name == "source":
            sources.append(value)
    fallbacks_before = inductor.fallbacks()
    debug_artifacts.add_listener(listen)
    try:
        with torch.no_grad():
            expected = model(input_ids=ids).logits
            compiled = torch.compile(model, backend=inductor.compile_fx, dynamic=False)
            actual = compiled(input_ids=ids).logits
    finally:
        debug_artifacts.remove_listener(listen)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    assert len(sources) == 1 and inductor.fallbacks() == fallbacks_before
    assert _cosine_loops(sources[0]) == 1, sources[0]
