"""Stage "catalog", torchvision entries: 13 image classifiers with random weights.

Input: a batch size and whether to train. Output: a CPU float32 `Workload` whose input is a
batch of 224x224 RGB images and whose training loss is cross-entropy against random labels.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.zoo.catalog import Workload, register

IMAGE_SIZE = 224
CLASSES = 1000


def _classifier(constructor_name: str, **options):
    def build(batch: int, training: bool) -> Workload:
        import torchvision
        constructor = getattr(torchvision.models, constructor_name)
        model = constructor(weights=None, num_classes=CLASSES, **options)
        images = torch.randn(batch, 3, IMAGE_SIZE, IMAGE_SIZE)
        labels = torch.randint(0, CLASSES, (batch,))
        return Workload(model, (images,), {}, _cross_entropy, {"labels": labels})
    return build


def _cross_entropy(output, targets: dict) -> torch.Tensor:
    return F.cross_entropy(output.float(), targets["labels"])


_MODELS = {
    "resnet18": {},
    "resnet50": {},
    "mobilenet_v2": {},
    "mobilenet_v3_large": {},
    "efficientnet_b0": {},
    "densenet121": {},
    "convnext_tiny": {},
    "vit_b_16": {},
    "swin_t": {},
    "regnet_y_400mf": {},
    "shufflenet_v2_x1_0": {},
    "squeezenet1_1": {},
    # aux_logits off: one output tensor in training as in inference; init_weights kept.
    "googlenet": {"aux_logits": False, "init_weights": True},
}

for _name, _options in _MODELS.items():
    register(_name, "torchvision", f"torchvision.models.{_name}(weights=None)")(
        _classifier(_name, **_options))
