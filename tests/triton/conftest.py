"""Triton tests: kernels for CPU tensors through Triton's interpreter
(`inductor.config.cpu_backend = "triton"`), and for CUDA tensors when a GPU is present.

A fresh kernel cache per session (CI starts cold), the IR verifiers on, compiler errors
raised, all set around each test and restored after it. `DEVICES` parametrizes tests over
"cpu" (interpreted) and, when available, "cuda".
"""
import copy

import pytest
import torch

import inductor

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(scope="session")
def _triton_cache(tmp_path_factory) -> str:
    pytest.importorskip("triton")
    return str(tmp_path_factory.mktemp("triton-kernel-cache"))


@pytest.fixture(autouse=True)
def _triton_settings(_triton_cache):
    """Per test (so other directories' tests in the same session keep their backend)."""
    saved = inductor.config.snapshot()
    inductor.config.update(cache_dir=_triton_cache, verify_ir=True, fallback_on_error=False,
                           cpu_backend="triton")
    yield
    inductor.config.update(**saved)


@pytest.fixture
def settings():
    """Change `inductor.config` for one test."""
    saved = inductor.config.snapshot()
    yield inductor.config
    inductor.config.update(**saved)


def compile_function(function, *inputs, mode=None):
    """`inductor.compile_fx` on `function` traced by torch.fx (placeholders = `inputs`)."""
    graph = torch.fx.symbolic_trace(function)
    return inductor.compile_fx(graph, list(inputs), mode=mode)


def check_same(function, *inputs, atol=None, rtol=None, mode=None, calls=None):
    """Run eager and compiled (`calls` times: by default once on CPU, twice on CUDA, where
    the second call takes the direct launch path) on copies of `inputs`; compare results
    and mutated inputs after each call. Returns the compiled graph."""
    if calls is None:
        calls = 2 if any(getattr(value, "is_cuda", False) for value in inputs) else 1
    eager_inputs = copy.deepcopy(inputs)
    compiled_inputs = copy.deepcopy(inputs)
    compiled = compile_function(function, *compiled_inputs, mode=mode)
    for _ in range(calls):
        expected = function(*eager_inputs)
        actual = compiled(*compiled_inputs)
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
        torch.testing.assert_close(compiled_inputs, eager_inputs, atol=atol, rtol=rtol,
                                   equal_nan=True)
    return compiled


def kernel_source(compiled) -> str:
    """The generated kernels of a compiled graph (the prelude left out)."""
    from inductor.codegen.triton.prelude import PRELUDE
    return compiled.report.source.replace(PRELUDE, "")


def launcher_wrappers(compiled) -> list:
    """The generated wrapper functions reached from a compiled graph (through `run`,
    `compiled`, `with_argument_list` and closures): those whose globals hold a launcher."""
    from inductor.runtime.compiled_graph import CompiledGraph
    from inductor.runtime.triton_launch import Launcher
    from inductor.runtime.triton_sizes import SizedLauncher

    seen, pending, found = set(), [compiled], []
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, CompiledGraph):
            pending.append(value.run)
        elif hasattr(value, "compiled"):
            pending.append(value.compiled)
        if hasattr(value, "with_argument_list"):
            pending.append(value.with_argument_list)
        globals_ = getattr(value, "__globals__", None)
        if globals_ is not None and "__builtins__" in globals_ and \
                any(isinstance(item, (Launcher, SizedLauncher)) for item in globals_.values()):
            found.append(value)
        for cell in getattr(value, "__closure__", None) or ():
            pending.append(cell.cell_contents)
    return found


def launchers(compiled) -> list:
    """The kernel launchers of a compiled graph (found through its wrapper's globals; for a
    kernel over symbolic sizes, the launcher of each size bucket met so far)."""
    from inductor.runtime.triton_launch import Launcher
    from inductor.runtime.triton_sizes import SizedLauncher

    found = {}                   # by id: wrappers of one module share their globals
    for wrapper in launcher_wrappers(compiled):
        values = wrapper.__globals__.values()
        found.update((id(item), item) for item in values if isinstance(item, Launcher))
        found.update((id(launcher), launcher) for item in values
                     if isinstance(item, SizedLauncher) for launcher in item.launchers.values())
    return list(found.values())


def gpu_module(function, *inputs, persistent_limit=32768, wait_for_prior=False, combine=False):
    """(generated module, dtype lookup, graph plan) of `function` on `inputs` printed for a
    132-SM CUDA target (no GPU needed: nothing runs); `wait_for_prior`: for programmatic
    dependent launch; `combine`: after horizontal fusion (`schedule/combine.py`)."""
    from inductor.codegen.triton import source as triton_source
    from inductor.decompose import trace_aten
    from inductor.lower import lower
    from inductor.schedule.scheduler import schedule
    from inductor.schedule.tiling import Target, tile

    from inductor.moments import opmath_moments
    graph = torch.fx.symbolic_trace(function)
    with opmath_moments():      # as for CUDA tensors: eager's CPU var/std widen to float64
        aten_graph = trace_aten(graph, list(inputs))
    loop_graph = lower(aten_graph.module, aten_graph.fake_inputs, aten_graph.output_strides)
    plan = schedule(loop_graph)
    tile(plan, Target("cuda", 132, persistent_limit))
    if combine:
        from inductor.schedule.combine import combine_kernels
        plan = combine_kernels(plan)

    def dtype_of(name):
        return plan.buffers[name].get_dtype()
    return triton_source.generate(plan, dtype_of, interpret=False,
                                  wait_for_prior=wait_for_prior), dtype_of, plan
