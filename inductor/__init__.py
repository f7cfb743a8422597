"""inductor: compiles an FX graph into fused C++/OpenMP (CPU) or Triton (GPU) kernels.

A leaf package: it never imports `dynamo` or `guards`, and works as a
`torch.compile(backend=inductor.compile_fx)` backend too.

    compile_fx(gm, example_inputs)   torch-level FX graph -> CompiledGraph (backend signature)
    compile_aten(gm, example_inputs) functional ATen graph -> CompiledGraph (no autograd)
    config                           the options (`JIT_<FIELD>` in the environment)
    fallbacks()                      graphs run through eager kernels instead, by reason

The stages live in subpackages in data-flow order; `inductor.pipeline` chains them.
"""
from inductor.config import config
from inductor.pipeline import compile_aten, compile_fx
from inductor.runtime.compiled_graph import CompiledGraph, GraphReport
from inductor.runtime.fallbacks import fallbacks

__all__ = ["CompiledGraph", "GraphReport", "compile_aten", "compile_fx", "config",
           "fallbacks"]
