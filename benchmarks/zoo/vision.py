"""Stage "catalog", torchvision entries: 13 image classifiers, a segmentation model and a
detection model, with random weights.

Input: a batch size and whether to train. Output: a CPU float32 `Workload`. Classifiers: a
batch of 224x224 RGB images, cross-entropy against random labels in training.
`lraspp_mobilenet_v3_large` (semantic segmentation): the same images, per-pixel cross-entropy
against random classes. `fasterrcnn_mobilenet_v3_large_320_fpn` (detection, inference only):
a list of at least two images of different sizes (variable-size inputs: the model resizes and
batches them itself, with data-dependent steps such as non-maximum suppression); its training
step samples proposals at random, so two runs of it are not comparable and it has no training
entry. Its weights stay float32 in the GPU suites, under autocast (`casts=False`).
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


SEGMENTATION_CLASSES = 21


def _segmentation(batch: int, training: bool) -> Workload:
    import torchvision
    model = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=SEGMENTATION_CLASSES)
    images = torch.randn(batch, 3, IMAGE_SIZE, IMAGE_SIZE)
    classes = torch.randint(0, SEGMENTATION_CLASSES, (batch, IMAGE_SIZE, IMAGE_SIZE))
    return Workload(model, (images,), {}, _pixel_cross_entropy, {"classes": classes})


def _pixel_cross_entropy(output, targets: dict) -> torch.Tensor:
    return F.cross_entropy(output["out"].float(), targets["classes"])


DETECTION_SIZES = ((240, 320), (300, 200), (256, 256), (320, 240))


def _detection(batch: int, training: bool) -> Workload:
    import torchvision
    if training:
        raise ValueError("fasterrcnn_mobilenet_v3_large_320_fpn: inference only (its "
                         "training step samples proposals at random)")
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=91)
    images = [torch.rand(3, *DETECTION_SIZES[k % len(DETECTION_SIZES)])
              for k in range(max(batch, 2))]    # at least two sizes, even at batch 1
    return Workload(model, (images,), {}, _no_loss)


def _no_loss(output, targets: dict) -> torch.Tensor:
    raise ValueError("no training loss for this entry")


register("lraspp_mobilenet_v3_large", "torchvision",
         "torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None)")(
    _segmentation)
register("fasterrcnn_mobilenet_v3_large_320_fpn", "torchvision",
         "torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None), "
         "inference only, images of different sizes", trains=False, casts=False)(_detection)
