"""Stage "decode": greedy decoding with a growing KV cache, issue 23 part (2).

Input: decoder names, the number of new tokens (256; fewer with `--quick`), the variants,
the device and the repeats. Output: one JSON-ready dict per decoder: per variant the cold
generation (first one: every compile it needs, compiles counted), tokens per second over warm
generations, and whether its token ids equal eager's (if not: the first step that differs and
eager's top-1 minus top-2 logit margin there, to tell a near-tie from a wrong result).

Decoders (batch 1, an 8-token prompt, then one token a step):
- `minimal-gpt2`: a GPT-2 written here (`MinimalGPT2`, registered in the zoo's catalog as
  `dynamic/minimal-gpt2`: vocabulary 8192, width 256, 4 layers, 4 heads); the cache is two
  explicit tensors `[layers, batch, heads, past, head_dim]` that each step concatenates to and
  returns, positions and the causal mask are computed from the cache's length. The first
  call (prefill) sees an empty cache (length 0, which specialises), the next ones lengths
  8, 9, ...: three entries at most under automatic dynamic shapes.
- `gpt2`, `llama`: the zoo's transformers GPT2LMHeadModel / LlamaForCausalLM (small configs,
  cache turned on) with a `transformers.DynamicCache` that the model appends to; skipped with
  a notice when transformers is not installed.
Each compiled step function is the model call (the Python loop and argmax stay eager, as in
a serving loop). Timing: `repeats` rounds, each runs one whole generation per variant in an
order rotated every round; tokens/s = new tokens / median generation seconds. Compiles and
fallbacks (inductor's per-size code variants included) during the warm generations are
`compiles_while_timing`: each warm generation repeats the cold one's sizes.
"""
from __future__ import annotations

import functools
import importlib.util
import inspect
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

from benchmarks.dynamic.sizes import synchronizer
from benchmarks.dynamic.variants import Variant
from benchmarks.zoo import catalog
from benchmarks.zoo.catalog import Workload, register

NEW_TOKENS, QUICK_NEW_TOKENS = 256, 24
PROMPT_TOKENS = 8
DECODERS = ("minimal-gpt2", "gpt2", "llama")
DECODE_VARIANTS = ("eager", "framejit-auto", "torch.compile-auto")


class Block(torch.nn.Module):
    """Pre-norm attention + MLP block that extends its layer's cache by the new tokens."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm_attention, self.norm_mlp = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.projection = torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, hidden, keys, values, mask):
        batch, tokens, width = hidden.shape
        query, key, value = self.qkv(self.norm_attention(hidden)).split(width, dim=-1)
        query, key, value = (tensor.reshape(batch, tokens, self.heads, -1).transpose(1, 2)
                             for tensor in (query, key, value))
        keys = torch.cat([keys, key], dim=2)
        values = torch.cat([values, value], dim=2)
        attended = F.scaled_dot_product_attention(query, keys, values, attn_mask=mask)
        hidden = hidden + self.projection(attended.transpose(1, 2).reshape(batch, tokens, width))
        return hidden + self.mlp(self.norm_mlp(hidden)), keys, values


class MinimalGPT2(torch.nn.Module):
    """`(ids, keys, values) -> (last position's logits, keys, values)`, caches grown by the
    tokens of `ids`."""

    def __init__(self, vocabulary=8192, width=256, layers=4, heads=4, positions=1024):
        super().__init__()
        self.token = torch.nn.Embedding(vocabulary, width)
        self.position = torch.nn.Embedding(positions, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocabulary, bias=False)

    def empty_cache(self, batch: int, device) -> tuple:
        block = self.blocks[0]
        shape = (len(self.blocks), batch, block.heads, 0, self.token.embedding_dim // block.heads)
        return (torch.zeros(shape, device=device), torch.zeros(shape, device=device))

    def forward(self, ids, keys, values):
        past, tokens = keys.shape[3], ids.shape[1]
        positions = torch.arange(past, past + tokens, device=ids.device)
        hidden = self.token(ids) + self.position(positions)
        mask = torch.arange(past + tokens, device=ids.device)[None, :] <= positions[:, None]
        new_keys, new_values = [], []
        for index, block in enumerate(self.blocks):
            hidden, key, value = block(hidden, keys[index], values[index], mask)
            new_keys.append(key)
            new_values.append(value)
        logits = self.head(self.norm(hidden[:, -1]))
        return logits, torch.stack(new_keys), torch.stack(new_values)


def _minimal(batch: int, training: bool) -> Workload:
    return Workload(MinimalGPT2(), (torch.randint(0, 8192, (batch, PROMPT_TOKENS)),), {},
                    lambda output, targets: output[0].float().mean())


register("dynamic/minimal-gpt2", "torch",
         "GPT-2 written in benchmarks/dynamic/decode.py, vocabulary 8192, width 256, "
         "4 layers, 4 heads; explicit cache tensors", group="dynamic")(_minimal)


def _hf_step(model: torch.nn.Module):
    """`step(ids, cache) -> (logits, cache)` calling a transformers causal LM with its cache
    (keyword `cache` in transformers 5.x, `past_key_values` before)."""
    keyword = "cache" if "cache" in inspect.signature(model.forward).parameters \
        else "past_key_values"

    def step(ids, cache):
        output = model(input_ids=ids, use_cache=True, **{keyword: cache})
        return output.logits[:, -1], output.past_key_values
    return step


def decoder(name: str, device: str):
    """(step target, prompt, fresh-state factory, description) of decoder `name`."""
    prompt = torch.randint(3, 8000, (1, PROMPT_TOKENS),
                           generator=torch.Generator().manual_seed(7)).to(device)
    if name == "minimal-gpt2":
        model = catalog.build_workload("dynamic/minimal-gpt2", device=device).model
        return (model, prompt, functools.partial(model.empty_cache, 1, device),
                catalog.spec("dynamic/minimal-gpt2").description)
    import transformers
    model = catalog.build_workload(name, device=device).model
    model.config.use_cache = True
    return (_hf_step(model), prompt, lambda: (transformers.DynamicCache(),),
            f"{catalog.spec(name).description}; transformers.DynamicCache")


def generate(step: Callable, prompt: torch.Tensor, state: tuple, new_tokens: int,
             with_margins: bool = False):
    """(token ids [batch, new_tokens], top-1 minus top-2 logit margin per step when asked:
    the reference run only, as it costs a device synchronization a token)."""
    logits, *state = step(prompt, *state)
    tokens, margins = [], []
    for index in range(new_tokens):
        if with_margins:
            top = logits.topk(2, dim=-1).values
            margins.append(float((top[:, 0] - top[:, 1]).min()))
        token = logits.argmax(-1, keepdim=True)
        tokens.append(token)
        if index + 1 < new_tokens:
            logits, *state = step(token, *state)
    return torch.cat(tokens, dim=1), margins


def _compare_tokens(expected: torch.Tensor, margins: list, tokens: torch.Tensor) -> dict:
    if torch.equal(expected, tokens):
        return {"tokens_match": True}
    differs = (expected != tokens).any(dim=0).nonzero()
    step = int(differs[0]) if len(differs) else None
    return {"tokens_match": False, "first_divergence": step,
            "eager_margin_there": None if step is None else round(margins[step], 6)}


def run_decoder(name: str, variant_names: list, new_tokens: int, device: str, repeats: int,
                progress: Callable[[str], None] = print) -> dict:
    """One decoder under every variant: cold generation, token check, warm tokens/s."""
    target, prompt, fresh_state, description = decoder(name, device)
    synchronize = synchronizer(device)
    with torch.no_grad():
        expected, margins = generate(target, prompt, fresh_state(), new_tokens,
                                     with_margins=True)
        results, variants = {}, {}
        for variant_name in variant_names:
            variants[variant_name], results[variant_name] = _cold(
                variant_name, target, prompt, fresh_state, new_tokens, synchronize, expected,
                margins)
        live = [variant for variant in variant_names if "error" not in results[variant]]
        samples = _warm_generations({variant: variants[variant] for variant in live}, prompt,
                                    fresh_state, new_tokens, repeats, synchronize)
    for variant_name, seconds in samples.items():
        result = results[variant_name]
        result.update(variants[variant_name].counts(), warm_seconds=round(seconds, 4),
                      tokens_per_second=round(new_tokens / seconds, 2))
        result["compiles_while_timing"] = (variants[variant_name].work_count()
                                           - result["cold_work"])
        progress(f"  decode {name} {variant_name}: {result['tokens_per_second']} tokens/s, "
                 f"{result['compiles']} compiles, tokens match eager: {result['tokens_match']}")
    return {"decoder": name, "description": description, "new_tokens": new_tokens,
            "prompt_tokens": PROMPT_TOKENS, "variants": results}


def _warm_generations(variants: dict, prompt, fresh_state, new_tokens: int, repeats: int,
                      synchronize) -> dict:
    """{variant: median seconds of a whole generation}, rounds in rotating order."""
    names = list(variants)
    samples: dict = {name: [] for name in names}
    for round_index in range(repeats):
        shift = round_index % max(1, len(names))
        for name in names[shift:] + names[:shift]:
            variant = variants[name]
            _, seconds = variant.counted(
                lambda: generate(variant.function, prompt, fresh_state(), new_tokens),
                synchronize)
            samples[name].append(seconds)
    return {name: statistics.median(values) for name, values in samples.items()}


def _cold(name: str, target, prompt, fresh_state, new_tokens: int, synchronize,
          expected: torch.Tensor, margins: list):
    try:
        variant = Variant(name, target, new_tokens)
        (tokens, _), seconds = variant.counted(
            lambda: generate(variant.function, prompt, fresh_state(), new_tokens), synchronize)
    except Exception as error:  # a failing variant is a result, never a crash
        return None, {"error": f"{type(error).__name__}: {error}"[:1500], "tokens_match": False}
    return variant, {"cold_seconds": round(seconds, 3), "cold_compiles": variant.compiles(),
                     "cold_work": variant.work_count(),
                     **_compare_tokens(expected, margins, tokens)}


def run_decode(names: list, variant_names: list, new_tokens: int, device: str, repeats: int,
               progress: Callable[[str], None] = print) -> list:
    """One result per decoder; transformers decoders are skipped with a notice when the
    package is missing."""
    results = []
    for name in names:
        if name != "minimal-gpt2" and importlib.util.find_spec("transformers") is None:
            progress(f"decode: {name} skipped: transformers is not installed")
            results.append({"decoder": name, "skipped": "transformers is not installed"})
            continue
        progress(f"decode: {name}, {new_tokens} new tokens")
        started = time.perf_counter()
        result = run_decoder(name, variant_names, new_tokens, device, repeats, progress)
        result["seconds"] = round(time.perf_counter() - started, 1)
        results.append(result)
    return results
