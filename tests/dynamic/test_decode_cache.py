"""Greedy decoding with a growing KV cache under automatic dynamic shapes (issue 23, the
decode benchmark's transformers decoders, minimized without transformers).

A cache object whose layer list is filled on the first call (as `transformers.DynamicCache`)
and whose tensors grow by one position a step: the prefill (empty cache), the first decode
step (static sizes) and one symbolic entry for every later length: three entries, over
repeated generations too. The attention bias is padded to a multiple of 8 and sliced back,
as CUDA's memory-efficient attention pads a mask (`constant_pad_nd` by a symbolic amount):
inductor's symbolic trace ran that C++ kernel on SymInts and raised ("SymIntArrayRef
expected to contain only concrete integers"), an internal error that ran the frame eagerly.
"""
import warnings

import pytest
import torch
import torch.nn.functional as F

import dynamo
from dynamic_programs import assert_same_outcome, assert_same_value, counting_backend, outcome


class Layer:
    def __init__(self):
        self.keys = self.values = None

    def update(self, keys, values):
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=-2)
            self.values = torch.cat([self.values, values], dim=-2)
        return self.keys, self.values


class Cache:
    def __init__(self):
        self.layers = []

    def length(self) -> int:
        return self.layers[0].keys.shape[-2] if self.layers else 0

    def update(self, index, keys, values):
        while len(self.layers) <= index:
            self.layers.append(Layer())
        return self.layers[index].update(keys, values)


class Decoder(torch.nn.Module):
    def __init__(self, vocabulary=64, width=16, heads=2, layers=2):
        super().__init__()
        self.heads = heads
        self.token = torch.nn.Embedding(vocabulary, width)
        self.position = torch.nn.Embedding(128, width)
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(width, 3 * width) for _ in range(layers))
        self.head = torch.nn.Linear(width, vocabulary)

    def forward(self, ids, cache):
        past, tokens = cache.length(), ids.shape[1]
        positions = torch.arange(past, past + tokens)
        hidden = self.token(ids) + self.position(positions)
        total = past + tokens
        causal = torch.arange(total)[None, :] <= positions[:, None]
        bias = torch.zeros(1, 1, tokens, total).masked_fill(~causal, float("-inf"))
        bias = F.pad(bias, (0, (-total) % 8))[..., :total]   # CUDA attention's mask padding
        for index, qkv in enumerate(self.qkv):
            query, key, value = (part.unflatten(-1, (self.heads, -1)).transpose(1, 2)
                                 for part in qkv(hidden).chunk(3, dim=-1))
            key, value = cache.update(index, key, value)
            attended = F.scaled_dot_product_attention(query, key, value, attn_mask=bias)
            hidden = hidden + attended.transpose(1, 2).flatten(2)
        return self.head(hidden)[:, -1], cache


def generate(step, prompt, new_tokens):
    logits, cache = step(prompt, Cache())
    tokens, all_logits = [], []
    for _ in range(new_tokens):
        all_logits.append(logits)
        token = logits.argmax(-1, keepdim=True)
        tokens.append(token)
        logits, cache = step(token, cache)
    return torch.cat(tokens, dim=1), all_logits, cache


def internal_errors(caught) -> list:
    return [str(warning.message) for warning in caught if "internal error" in str(warning.message)]


@pytest.mark.expect_fallback(
    "per_size", reason="inductor's symbolic path may refuse the step graph (NotSymbolic: "
    "arange with a symbolic start, the padded bias): a counted variant per length; this test "
    "is about the front end's entries")
def test_a_growing_cache_object_decodes_in_three_entries_matching_eager():
    """The prefill stores views of the projection in the cache (static: views never become
    symbolic), the next steps tensors of their own: their sizes must count as seen, else the
    second decode step compiles a static entry too (4 entries)."""
    torch.manual_seed(0)
    model = Decoder().eval()
    prompt = torch.randint(0, 64, (1, 5), generator=torch.Generator().manual_seed(1))
    dynamo.reset()
    counting = counting_backend("inductor")
    jitted = dynamo.jit(model, backend=counting, dynamic=None)
    with torch.no_grad():
        expected, expected_logits, expected_cache = generate(model, prompt, 8)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for generation in range(2):
                tokens, logits, cache = generate(jitted, prompt, 8)
                assert torch.equal(tokens, expected), f"generation {generation}"
                assert_same_value(expected_logits, logits, f"generation {generation}: logits")
                assert_same_value([layer.keys for layer in expected_cache.layers],
                                  [layer.keys for layer in cache.layers], "cached keys")
                assert counting.frame_count <= 3, f"generation {generation}"
    assert not internal_errors(caught), internal_errors(caught)
    assert counting.frame_count == 3   # prefill, first step (static), every later length


def padded_bias(x, m):
    amount = (-m.shape[-1]) % 8
    padded = F.pad(m, (0, amount))[..., :m.shape[-1]]
    return x + padded


def test_padding_by_a_symbolic_amount_compiles_without_an_internal_error():
    """The pad amount reaches constant_pad_nd's C++ kernel only for some choices of the
    representative of the two equal sizes (named `x`, `m`: yes; `scores`, `bias`: no).
    Inductor lowers a pad by a size expression once for every size (masked positions; the
    conftest fails the test on any fallback, `per_size` included)."""
    dynamo.reset()
    counting = counting_backend("inductor")
    jitted = dynamo.jit(padded_bias, backend=counting, dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for size in (5, 6, 9, 13, 15):
            generator = torch.Generator().manual_seed(size)
            arguments = (torch.randn(3, size, generator=generator),
                         torch.randn(3, size, generator=generator))
            assert_same_outcome(outcome(padded_bias, arguments), outcome(jitted, arguments),
                                f"size {size}")
    assert not internal_errors(caught), internal_errors(caught)
    assert counting.frame_count == 1
