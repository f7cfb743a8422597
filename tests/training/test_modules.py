"""Differential training tests on nn building blocks, captured by `dynamo.jit` and by
`torch.fx.symbolic_trace`: outputs, loss, every parameter's .grad and every buffer vs eager."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.training.harness import check_training


def batch(*shape, grad=False):
    tensor = torch.randn(*shape)
    return tensor.requires_grad_(grad)


class Residual(nn.Module):
    """A ResNet basic block."""

    def __init__(self, channels=4):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


class Attention(nn.Module):
    """Hand-written causal self-attention (softmax(QK^T/sqrt(d)) V)."""

    def __init__(self, width=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        batch_size, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=-1)
        shape = (batch_size, length, self.heads, width // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / (width // self.heads) ** 0.5
        mask = torch.ones(length, length, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        mixed = scores.softmax(-1) @ v
        return self.out(mixed.transpose(1, 2).reshape(batch_size, length, width))


class SdpaAttention(Attention):
    """The same through F.scaled_dot_product_attention."""

    def forward(self, x):
        batch_size, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=-1)
        shape = (batch_size, length, self.heads, width // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        mixed = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(mixed.transpose(1, 2).reshape(batch_size, length, width))


class Tied(nn.Module):
    """One Linear used twice, and an embedding tied to the output projection."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(20, 8)
        self.hidden = nn.Linear(8, 8)

    def forward(self, ids):
        h = self.embedding(ids)
        h = torch.tanh(self.hidden(torch.tanh(self.hidden(h))))
        return h @ self.embedding.weight.t()


class InPlaceChain(nn.Module):
    """In-place updates on intermediates and in-place activations."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        h = self.linear(x)
        h.mul_(2).add_(1)
        h[:, 0].add_(x[:, 1])
        F.relu_(h)
        g = x * 2
        g.add_(1)
        return h * 3 + F.silu(g, inplace=True)


class Classifier(nn.Module):
    """Cross entropy computed inside the graph, with integer labels as an input."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 5))

    def forward(self, x, labels):
        return F.cross_entropy(self.body(x), labels)


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, groups=8, padding=1), nn.Hardswish(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))


MODULES = {
    "linear": (lambda: nn.Linear(6, 4), lambda: (batch(5, 6),)),
    "mlp_relu": (lambda: nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)),
                 lambda: (batch(5, 6),)),
    "mlp_gelu_tanh": (lambda: nn.Sequential(nn.Linear(6, 16), nn.GELU(approximate="tanh"),
                                            nn.Linear(16, 3)), lambda: (batch(5, 6),)),
    "mlp_sigmoid_tanh": (lambda: nn.Sequential(nn.Linear(6, 8), nn.Sigmoid(), nn.Linear(8, 8),
                                               nn.Tanh()), lambda: (batch(5, 6),)),
    "activations": (lambda: nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.1), nn.ELU(),
                                          nn.SiLU(), nn.Mish(), nn.Softplus(), nn.PReLU()),
                    lambda: (batch(5, 6),)),
    "relu_inplace": (lambda: nn.Sequential(nn.Linear(6, 8), nn.ReLU(inplace=True),
                                           nn.Linear(8, 2), nn.ReLU6(inplace=True)),
                     lambda: (batch(5, 6),)),
    "conv_relu": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()),
                  lambda: (batch(2, 3, 8, 8),)),
    "conv_bn_relu_train": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4),
                                                 nn.ReLU()), lambda: (batch(2, 3, 8, 8),)),
    "conv_bn_eval": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval(),
                     lambda: (batch(2, 3, 8, 8),)),
    "batchnorm1d": (lambda: nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8)),
                    lambda: (batch(5, 6),)),
    "batchnorm_no_affine": (lambda: nn.BatchNorm2d(3, affine=False),
                            lambda: (batch(2, 3, 4, 4, grad=True),)),
    "dropout_train": (lambda: nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.3), nn.Linear(16, 3)),
                      lambda: (batch(5, 6),)),
    "dropout_eval": (lambda: nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.3),
                                           nn.Linear(16, 3)).eval(), lambda: (batch(5, 6),)),
    "layernorm": (lambda: nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8)),
                  lambda: (batch(2, 5, 6),)),
    "groupnorm": (lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.GroupNorm(2, 4)),
                  lambda: (batch(2, 3, 4, 4),)),
    "embedding": (lambda: nn.Embedding(10, 4), lambda: (torch.randint(0, 10, (3, 5)),)),
    "embedding_padding": (lambda: nn.Embedding(10, 4, padding_idx=0),
                          lambda: (torch.tensor([[0, 1, 2, 0], [3, 0, 4, 5]]),)),
    "attention": (Attention, lambda: (batch(2, 5, 16),)),
    "sdpa_attention": (SdpaAttention, lambda: (batch(2, 5, 16),)),
    "multihead_attention": (lambda: _SelfAttention(), lambda: (batch(2, 5, 16),)),
    "residual_block": (Residual, lambda: (batch(2, 4, 6, 6),)),
    "small_cnn": (small_cnn, lambda: (batch(2, 3, 8, 8),)),
    "conv1d": (lambda: nn.Sequential(nn.Conv1d(3, 4, 3, stride=2), nn.Tanh()),
               lambda: (batch(2, 3, 9),)),
    "conv_transpose": (lambda: nn.Sequential(nn.ConvTranspose2d(3, 2, 3, stride=2)),
                       lambda: (batch(2, 3, 4, 4),)),
    "upsample_pool": (lambda: nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear"),
                                            nn.AvgPool2d(2)),
                      lambda: (batch(2, 3, 4, 4, grad=True),)),
    "tied_weights": (Tied, lambda: (torch.randint(0, 20, (2, 6)),)),
    "inplace_chain": (InPlaceChain, lambda: (batch(4, 8, grad=True),)),
    "cross_entropy": (Classifier, lambda: (batch(5, 6), torch.randint(0, 5, (5,)))),
    "rmsnorm_instancenorm": (lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.InstanceNorm2d(4),
                                                   nn.Flatten(2), nn.RMSNorm(16)),
                             lambda: (batch(2, 3, 4, 4),)),
    "pixel_shuffle_conv3d": (lambda: nn.Sequential(nn.Conv3d(2, 4, 2), nn.Flatten(1, 2),
                                                   nn.PixelShuffle(2)),
                             lambda: (batch(2, 2, 3, 5, 5),)),
    "lstm": (lambda: _Recurrent(nn.LSTM(6, 8, batch_first=True)), lambda: (batch(2, 5, 6),)),
    "gru": (lambda: _Recurrent(nn.GRU(6, 8, num_layers=2)), lambda: (batch(5, 2, 6),)),
    # Traced as gates: torch's CPU decomposition would pick oneDNN's fused layer, whose
    # backward needs a workspace the traced forward does not produce.
    "lstm_deep": (lambda: _Recurrent(nn.LSTM(6, 8, num_layers=2, bidirectional=True,
                                             proj_size=4)), lambda: (batch(5, 2, 6),)),
    "transformer_encoder_layer": (lambda: nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1,
                                                                     batch_first=True),
                                  lambda: (batch(2, 5, 16),)),
    "losses": (lambda: _Losses(), lambda: (batch(4, 6), torch.rand(4, 6))),
}


class _Recurrent(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def forward(self, x):
        return self.cell(x)[0]


class _Losses(nn.Module):
    """Several losses computed in the graph from a linear layer's output."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 6)

    def forward(self, x, target):
        y = self.linear(x)
        return (F.mse_loss(y, target) + F.smooth_l1_loss(y, target) + F.l1_loss(y, target)
                + F.binary_cross_entropy_with_logits(y, target)
                + F.kl_div(y.log_softmax(-1), target.softmax(-1), reduction="batchmean"))


class _SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


NOT_CAPTURED: set = set()


@pytest.mark.parametrize("name", sorted(set(MODULES) - NOT_CAPTURED))
def test_module_dynamo(name):
    build, inputs = MODULES[name]
    torch.manual_seed(0)
    check_training(build(), *inputs(), capture="dynamo")


FX_TRACEABLE = ["linear", "mlp_relu", "mlp_gelu_tanh", "conv_bn_relu_train", "dropout_train",
                "layernorm", "embedding", "residual_block", "tied_weights", "inplace_chain",
                "cross_entropy", "small_cnn", "batchnorm1d", "gru", "losses",
                "lstm", "lstm_deep"]


@pytest.mark.parametrize("name", FX_TRACEABLE)
def test_module_fx(name):
    build, inputs = MODULES[name]
    torch.manual_seed(0)
    check_training(build(), *inputs(), capture="fx")


INDUCTOR = ["mlp_relu", "mlp_gelu_tanh", "conv_bn_relu_train", "dropout_train", "layernorm",
            "embedding", "residual_block", "attention", "inplace_chain", "cross_entropy",
            "batchnorm1d", "small_cnn"]
# Cases whose forward and backward graphs the code generator compiles today; the others hit
# inductor lowering gaps (prims.broadcast_in_dim with int sizes in BatchNorm's backward, a
# scheduler KeyError on layer norm and attention) and run those graphs through eager kernels,
# which must still give eager's gradients.
GENERATED = {"mlp_relu", "mlp_gelu_tanh", "dropout_train", "embedding", "inplace_chain",
             "cross_entropy"}


@pytest.mark.parametrize("name", INDUCTOR)
def test_module_inductor(name):
    """The same differential check with the real code generator compiling both graphs."""
    import inductor
    build, inputs = MODULES[name]
    torch.manual_seed(0)
    backend = check_training(build(), *inputs(), capture="dynamo",
                             compile_inner=inductor.compile_aten)
    if name in GENERATED:
        for variant in backend.training_variants:
            for compiled in (variant.compiled_forward, variant.compiled_backward):
                assert compiled.report.reason is None, compiled.report.reason
