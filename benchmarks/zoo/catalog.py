"""Stage "catalog": the zoo's model entries and the suites that group them.

Input: a model name, a device, a dtype, a batch size and whether to train. Output: a
`Workload`: the model (random weights, seeded, no downloads) on that device and dtype, example
inputs as args/kwargs, and `loss(output, targets)` for a training step. Entries live in
`vision` (torchvision) and `text` (transformers); they register themselves here. This is the
one model catalog of `benchmarks/`: the stage benchmarks' own configs (`variants`: capture's
tiny models, inductor's default-size ones, training's, the soundness script's) are entries
too, named `group/model` and kept out of the zoo's suites.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import torch

SEED = 0


@dataclasses.dataclass
class Workload:
    """One model ready to run: `model(*args, **kwargs)`, then `loss(output, targets)`."""

    model: torch.nn.Module
    args: tuple
    kwargs: dict
    loss: Callable[[Any, dict], torch.Tensor]
    targets: dict = dataclasses.field(default_factory=dict)

    def to(self, device: str, dtype: Optional[torch.dtype]) -> "Workload":
        """Move model and inputs to `device`; cast floating tensors to `dtype` when given."""
        if dtype is None:
            self.model.to(device=device)
        else:
            self.model.to(device=device, dtype=dtype)
        self.args = cast_tensors(self.args, device, dtype)
        self.kwargs = cast_tensors(self.kwargs, device, dtype)
        self.targets = cast_tensors(self.targets, device, dtype)
        return self


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A catalog entry: `build(batch, training, **options)` returns a CPU float32 `Workload`.
    `group` "zoo" entries make the suites; the others serve one stage benchmark each."""

    name: str
    family: str  # "torchvision" or "transformers"
    build: Callable[..., Workload]
    description: str = ""
    group: str = "zoo"
    trains: bool = True    # False: inference only (no comparable training step)
    # False: keep float32 weights and autocast to a suite's half dtype instead of casting the
    # model (torchvision's detection ops, nms among them, have no bfloat16 kernels; under
    # autocast torchvision runs them in float32, as a user of mixed precision would)
    casts: bool = True


_registry: dict[str, ModelSpec] = {}


def register(name: str, family: str, description: str = "", group: str = "zoo",
             trains: bool = True, casts: bool = True):
    """Decorator: register `build(batch, training, **options) -> Workload` under `name`."""
    def decorate(build):
        _registry[name] = ModelSpec(name, family, build, description, group, trains, casts)
        return build
    return decorate


def _load_entries() -> None:
    from benchmarks.zoo import vision, text, variants  # noqa: F401  (entries register on import)


def names(group: Optional[str] = "zoo") -> list[str]:
    """The registered model names of `group` (every group: None), torchvision first, in
    registration order."""
    _load_entries()
    return [name for name, entry in _registry.items() if group in (None, entry.group)]


def spec(name: str) -> ModelSpec:
    """The entry called `name`; unknown names raise `KeyError` listing the known ones."""
    _load_entries()
    if name not in _registry:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(_registry)}")
    return _registry[name]


def build_workload(name: str, device: str = "cpu", dtype: Optional[torch.dtype] = None,
                   batch: int = 1, training: bool = False, **options) -> Workload:
    """Build `name` with seeded random weights, in train (dropout off) or eval mode, on
    `device`, with floating parameters and inputs cast to `dtype` when given. `options` go to
    the entry's builder (the `training/` entries take `size`: image side or tokens)."""
    torch.manual_seed(SEED)
    workload = spec(name).build(batch, training, **options)
    model = workload.model
    if training:
        model.train()
        disable_randomness(model)
    else:
        model.eval()
    return workload.to(device, dtype)


def disable_randomness(model: torch.nn.Module) -> None:
    """Set every dropout and stochastic-depth probability to zero, so that one training step
    is deterministic and comparable across compilers (BatchNorm keeps its batch statistics)."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
        elif type(module).__name__ == "StochasticDepth":
            module.p = 0.0


def cast_tensors(value, device: Optional[str], dtype: Optional[torch.dtype]):
    """`value` with every tensor moved to `device` and every floating tensor cast to `dtype`,
    through tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        if dtype is not None and value.is_floating_point():
            return value.to(device=device, dtype=dtype)
        return value.to(device=device)
    if isinstance(value, (tuple, list)):
        return type(value)(cast_tensors(item, device, dtype) for item in value)
    if isinstance(value, dict):
        return {key: cast_tensors(item, device, dtype) for key, item in value.items()}
    return value


# Suites: which models and modes a named run covers. Each item: (model, mode).
_CPU_TRAINING = ("resnet18", "mobilenet_v3_large", "bert", "gpt2")
_GPU_INFERENCE = ("resnet50", "mobilenet_v3_large", "vit_b_16", "bert-base", "gpt2-base",
                  "t5-small", "deberta-v2", "mistral", "bart")  # the last three: small configs
_GPU_TRAINING = ("resnet50", "mobilenet_v3_large", "bert-base", "gpt2-base")
_SMOKE = ("squeezenet1_1", "bert")


def suite(name: str) -> list[tuple[str, str]]:
    """The (model, mode) pairs of suite `name`: `cpu` (every model that is not a full-size
    GPU config, inference; a few small ones in training too), `cpu-inference`, `gpu`
    (full-size configs, inference and training), `gpu-zoo` (every zoo model, inference, and
    every one that trains, training: issue 25's complete GPU zoo, run in chunks with
    `--models`) or `smoke` (two small models)."""
    small = [model for model in names() if not _is_full_size(model)]
    if name == "cpu":
        return ([(model, "inference") for model in small]
                + [(model, "training") for model in _CPU_TRAINING])
    if name == "cpu-inference":
        return [(model, "inference") for model in small]
    if name == "gpu":
        return ([(model, "inference") for model in _GPU_INFERENCE]
                + [(model, "training") for model in _GPU_TRAINING])
    if name == "gpu-zoo":
        every = names()
        return ([(model, "inference") for model in every]
                + [(model, "training") for model in every if spec(model).trains])
    if name == "smoke":
        return [(model, "inference") for model in _SMOKE]
    raise KeyError(f"unknown suite {name!r}; known: {', '.join(SUITES)}")


def _is_full_size(model: str) -> bool:
    return spec(model).description.startswith("full-size")


SUITES = ("cpu", "cpu-inference", "gpu", "gpu-zoo", "smoke")
