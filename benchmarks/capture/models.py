"""The eleven models of issue 4 for the capture benchmark (small configs, random weights; the
same shapes as `tests/capture/test_models.py`): name -> builder returning (model, keyword
inputs), the model in eval mode.
"""
import torch


def _transformers_model(model_class: str, config_class: str, **config):
    import transformers
    torch.manual_seed(0)
    return getattr(transformers, model_class)(getattr(transformers, config_class)(**config)) \
        .eval()


def _ids(vocabulary: int = 1000, shape=(2, 16)) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.randint(0, vocabulary, shape, generator=generator)


def bert():
    model = _transformers_model("BertModel", "BertConfig", hidden_size=64, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=128)
    ids = _ids()
    return model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def gpt2():
    model = _transformers_model("GPT2LMHeadModel", "GPT2Config", n_embd=64, n_layer=2,
                                n_head=4)
    return model, {"input_ids": _ids()}


def t5():
    model = _transformers_model("T5Model", "T5Config", d_model=64, d_ff=128, num_layers=2,
                                num_heads=4, d_kv=16)
    ids = _ids()
    return model, {"input_ids": ids, "decoder_input_ids": ids}


def llama():
    model = _transformers_model("LlamaForCausalLM", "LlamaConfig", hidden_size=64,
                                intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)
    return model, {"input_ids": _ids()}


def distilbert():
    model = _transformers_model("DistilBertModel", "DistilBertConfig", dim=64, n_layers=2,
                                n_heads=4, hidden_dim=128)
    ids = _ids()
    return model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def vit():
    model = _transformers_model("ViTModel", "ViTConfig", hidden_size=64, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=128, image_size=32,
                                patch_size=8)
    return model, {"pixel_values": torch.randn(2, 3, 32, 32,
                                               generator=torch.Generator().manual_seed(2))}


def _vision(name: str, **options):
    def build():
        import torchvision
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None, **options).eval()
        image = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(2))
        return model, {"x": image}
    return build


MODELS = {
    "BertModel": bert, "GPT2LMHeadModel": gpt2, "T5Model": t5, "LlamaForCausalLM": llama,
    "DistilBertModel": distilbert, "ViTModel": vit,
    "resnet18": _vision("resnet18"), "mobilenet_v3_large": _vision("mobilenet_v3_large"),
    "vit_b_16": _vision("vit_b_16", image_size=64), "convnext_tiny": _vision("convnext_tiny"),
    "swin_t": _vision("swin_t"),
}
