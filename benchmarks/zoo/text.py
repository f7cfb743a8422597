"""Stage "catalog", transformers entries: real model classes built from small configs.

Input: a batch size and whether to train. Output: a CPU float32 `Workload` with token ids
(or pixels for ViT) as keyword arguments, called the way users call these models; in training
the labels go in too and the model computes its own loss (`output.loss`). Dropout
probabilities are zero in every config, so a training step is deterministic; caches are off.

Small configs (CPU suite): hidden 256, 4 layers, 4 heads, feed-forward 1024, vocabulary 8192,
128 tokens. Entries named `*-base` / `t5-small` use the published model sizes (GPU suite).
"""
from __future__ import annotations

import torch

from benchmarks.zoo.catalog import Workload, register

SEQUENCE = 128
SMALL = {"hidden": 256, "layers": 4, "heads": 4, "ffn": 1024, "vocab": 8192}


def _token_ids(batch: int, vocab: int) -> torch.Tensor:
    return torch.randint(3, vocab, (batch, SEQUENCE))  # 0-2: pad/bos/eos in these configs


def _own_loss(output, targets: dict) -> torch.Tensor:
    return output.loss


def _encoder_workload(model, vocab: int, batch: int, training: bool) -> Workload:
    ids = _token_ids(batch, vocab)
    kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if training:
        kwargs["labels"] = _token_ids(batch, vocab)
    return Workload(model, (), kwargs, _own_loss)


def _decoder_workload(model, vocab: int, batch: int, training: bool) -> Workload:
    ids = _token_ids(batch, vocab)
    kwargs = {"input_ids": ids}
    if training:
        kwargs["labels"] = ids.clone()
    return Workload(model, (), kwargs, _own_loss)


def _seq2seq_workload(model, vocab: int, batch: int, training: bool) -> Workload:
    ids = _token_ids(batch, vocab)
    kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if training:
        kwargs["labels"] = _token_ids(batch, vocab)
    else:
        kwargs["decoder_input_ids"] = _token_ids(batch, vocab)
    return Workload(model, (), kwargs, _own_loss)


def _bert_like(config_name: str, model_name: str, size: dict, **extra):
    def build(batch: int, training: bool) -> Workload:
        import transformers
        config = getattr(transformers, config_name)(
            vocab_size=size["vocab"], hidden_size=size["hidden"],
            num_hidden_layers=size["layers"], num_attention_heads=size["heads"],
            intermediate_size=size["ffn"], max_position_embeddings=514,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **extra)
        model = getattr(transformers, model_name)(config)
        return _encoder_workload(model, size["vocab"], batch, training)
    return build


def _distilbert(batch: int, training: bool) -> Workload:
    import transformers
    size = SMALL
    config = transformers.DistilBertConfig(
        vocab_size=size["vocab"], dim=size["hidden"], n_layers=size["layers"],
        n_heads=size["heads"], hidden_dim=size["ffn"], dropout=0.0, attention_dropout=0.0,
        seq_classif_dropout=0.0)
    return _encoder_workload(transformers.DistilBertForMaskedLM(config), size["vocab"], batch,
                             training)


def _gpt2(size: dict, positions: int = 512):
    def build(batch: int, training: bool) -> Workload:
        import transformers
        config = transformers.GPT2Config(
            vocab_size=size["vocab"], n_embd=size["hidden"], n_layer=size["layers"],
            n_head=size["heads"], n_inner=size["ffn"], n_positions=positions,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
            bos_token_id=size["vocab"] - 1, eos_token_id=size["vocab"] - 1)
        return _decoder_workload(transformers.GPT2LMHeadModel(config), size["vocab"], batch,
                                 training)
    return build


def _t5(size: dict, head_dim: int):
    def build(batch: int, training: bool) -> Workload:
        import transformers
        config = transformers.T5Config(
            vocab_size=size["vocab"], d_model=size["hidden"], d_kv=head_dim, d_ff=size["ffn"],
            num_layers=size["layers"], num_decoder_layers=size["layers"],
            num_heads=size["heads"], dropout_rate=0.0, use_cache=False,
            decoder_start_token_id=0, pad_token_id=0)
        return _seq2seq_workload(transformers.T5ForConditionalGeneration(config), size["vocab"],
                                 batch, training)
    return build


def _bart(batch: int, training: bool) -> Workload:
    import transformers
    size = SMALL
    config = transformers.BartConfig(
        vocab_size=size["vocab"], d_model=size["hidden"], encoder_layers=size["layers"],
        decoder_layers=size["layers"], encoder_attention_heads=size["heads"],
        decoder_attention_heads=size["heads"], encoder_ffn_dim=size["ffn"],
        decoder_ffn_dim=size["ffn"], max_position_embeddings=512, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, use_cache=False)
    return _seq2seq_workload(transformers.BartForConditionalGeneration(config), size["vocab"],
                             batch, training)


def _vit(batch: int, training: bool) -> Workload:
    import transformers
    size = SMALL
    config = transformers.ViTConfig(
        hidden_size=size["hidden"], num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"], intermediate_size=size["ffn"], image_size=224,
        patch_size=16, num_labels=1000, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)
    model = transformers.ViTForImageClassification(config)
    kwargs = {"pixel_values": torch.randn(batch, 3, 224, 224)}
    if training:
        kwargs["labels"] = torch.randint(0, 1000, (batch,))
    return Workload(model, (), kwargs, _own_loss)


def _llama_like(config_name: str, model_name: str, **extra):
    def build(batch: int, training: bool) -> Workload:
        import transformers
        size = SMALL
        config = getattr(transformers, config_name)(
            vocab_size=size["vocab"], hidden_size=size["hidden"],
            intermediate_size=size["ffn"], num_hidden_layers=size["layers"],
            num_attention_heads=size["heads"], num_key_value_heads=size["heads"] // 2,
            max_position_embeddings=512, attention_dropout=0.0, use_cache=False, **extra)
        return _decoder_workload(getattr(transformers, model_name)(config), size["vocab"],
                                 batch, training)
    return build


WHISPER_FRAMES = 512   # log-mel frames: twice max_source_positions (the encoder's stride 2)


def _whisper(batch: int, training: bool) -> Workload:
    import transformers
    size = SMALL
    config = transformers.WhisperConfig(
        vocab_size=size["vocab"], num_mel_bins=80, d_model=size["hidden"],
        encoder_layers=size["layers"], decoder_layers=size["layers"],
        encoder_attention_heads=size["heads"], decoder_attention_heads=size["heads"],
        encoder_ffn_dim=size["ffn"], decoder_ffn_dim=size["ffn"],
        max_source_positions=WHISPER_FRAMES // 2, max_target_positions=448, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, use_cache=False, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    model = transformers.WhisperForConditionalGeneration(config)
    kwargs = {"input_features": torch.randn(batch, 80, WHISPER_FRAMES)}
    if training:
        kwargs["labels"] = _token_ids(batch, size["vocab"])
    else:
        kwargs["decoder_input_ids"] = _token_ids(batch, size["vocab"])
    return Workload(model, (), kwargs, _own_loss)


def _opt(batch: int, training: bool) -> Workload:
    import transformers
    size = SMALL
    config = transformers.OPTConfig(
        vocab_size=size["vocab"], hidden_size=size["hidden"], num_hidden_layers=size["layers"],
        ffn_dim=size["ffn"], num_attention_heads=size["heads"], max_position_embeddings=512,
        word_embed_proj_dim=size["hidden"], dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, layerdrop=0.0, use_cache=False)
    return _decoder_workload(transformers.OPTForCausalLM(config), size["vocab"], batch, training)


BERT_BASE = {"hidden": 768, "layers": 12, "heads": 12, "ffn": 3072, "vocab": 30522}
GPT2_BASE = {"hidden": 768, "layers": 12, "heads": 12, "ffn": 3072, "vocab": 50257}
T5_SMALL = {"hidden": 512, "layers": 6, "heads": 8, "ffn": 2048, "vocab": 32128}

_SMALL_NOTE = "small config: hidden 256, 4 layers, 4 heads, vocab 8192"
_ENTRIES = {
    "bert": (_bert_like("BertConfig", "BertForMaskedLM", SMALL), "BertForMaskedLM"),
    "gpt2": (_gpt2(SMALL), "GPT2LMHeadModel"),
    "distilbert": (_distilbert, "DistilBertForMaskedLM"),
    "roberta": (_bert_like("RobertaConfig", "RobertaForMaskedLM", SMALL, pad_token_id=1),
                "RobertaForMaskedLM"),
    "albert": (_bert_like("AlbertConfig", "AlbertForMaskedLM", SMALL, embedding_size=128),
               "AlbertForMaskedLM"),
    "t5": (_t5(SMALL, head_dim=64), "T5ForConditionalGeneration"),
    "bart": (_bart, "BartForConditionalGeneration"),
    "vit": (_vit, "ViTForImageClassification"),
    "llama": (_llama_like("LlamaConfig", "LlamaForCausalLM"), "LlamaForCausalLM"),
    "mistral": (_llama_like("MistralConfig", "MistralForCausalLM", sliding_window=4096),
                "MistralForCausalLM"),
    "opt": (_opt, "OPTForCausalLM"),
    "electra": (_bert_like("ElectraConfig", "ElectraForMaskedLM", SMALL, embedding_size=128),
                "ElectraForMaskedLM"),
    "deberta-v2": (_bert_like("DebertaV2Config", "DebertaV2ForMaskedLM", SMALL),
                   "DebertaV2ForMaskedLM"),
    "whisper": (_whisper, "WhisperForConditionalGeneration (80 mel bins, 512 frames)"),
}
for _name, (_build, _class_name) in _ENTRIES.items():
    register(_name, "transformers", f"{_class_name}, {_SMALL_NOTE}")(_build)

register("bert-base", "transformers", "full-size config: BertForMaskedLM, bert-base dimensions")(
    _bert_like("BertConfig", "BertForMaskedLM", BERT_BASE))
register("gpt2-base", "transformers", "full-size config: GPT2LMHeadModel, 124M dimensions")(
    _gpt2(GPT2_BASE, positions=1024))
register("t5-small", "transformers",
         "full-size config: T5ForConditionalGeneration, t5-small dimensions")(
    _t5(T5_SMALL, head_dim=64))
