"""Stage "compile": the backend registry.

Input: an FX `GraphModule` and example inputs. Output: a callable computing the same thing.
A backend is any callable with torch's signature `backend(gm, example_inputs) -> callable`;
names registered here can be passed as `dynamo.jit(..., backend="name")`. This is the only
place `dynamo` reaches `inductor`, and only when that backend is asked for.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

Backend = Callable[[torch.fx.GraphModule, Sequence], Callable]

_registry: dict[str, Backend] = {}


def register_backend(name: str):
    """Decorator: register a backend function under `name`."""
    def register(backend: Backend) -> Backend:
        _registry[name] = backend
        return backend
    return register


def list_backends() -> list[str]:
    """Names accepted by `dynamo.jit(backend=...)`."""
    return sorted(_registry)


def lookup_backend(backend) -> Backend:
    """Resolve a backend name or callable; unknown names raise `ValueError`."""
    if callable(backend):
        return backend
    if isinstance(backend, str) and backend in _registry:
        return _registry[backend]
    raise ValueError(f"unknown backend {backend!r}: pass a callable "
                     f"backend(gm, example_inputs) or one of {list_backends()}")


@register_backend("eager")
def eager(gm: torch.fx.GraphModule, example_inputs: Sequence) -> Callable:
    """Run the captured FX graph as Python (isolates capture cost from code generation)."""
    return gm.forward


@register_backend("inductor")
def inductor(gm: torch.fx.GraphModule, example_inputs: Sequence, mode=None) -> Callable:
    """framejit's own code generator (C++/OpenMP on CPU, Triton on GPU); `mode` is
    `dynamo.jit`'s: "reduce-overhead" (CUDA graphs), "max-autotune"..."""
    import inductor as inductor_package  # imported only when asked for
    if mode in (None, "default"):
        return inductor_package.compile_fx(gm, example_inputs)
    return inductor_package.compile_fx(gm, example_inputs, mode=mode)


def with_mode(backend, mode) -> Backend:
    """The backend `dynamo.jit(backend=..., mode=...)` compiles with: modes are the inductor
    backend's; another backend with a mode is an error."""
    if mode in (None, "default"):
        return lookup_backend(backend)
    if lookup_backend(backend) is not inductor:
        raise ValueError(f"mode={mode!r} is an option of the inductor backend; backend "
                         f"{backend!r} takes no mode")
    import functools
    return functools.update_wrapper(functools.partial(inductor, mode=mode), inductor)


class CountingBackend:
    """A backend for tests: records every graph it receives, then runs it eagerly."""

    def __init__(self, inner: Backend = eager):
        self.inner = inner
        self.graphs: list[torch.fx.GraphModule] = []
        self.example_inputs: list[list] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence) -> Callable:
        self.graphs.append(gm)
        self.example_inputs.append(list(example_inputs))
        return self.inner(gm, example_inputs)

    @property
    def frame_count(self) -> int:
        return len(self.graphs)

    @property
    def op_count(self) -> int:
        return sum(1 for gm in self.graphs for node in gm.graph.nodes
                   if node.op in ("call_function", "call_method", "call_module"))

    def clear(self) -> None:
        self.graphs.clear()
        self.example_inputs.clear()


@register_backend("aot_eager")
def aot_eager(gm: torch.fx.GraphModule, example_inputs: Sequence) -> Callable:
    """Joint forward+backward tracing and partitioning, graphs run op by op (no code generation)."""
    from inductor.autograd import aot_eager as training_backend  # imported only when asked for
    return training_backend(gm, example_inputs)
