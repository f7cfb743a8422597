"""Differential training tests on the real models of the capture issue (torchvision and
transformers classes, small configurations, random weights, no downloads), captured whole by
`dynamo.jit` and compiled with joint tracing + partitioning (graphs run op by op)."""
import pytest
import torch

from tests.training.harness import check_training

# BatchNorm over few elements is ill-conditioned: eager fp32 itself then strays from an fp64
# reference by more than these tolerances. Inputs are sized so that it does not.
LOOSE = {"rtol": 1e-3, "atol": 1e-4}


def _vision(name):
    import torchvision
    from torchvision.models import convnext, swin_transformer, vision_transformer
    if name == "resnet18":
        return torchvision.models.resnet18(num_classes=10), torch.randn(4, 3, 64, 64)
    if name == "mobilenet_v3_large":
        return (torchvision.models.mobilenet_v3_large(num_classes=10, width_mult=0.5),
                torch.randn(4, 3, 64, 64))
    if name == "vit_b_16":
        model = vision_transformer.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                                     num_heads=2, hidden_dim=32, mlp_dim=64,
                                                     num_classes=10)
        return model, torch.randn(2, 3, 32, 32)
    if name == "convnext_tiny":
        settings = [convnext.CNBlockConfig(16, 32, 1), convnext.CNBlockConfig(32, None, 1)]
        return convnext.ConvNeXt(settings, num_classes=10), torch.randn(2, 3, 32, 32)
    if name == "swin_t":
        model = swin_transformer.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2],
                                                 num_heads=[2, 4], window_size=[4, 4],
                                                 num_classes=10)
        return model, torch.randn(2, 3, 32, 32)
    raise KeyError(name)


VISION = ["resnet18", "mobilenet_v3_large", "vit_b_16", "convnext_tiny", "swin_t"]


@pytest.mark.parametrize("name", VISION)
def test_torchvision_model(name):
    torch.manual_seed(0)
    model, images = _vision(name)
    check_training(model.train(), images, steps=2, tolerance=LOOSE, graphs=1)


def _text(name):
    import transformers as hf
    small = dict(vocab_size=99, max_position_embeddings=64)
    if name == "bert":
        config = hf.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, **small)
        return hf.BertModel(config), "mask"
    if name.startswith("gpt2"):
        config = hf.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=99, n_positions=64,
                               bos_token_id=0, eos_token_id=0)
        return hf.GPT2LMHeadModel(config), "labels" if name.endswith("labels") else "ids"
    if name == "t5":
        config = hf.T5Config(d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                             vocab_size=99, decoder_start_token_id=0)
        return hf.T5Model(config), "decoder"
    if name.startswith("llama"):
        config = hf.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                num_attention_heads=2, num_key_value_heads=1, **small)
        return hf.LlamaForCausalLM(config), "labels" if name.endswith("labels") else "ids"
    if name == "distilbert":
        config = hf.DistilBertConfig(dim=32, hidden_dim=64, n_layers=2, n_heads=2, **small)
        return hf.DistilBertModel(config), "mask"
    if name == "vit":
        config = hf.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=64, image_size=32, patch_size=8)
        return hf.ViTModel(config), "pixels"
    raise KeyError(name)


# Expected graph counts (None: any number). With `labels`, the models call
# `self.loss_function`, whose `logger.warning_once` (an lru_cache descriptor) capture cannot
# trace yet; T5 deep-copies its config in forward; GPT-2 and Llama currently capture in 3
# graphs. Those run partly eagerly with inner frames compiled separately; gradients must match
# all the same. Graph counts are the capture tests' business; these are reported to the lead.
TEXT = {"bert": 1, "gpt2": None, "gpt2_labels": None, "t5": None, "llama": None,
        "llama_labels": None, "distilbert": 1, "vit": 1}


def _keywords(kind):
    ids = torch.randint(1, 99, (2, 12))
    if kind == "mask":
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if kind == "labels":
        return {"input_ids": ids, "labels": ids}
    if kind == "ids":
        return {"input_ids": ids}
    if kind == "decoder":
        return {"input_ids": ids, "decoder_input_ids": ids[:, :6]}
    return {"pixel_values": torch.randn(2, 3, 32, 32)}


@pytest.mark.parametrize("name", sorted(TEXT))
def test_transformers_model(name):
    torch.manual_seed(0)
    model, kind = _text(name)
    loss = (lambda output: output.loss) if kind == "labels" else None
    arguments = {"loss": loss} if loss else {}
    check_training(model.train(), steps=2, keywords=_keywords(kind), tolerance=LOOSE,
                   graphs=TEXT[name], **arguments)
