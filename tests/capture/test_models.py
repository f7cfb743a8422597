"""Real models captured whole: one graph, no break, results equal to eager.

Transformers models are built from small configs with random weights and called the way users
call them (keyword arguments, `return_dict` left at its default, so they return a `ModelOutput`
that must come back as the same class with the same fields). Torchvision models run at 64x64
(224 where the architecture needs it is avoided by passing `image_size`). Each case runs eager
and jitted twice (compile, then cache hit) through `tests.capture.differential.check`.
"""
import pytest
import torch

from tests.capture.differential import check


def _transformers_model(model_class: str, config_class: str, **config):
    transformers = pytest.importorskip("transformers")
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


def bart():
    """Its config's `get_text_config` copies the config and re-sets attributes through
    huggingface_hub's strict-dataclass validator, which looks the annotation's origin up in a
    dict keyed by classes (`types.UnionType`): keys of library dicts once missed, and the
    traced validator raised where eager's passes."""
    model = _transformers_model("BartModel", "BartConfig", d_model=64, encoder_layers=2,
                                decoder_layers=2, encoder_attention_heads=4,
                                decoder_attention_heads=4, encoder_ffn_dim=128,
                                decoder_ffn_dim=128, vocab_size=1000,
                                max_position_embeddings=64)
    ids = _ids()
    return model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def deberta_v2():
    model = _transformers_model("DebertaV2Model", "DebertaV2Config", hidden_size=64,
                                num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=128, vocab_size=1000)
    ids = _ids()
    return model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def mistral():
    model = _transformers_model("MistralForCausalLM", "MistralConfig", hidden_size=64,
                                intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)
    return model, {"input_ids": _ids()}


def _vision(name: str, **options):
    def build():
        torchvision = pytest.importorskip("torchvision")
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None, **options).eval()
        image = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(2))
        return model, {"x": image}
    return build


MODELS = {
    "BertModel": bert, "GPT2LMHeadModel": gpt2, "T5Model": t5, "LlamaForCausalLM": llama,
    "DistilBertModel": distilbert, "ViTModel": vit, "BartModel": bart,
    "DebertaV2Model": deberta_v2, "MistralForCausalLM": mistral,
    "resnet18": _vision("resnet18"), "mobilenet_v3_large": _vision("mobilenet_v3_large"),
    "vit_b_16": _vision("vit_b_16", image_size=64), "convnext_tiny": _vision("convnext_tiny"),
    "swin_t": _vision("swin_t"),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_model_captured_whole(name):
    model, inputs = MODELS[name]()
    with torch.no_grad():
        check(model, graphs=1, **inputs)


@pytest.mark.parametrize("name", ["BertModel", "resnet18"])
def test_model_with_grad_enabled(name):
    """Outside no_grad the outputs require grad, exactly as eager's do."""
    model, inputs = MODELS[name]()
    check(model, graphs=1, **inputs)


def test_model_output_rebuilt_as_its_class():
    """The returned ModelOutput is a fresh instance of the same dataclass: attributes, keys,
    indexing by position and by name all agree with eager."""
    import dynamo
    model, inputs = bert()
    with torch.no_grad():
        expected = model(**inputs)
        actual = dynamo.jit(model, backend="eager")(**inputs)
    assert type(actual) is type(expected)
    assert list(actual.keys()) == list(expected.keys())
    torch.testing.assert_close(actual[0], expected[0])
    torch.testing.assert_close(actual["pooler_output"], expected.pooler_output)
    assert actual.hidden_states is None and actual.attentions is None
    assert len(actual.to_tuple()) == len(expected.to_tuple())


def test_config_change_recompiles():
    """Config attributes the trace read are guarded: flipping `config.return_dict` compiles
    again and returns what eager returns (a tuple), flipping it back reuses the first graph."""
    import dynamo
    from tests.capture.differential import assert_same, break_reasons
    model, inputs = bert()
    counting = dynamo.CountingBackend()
    jitted = dynamo.jit(model, backend=counting)
    with torch.no_grad():
        assert_same(model(**inputs), jitted(**inputs))
        model.config.return_dict = False
        tupled = jitted(**inputs)
        assert type(tupled) is tuple
        assert_same(model(**inputs), tupled)
        model.config.return_dict = True
        assert_same(model(**inputs), jitted(**inputs))
    assert counting.frame_count == 2 and not break_reasons(jitted)
