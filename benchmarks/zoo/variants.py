"""Stage "catalog", the stage benchmarks' entries: configs that one benchmark needs and the zoo's
suites do not run.

Input: a batch size, whether to train, and for the `training/` entries the image side or token
count (`size`). Output: a CPU float32 `Workload`, built from a config with random weights (no
downloads), the same models, inputs and random streams as the benchmarks built before they
moved here. Names are `group/model`; the groups:

- `tiny/`: the eleven models of issue 4 in the shapes of `tests/capture/test_models.py` (hidden
  64, 2 layers, 2x16 tokens; 64x64 images), for `benchmarks.capture.bench_capture`; the batch
  argument is ignored (fixed shapes).
- `default/`: transformers' default-size configs (BertModel, GPT-2 124M with its cache, ...),
  128 tokens, for `benchmarks.inductor.models` and `kernel_times` (their torchvision models
  are the zoo's own entries).
- `training/`: `benchmarks.training.run`'s models: torchvision classifiers with 100 classes,
  BertModel with a mean-square loss, GPT-2 with next-token cross-entropy; `-small` is the CPU
  config (hidden 256, 4 layers).
- `soundness/`: `benchmarks/gpu_soundness.py`'s two variants of zoo entries.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.zoo import text
from benchmarks.zoo.catalog import Workload, register


# -- tiny/: the capture benchmark's models --------------------------------------------------------
def _tiny_ids(vocabulary: int = 1000, shape=(2, 16)) -> torch.Tensor:
    return torch.randint(0, vocabulary, shape, generator=torch.Generator().manual_seed(1))


def _no_loss(output, targets: dict) -> torch.Tensor:
    raise NotImplementedError("this entry is for inference only")


def _tiny_transformer(model_class: str, config_class: str, inputs: str, **config):
    def build(batch: int, training: bool) -> Workload:
        import transformers
        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config))
        if inputs == "pixels":
            kwargs = {"pixel_values": torch.randn(2, 3, 32, 32,
                                                  generator=torch.Generator().manual_seed(2))}
        else:
            ids = _tiny_ids()
            kwargs = {"input_ids": ids}
            if inputs == "masked":
                kwargs["attention_mask"] = torch.ones_like(ids)
            elif inputs == "seq2seq":
                kwargs["decoder_input_ids"] = ids
        return Workload(model, (), kwargs, _no_loss)
    return build


def _tiny_vision(name: str, **options):
    def build(batch: int, training: bool) -> Workload:
        import torchvision
        model = getattr(torchvision.models, name)(weights=None, **options)
        image = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(2))
        return Workload(model, (image,), {}, _no_loss)
    return build


_TINY = {
    "BertModel": _tiny_transformer("BertModel", "BertConfig", "masked", hidden_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=128),
    "GPT2LMHeadModel": _tiny_transformer("GPT2LMHeadModel", "GPT2Config", "ids", n_embd=64,
                                         n_layer=2, n_head=4),
    "T5Model": _tiny_transformer("T5Model", "T5Config", "seq2seq", d_model=64, d_ff=128,
                                 num_layers=2, num_heads=4, d_kv=16),
    "LlamaForCausalLM": _tiny_transformer("LlamaForCausalLM", "LlamaConfig", "ids",
                                          hidden_size=64, intermediate_size=128,
                                          num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2, vocab_size=1000),
    "DistilBertModel": _tiny_transformer("DistilBertModel", "DistilBertConfig", "masked", dim=64,
                                         n_layers=2, n_heads=4, hidden_dim=128),
    "ViTModel": _tiny_transformer("ViTModel", "ViTConfig", "pixels", hidden_size=64,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, image_size=32, patch_size=8),
    "resnet18": _tiny_vision("resnet18"),
    "mobilenet_v3_large": _tiny_vision("mobilenet_v3_large"),
    "vit_b_16": _tiny_vision("vit_b_16", image_size=64),
    "convnext_tiny": _tiny_vision("convnext_tiny"),
    "swin_t": _tiny_vision("swin_t"),
}
for _name, _build in _TINY.items():
    _family = "torchvision" if _name[0].islower() else "transformers"
    register(f"tiny/{_name}", _family, f"{_name}, the shapes of tests/capture/test_models.py",
             group="tiny")(_build)


# -- default/: transformers' default-size configs, 128 tokens -------------------------------------
DEFAULT_SEQUENCE = 128


def _default_transformer(model_class: str, config_class: str, inputs: str = "ids", **config):
    def build(batch: int, training: bool) -> Workload:
        import transformers
        tokens = torch.randint(0, 1000, (batch, DEFAULT_SEQUENCE))  # drawn before the weights
        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config))
        kwargs = {"input_ids": tokens}
        if inputs == "seq2seq":
            kwargs["decoder_input_ids"] = tokens[:, :DEFAULT_SEQUENCE // 2]
        elif inputs == "pixels":
            kwargs = {"pixel_values": torch.randn(batch, 3, 224, 224)}
        return Workload(model, (), kwargs, _no_loss)
    return build


_DEFAULT = {
    "bert": _default_transformer("BertModel", "BertConfig"),
    "gpt2": _default_transformer("GPT2LMHeadModel", "GPT2Config"),
    "t5": _default_transformer("T5Model", "T5Config", "seq2seq"),
    "llama": _default_transformer("LlamaForCausalLM", "LlamaConfig", hidden_size=512,
                                  intermediate_size=1376, num_hidden_layers=4,
                                  num_attention_heads=8, num_key_value_heads=8,
                                  vocab_size=32000),
    "distilbert": _default_transformer("DistilBertModel", "DistilBertConfig"),
    "vit": _default_transformer("ViTModel", "ViTConfig", "pixels"),
}
_DEFAULT_NOTES = {"bert": "BertModel, default config",
                  "gpt2": "GPT2LMHeadModel, default config (cache on)",
                  "t5": "T5Model, default config",
                  "llama": "LlamaForCausalLM, hidden 512, 4 layers, vocab 32000",
                  "distilbert": "DistilBertModel, default config",
                  "vit": "ViTModel, default config"}
for _name, _build in _DEFAULT.items():
    register(f"default/{_name}", "transformers", _DEFAULT_NOTES[_name], group="default")(_build)


# -- training/: the training benchmark's models ----------------------------------------------------
TRAINING_CLASSES = 100


def _training_vision(name: str):
    def build(batch: int, training: bool, size: int = 224) -> Workload:
        import torchvision
        model = getattr(torchvision.models, name)(num_classes=TRAINING_CLASSES)
        images = torch.randn(batch, 3, size, size)
        labels = torch.randint(0, TRAINING_CLASSES, (batch,))
        return Workload(model, (images,), {}, _labels_cross_entropy, {"labels": labels})
    return build


def _labels_cross_entropy(output, targets: dict) -> torch.Tensor:
    return F.cross_entropy(output, targets["labels"].to(output.device))


def _training_bert(small: bool):
    def build(batch: int, training: bool, size: int = 128 if small else 512) -> Workload:
        import transformers
        config = (transformers.BertConfig(hidden_size=256, num_hidden_layers=4,
                                          num_attention_heads=4, intermediate_size=1024)
                  if small else transformers.BertConfig())
        model = transformers.BertModel(config)
        ids = torch.randint(0, config.vocab_size, (batch, size))
        kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        return Workload(model, (), kwargs, _hidden_mean_square)
    return build


def _hidden_mean_square(output, targets: dict) -> torch.Tensor:
    return output.last_hidden_state.float().pow(2).mean()


def _training_gpt2(small: bool):
    def build(batch: int, training: bool, size: int = 128 if small else 512) -> Workload:
        import transformers
        config = (transformers.GPT2Config(n_layer=4, n_head=4, n_embd=256, vocab_size=8192,
                                          n_positions=size)
                  if small else transformers.GPT2Config())
        model = transformers.GPT2LMHeadModel(config)
        ids = torch.randint(0, config.vocab_size, (batch, size))
        return Workload(model, (), {"input_ids": ids}, _next_token_loss, {"input_ids": ids})
    return build


def _next_token_loss(output, targets: dict) -> torch.Tensor:
    logits = output.logits[:, :-1].float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           targets["input_ids"][:, 1:].reshape(-1))


_TRAINING = {
    "resnet18": (_training_vision("resnet18"), "torchvision", "resnet18, 100 classes"),
    "resnet50": (_training_vision("resnet50"), "torchvision", "resnet50, 100 classes"),
    "mobilenet_v3_large": (_training_vision("mobilenet_v3_large"), "torchvision",
                           "mobilenet_v3_large, 100 classes"),
    "bert-small": (_training_bert(small=True), "transformers",
                   "BertModel, hidden 256, 4 layers; mean-square loss"),
    "bert": (_training_bert(small=False), "transformers",
             "BertModel, default config; mean-square loss"),
    "gpt2-small": (_training_gpt2(small=True), "transformers",
                   "GPT2LMHeadModel, hidden 256, 4 layers, vocab 8192; next-token loss"),
    "gpt2": (_training_gpt2(small=False), "transformers",
             "GPT2LMHeadModel, default config; next-token loss"),
}
for _name, (_build, _family, _note) in _TRAINING.items():
    register(f"training/{_name}", _family, _note, group="training")(_build)


# -- soundness/: the GPU soundness script's variants of zoo entries --------------------------------
def _deberta_v2_model(batch: int, training: bool) -> Workload:
    import transformers
    size = text.SMALL
    config = transformers.DebertaV2Config(
        vocab_size=size["vocab"], hidden_size=size["hidden"], num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"], intermediate_size=size["ffn"],
        max_position_embeddings=514, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    ids = torch.randint(3, size["vocab"], (batch, text.SEQUENCE))
    return Workload(transformers.DebertaV2Model(config), (),
                    {"input_ids": ids, "attention_mask": torch.ones_like(ids)},
                    _hidden_square_mean)


def _hidden_square_mean(output, targets: dict) -> torch.Tensor:
    return output.last_hidden_state.float().square().mean()


def _mistral_cache(batch: int, training: bool) -> Workload:
    import transformers
    size = text.SMALL
    config = transformers.MistralConfig(
        vocab_size=size["vocab"], hidden_size=size["hidden"], intermediate_size=size["ffn"],
        num_hidden_layers=size["layers"], num_attention_heads=size["heads"],
        num_key_value_heads=size["heads"] // 2, max_position_embeddings=512,
        attention_dropout=0.0, sliding_window=4096)
    ids = torch.randint(3, size["vocab"], (batch, text.SEQUENCE))
    kwargs = {"input_ids": ids} if not training else {"input_ids": ids, "labels": ids}
    loss = text._own_loss if training else _logits_mean
    return Workload(transformers.MistralForCausalLM(config), (), kwargs, loss)


def _logits_mean(output, targets: dict) -> torch.Tensor:
    return output.logits.float().mean()


register("soundness/deberta-v2-model", "transformers",
         "DebertaV2Model (no head), zoo small config", group="soundness")(_deberta_v2_model)
register("soundness/mistral-cache", "transformers",
         "MistralForCausalLM with its cache on, zoo small config",
         group="soundness")(_mistral_cache)
