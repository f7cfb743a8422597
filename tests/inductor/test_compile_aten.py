"""`compile_aten`, the entry the training side uses: the boxed calling convention, output
strides defaulting to the graph's recorded ones, `prims` views, and forward and backward graphs
of normalisation and attention layers compiled through `inductor.autograd.compile_training`."""
import copy

import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

import inductor
from inductor.autograd import compile_training

functional = torch.nn.functional


def _graph_and_inputs():
    def function(x, y):
        return (torch.relu(x) + y).sum(0), x * 2

    inputs = [torch.randn(8, 5), torch.randn(8, 5)]
    return make_fx(function)(*inputs), inputs, function


def test_positional_and_argument_list_calls_agree():
    graph, inputs, function = _graph_and_inputs()
    compiled = inductor.compile_aten(graph, inputs)
    expected = function(*inputs)
    torch.testing.assert_close(tuple(compiled(*inputs)), expected)
    arguments = list(inputs)
    results = compiled.with_argument_list(arguments)
    assert arguments == [], "the boxed call leaves the caller's list empty"
    torch.testing.assert_close(tuple(results), expected)
    assert not getattr(compiled, "takes_argument_list", False), "positional stays default"


def test_argument_list_call_keeps_no_input_alive():
    """After a boxed call the inputs the list held are gone (the wrapper frees each after
    its last reader; nothing keeps a reference past the call)."""
    import weakref

    def function(x, y):
        return ((x.sin() + 1) @ y,)

    inputs = [torch.randn(16, 16), torch.randn(16, 16)]
    compiled = inductor.compile_aten(make_fx(function)(*inputs), inputs)
    arguments = [torch.randn(16, 16), torch.randn(16, 16)]
    references = [weakref.ref(value) for value in arguments]
    expected = function(*[value.clone() for value in arguments])
    results = compiled.with_argument_list(arguments)
    assert [reference() for reference in references] == [None, None]
    torch.testing.assert_close(results[0], expected[0])


def test_graphs_run_as_is_take_argument_lists_too(monkeypatch):
    graph, inputs, function = _graph_and_inputs()
    monkeypatch.setattr(inductor.config, "fallback_only", True)
    compiled = inductor.compile_aten(graph, inputs)
    assert compiled.report.reason
    arguments = list(inputs)
    torch.testing.assert_close(tuple(compiled.with_argument_list(arguments)), function(*inputs))
    assert arguments == []


@pytest.mark.parametrize("case", ["channels_last_convolution", "permuted", "expanded",
                                  "transposed_product"])
def test_output_strides_default_to_recorded_ones(case):
    weight = torch.randn(8, 4, 3, 3)
    functions = {
        "channels_last_convolution": (lambda x: torch.relu(functional.conv2d(x, weight,
                                                                               padding=1)),
                                      torch.randn(16, 4, 16, 16)),
        "permuted": (lambda x: (x * 2).permute(1, 0, 2), torch.randn(3, 4, 5)),
        "expanded": (lambda x: (x + 1).expand(3, 4), torch.randn(4)),
        "transposed_product": (lambda x: (x @ x.t()).t() + 1, torch.randn(6, 6)),
    }
    function, x = functions[case]
    graph = make_fx(lambda value: (function(value),))(x)
    compiled = inductor.compile_aten(graph, [x])
    result, expected = compiled(x)[0], function(x)
    torch.testing.assert_close(result, expected, atol=1e-4, rtol=1e-4)
    assert result.stride() == expected.stride()


@pytest.mark.parametrize("shape, dims", [([2, 3, 4], [1, 2]), ([2, 3, 1, 4], [1, 3]),
                                         ([3, 5, 4], [0, 2]), ([6, 3, 4], [1, 2])])
def test_prims_broadcast_in_dim_is_a_view(shape, dims):
    prims = torch.ops.prims
    x = torch.randn(3, 4) if shape != [3, 5, 4] else torch.randn(3, 1)[:, :1].expand(3, 4)

    def function(value):
        return (prims.broadcast_in_dim(value, shape, dims) * 2 + 1,)

    compiled = inductor.compile_aten(make_fx(function)(x), [x])
    assert compiled.report.fallback_ops == {}
    torch.testing.assert_close(compiled(x)[0], function(x)[0])


class _Attention(torch.nn.Module):
    def __init__(self, need_weights: bool):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(32, 4, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x):
        output, weights = self.attention(x, x, x, need_weights=self.need_weights)
        return output if weights is None else output + weights.sum()


TRAINING_MODULES = {
    "layer_norm": lambda: torch.nn.LayerNorm(32),
    "layer_norm_without_affine": lambda: torch.nn.LayerNorm(32, elementwise_affine=False),
    "linear_layer_norm_gelu": lambda: torch.nn.Sequential(
        torch.nn.Linear(32, 32), torch.nn.LayerNorm(32), torch.nn.GELU()),
    "attention": lambda: _Attention(need_weights=False),
    "attention_with_weights": lambda: _Attention(need_weights=True),
    "encoder_layer": lambda: torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0,
                                                              batch_first=True),
}


@pytest.mark.torch_compile
@pytest.mark.parametrize("name", list(TRAINING_MODULES))
def test_training_graphs_compile_and_match_eager(name, monkeypatch):
    """Forward and backward graphs through `compile_training(gm, inputs, compile_aten)`
    (a scheduler KeyError on such backward graphs was reported once). torch.compile only
    captures the graphs here (the FX tracer cannot trace these modules)."""
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    torch.manual_seed(0)
    module = TRAINING_MODULES[name]().train()
    reference = copy.deepcopy(module)
    x = torch.randn(3, 7, 32, requires_grad=True)
    graphs = []

    def backend(graph, example_inputs):
        graphs.append(graph)
        return compile_training(graph, example_inputs, inductor.compile_aten)

    compiled = torch.compile(module, backend=backend)
    x_reference = x.detach().clone().requires_grad_()
    result, expected = compiled(x), reference(x_reference)
    result = result[0] if isinstance(result, (tuple, list)) else result
    torch.testing.assert_close(result, expected, atol=1e-4, rtol=1e-4)
    gradient = torch.randn_like(expected)
    result.backward(gradient)
    expected.backward(gradient)
    torch.testing.assert_close(x.grad, x_reference.grad, atol=1e-4, rtol=1e-4)
    for (parameter_name, parameter), theirs in zip(module.named_parameters(),
                                                   reference.parameters()):
        torch.testing.assert_close(parameter.grad, theirs.grad, atol=1e-4, rtol=1e-4,
                                   msg=lambda text: f"{parameter_name}: {text}")
    assert graphs, "the backend compiled no graph"


@pytest.mark.torch_compile
def test_gpt2_block_trains_like_eager(monkeypatch):
    transformers = pytest.importorskip("transformers")
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_head=4, n_layer=1, n_positions=32,
                                     vocab_size=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0)
    model = transformers.GPT2Model(config).train()
    reference = copy.deepcopy(model)
    tokens = torch.randint(0, 64, (2, 12))
    compiled = torch.compile(model, backend=inductor.compile_fx)
    result = compiled(tokens).last_hidden_state
    expected = reference(tokens).last_hidden_state
    torch.testing.assert_close(result, expected, atol=1e-4, rtol=1e-4)
    result.pow(2).sum().backward()
    expected.pow(2).sum().backward()
    for (name, parameter), theirs in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(parameter.grad, theirs.grad, atol=1e-3, rtol=1e-3,
                                   msg=lambda text: f"{name}: {text}")
