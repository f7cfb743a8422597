"""Inputs traced with symbolic sizes that the trace's guards then fix to constants (found under
`JIT_DYNAMIC_BY_DEFAULT=1`: tests/inductor/test_embedding_gradient.py::
test_adamw_steps_match_eager, whose AdamW moments are plain tensors of the static params'
sizes). `x * weight` with a static (5, 3) parameter fixes x's symbols to 5 and 3: its fake
keeps SymInt strides of constant value. `inductor.size_variants.has_symbolic_sizes` counted
any SymInt as symbolic while `trace_aten_symbolic` found no symbolic placeholder, so the
graph went through the per-size path and counted a `per_size` fallback ("no placeholder has
a symbolic size") for its only variant. Now `size_variants.sizes_fixed` sends such a graph
to one static compile, not counted (a later variant, were the sizes to change, would be)."""
import torch

import dynamo
from inductor.runtime import fallbacks


class ScaledByAParameter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(5, 3))

    def forward(self, x):
        return (x * self.weight).sum(0)


def _run(module):
    jitted = dynamo.jit(module, backend="inductor", dynamic=True)
    before = fallbacks.fallbacks()
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(5, 3)
            torch.testing.assert_close(jitted(x), module(x))
    return fallbacks.since(before)


def test_values_match_eager():
    _run(ScaledByAParameter())


def test_no_per_size_fallback_when_guards_fix_every_size():
    assert _run(ScaledByAParameter()) == {}
