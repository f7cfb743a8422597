"""Stage "compile", used by torch.compile: framejit's code generator as a backend of torch's own
frame capture, `torch.compile(model, backend="framejit")`.

Input: the FX `GraphModule` torch.compile captured and its example inputs. Output: inductor's
`CompiledGraph` (a callable with torch's backend contract). pyproject.toml registers `framejit`
in the `torch_dynamo_backends` entry-point group, which torch.compile reads when it meets a
backend name it does not know; this module is then imported by torch, never by framejit.
Nothing here imports torch.compile's machinery: this is the product being used BY torch.compile.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch


def framejit(gm: torch.fx.GraphModule, example_inputs: Sequence, **options) -> Callable:
    """torch.compile's backend signature: compile `gm` with framejit's inductor.

    `options` are `inductor.compile_fx`'s keywords (`mode`); torch.compile passes its own
    `mode=`/`options=` only to its built-in inductor, so a name-registered backend gets none."""
    import inductor  # imported only when torch.compile first compiles a graph with it

    return inductor.compile_fx(gm, list(example_inputs), **options)
