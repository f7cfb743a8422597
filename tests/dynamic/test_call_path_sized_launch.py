"""The per-call path of a Triton graph compiled over symbolic sizes (issue 23): its wrapper
calls each kernel's generated dispatch (`SizedLauncher.dispatch`: extents, empty grid, size
bucket, the bucket's launcher) straight, not through `SizedLauncher.__call__` (a Python frame
more per kernel and call than a static graph's launch), and still gives eager's answers at
every size. CPU tensors run through Triton's interpreter (`cpu_backend="triton"`)."""
import copy

import pytest
import torch
import torch.nn.functional as F

import inductor
from tests.inductor.test_dynamic_sizes import assert_same, symbolic_graph
from tests.triton.conftest import launcher_wrappers


@pytest.fixture(autouse=True)
def _triton_on_cpu(tmp_path):
    pytest.importorskip("triton")
    saved = inductor.config.snapshot()
    inductor.config.update(cache_dir=str(tmp_path), fallback_on_error=False,
                           cpu_backend="triton")
    yield
    inductor.config.update(**saved)


def _function(x, weight, bias):
    y = F.gelu(x * weight + bias)
    return (y.softmax(-1) * x).sum(-1) + y.amax(-1)


def _inputs(batch: int) -> list:
    generator = torch.Generator().manual_seed(batch)
    return [torch.randn(batch, 24, generator=generator), torch.randn(24, generator=generator),
            torch.randn(24, generator=generator)]


def test_a_symbolic_wrapper_calls_each_kernels_dispatch_straight():
    from inductor.runtime.triton_sizes import SizedLauncher
    first = _inputs(5)
    compiled = inductor.compile_fx(symbolic_graph(_function, first, [[0], [], []]),
                                   copy.deepcopy(first))
    for batch in (5, 2, 13, 97, 5):
        inputs = _inputs(batch)
        assert_same(compiled(*copy.deepcopy(inputs)), _function(*inputs))
    assert compiled.report.size_variants == 0 and compiled.report.size_reason is None
    wrappers = [wrapper for wrapper in launcher_wrappers(compiled)
                if any(name.startswith("launch") for name in wrapper.__code__.co_names)]
    assert wrappers     # the functions that launch kernels (not `call`, which forwards)
    for wrapper in wrappers:
        called = [wrapper.__globals__[name] for name in wrapper.__code__.co_names
                  if name.startswith("launch")]
        sized = [item for item in wrapper.__globals__.values()
                 if isinstance(item, SizedLauncher)]
        assert sized
        # each kernel call names the generated dispatch of a sized launcher, never the object
        assert not any(isinstance(item, SizedLauncher) for item in called)
        assert sorted(map(id, called)) == sorted(id(item.dispatch) for item in sized)
        assert all(item.launchers for item in sized)     # the dispatch made bucket launchers
