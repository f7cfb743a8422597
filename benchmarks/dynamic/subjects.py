"""Stage "subjects": what the dynamic-shapes benchmarks call, and with which inputs per size.

Input: a subject name, a device and a size (a batch size, or a sequence length for BERT).
Output: a `Subject`: the callable (a function, or a model from the zoo's catalog with seeded
random weights, eval mode) and `inputs(size)`, the positional arguments of one call of that
size. Models come from `benchmarks.zoo.catalog`; the two this benchmark adds (a small MLP and
a small `nn.TransformerEncoder`, no transformers needed) are registered there as
`dynamic/mlp` and `dynamic/encoder` when this module is imported.

Sweep subjects: `function` (pointwise + reductions, no parameters), `mlp`, `resnet18` (the
zoo's torchvision resnet18 on 32x32 images, so that batch 256 stays affordable on a CPU),
`encoder`. BERT subject: the zoo's `bert` (BertForMaskedLM, hidden 256, 4 layers) on the CPU,
`bert-base` on a GPU, called with token ids and an attention mask of one sequence length.
"""
from __future__ import annotations

import dataclasses
import importlib.util
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from benchmarks.zoo import catalog
from benchmarks.zoo.catalog import Workload, register

MLP_WIDTH = 256
FUNCTION_WIDTH = 512
ENCODER_WIDTH, ENCODER_TOKENS = 128, 32
IMAGE_SIDE = 32
BERT_BATCH = 2


@dataclasses.dataclass
class Subject:
    """One thing to call at many sizes: `target(*inputs(size))`."""

    name: str
    target: Callable
    inputs: Callable[[int], tuple]
    description: str


def pointwise_reduction(x, weight, bias):
    """The sweep's function: a fused pointwise chain feeding a softmax and two reductions."""
    y = F.gelu(x * weight + bias)
    return (y.softmax(-1) * x).sum(-1) + y.amax(-1)


def _mlp(batch: int, training: bool) -> Workload:
    model = torch.nn.Sequential(
        torch.nn.Linear(MLP_WIDTH, 512), torch.nn.GELU(), torch.nn.Linear(512, 512),
        torch.nn.GELU(), torch.nn.Linear(512, 10))
    return Workload(model, (torch.randn(batch, MLP_WIDTH),), {}, _no_loss)


def _encoder(batch: int, training: bool) -> Workload:
    layer = torch.nn.TransformerEncoderLayer(ENCODER_WIDTH, nhead=4, dim_feedforward=512,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    return Workload(model, (torch.randn(batch, ENCODER_TOKENS, ENCODER_WIDTH),), {}, _no_loss)


def _no_loss(output, targets: dict) -> torch.Tensor:
    raise NotImplementedError("the dynamic-shapes entries are for inference only")


register("dynamic/mlp", "torch", "MLP 256-512-512-10, GELU", group="dynamic")(_mlp)
register("dynamic/encoder", "torch",
         "nn.TransformerEncoder, width 128, 2 layers, 4 heads, 32 tokens",
         group="dynamic")(_encoder)

SWEEP_SUBJECTS = ("function", "mlp", "resnet18", "encoder")
_NEEDS = {"resnet18": "torchvision", "bert": "transformers", "bert-base": "transformers"}


def missing_dependency(name: str) -> Optional[str]:
    """The package subject `name` needs and this environment lacks, else None."""
    package = _NEEDS.get(name)
    if package and importlib.util.find_spec(package) is None:
        return package
    return None


def _generator(size: int) -> torch.Generator:
    return torch.Generator().manual_seed(1000 + size)


def sweep_subject(name: str, device: str) -> Subject:
    """A batch-size subject; inputs are seeded per size, so every variant sees the same."""
    if name == "function":
        weight = torch.randn(FUNCTION_WIDTH, generator=_generator(0)).to(device)
        bias = torch.randn(FUNCTION_WIDTH, generator=_generator(1)).to(device)

        def function_inputs(batch: int) -> tuple:
            x = torch.randn(batch, FUNCTION_WIDTH, generator=_generator(batch))
            return (x.to(device), weight, bias)
        return Subject(name, pointwise_reduction, function_inputs,
                       f"gelu(x*w+b) -> softmax*x sum + amax, width {FUNCTION_WIDTH}")
    shapes = {"mlp": ("dynamic/mlp", (MLP_WIDTH,)),
              "resnet18": ("resnet18", (3, IMAGE_SIDE, IMAGE_SIDE)),
              "encoder": ("dynamic/encoder", (ENCODER_TOKENS, ENCODER_WIDTH))}
    if name not in shapes:
        raise KeyError(f"unknown sweep subject {name!r}; known: {', '.join(SWEEP_SUBJECTS)}")
    entry, shape = shapes[name]
    model = catalog.build_workload(entry, device=device, batch=1).model

    def model_inputs(batch: int) -> tuple:
        return (torch.randn(batch, *shape, generator=_generator(batch)).to(device),)
    description = catalog.spec(entry).description
    if name == "resnet18":
        description += f", {IMAGE_SIDE}x{IMAGE_SIDE} images"
    return Subject(name, model, model_inputs, description)


class _BertCall(torch.nn.Module):
    """BERT called with (ids, mask) positionally, returning the logits tensor."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def bert_subject(entry: str, device: str, batch: int = BERT_BATCH) -> Subject:
    """The zoo's BERT entry `entry`; `inputs(length)` are ids and an all-ones mask."""
    model = catalog.build_workload(entry, device=device, batch=1).model
    vocabulary = model.config.vocab_size

    def bert_inputs(length: int) -> tuple:
        ids = torch.randint(3, vocabulary, (batch, length), generator=_generator(length))
        return (ids.to(device), torch.ones_like(ids).to(device))
    return Subject(entry, _BertCall(model).eval(), bert_inputs,
                   f"{catalog.spec(entry).description}; batch {batch}")
