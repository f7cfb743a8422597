"""inductor from several threads and several processes (issue 21, class 5).

Threads: four threads released at once compile and run graphs through `inductor.compile_fx`
directly (the torch.compile-backend path, which no `dynamo` lock covers), on a cold kernel
cache, with shapes changing from call to call, on both code generators (C++, and Triton through
its interpreter); and four threads share one compiled graph. Before `runtime/locks.py` these
raised `NameError: name 'buf2' is not defined` from the generated wrapper (a buffer realized
into another thread's graph: the loop IR's stack of graphs under construction is one per
process), returned wrong values (one thread's body printed through another's `ops` handler),
raised torch.fx's `CURRENT_PATCHER is None`, or, for interpreted Triton launches, ran with the
interpreter's language patches undone by another thread.

Processes: three processes compile the same graphs into one fresh `JIT_CACHE_DIR` at once;
each checks its results against eager, every C++ library is built by exactly one of them, and
no temporary file is left behind.
"""
import json
import os
import subprocess
import sys
import threading

import pytest
import torch

import inductor

THREADS = 4
SHAPES = [(3, 5), (4, 7), (2, 9), (6, 3), (5, 5), (1, 8)]


def program(x, y):
    a = torch.relu(x @ y.t()) + 1
    b = a.sum(-1) * x[:, 0]
    return (b.exp() + a.mean(-1)).tanh(), a.softmax(-1), (x * 2).cumsum(0)


def run_threads(work, count=THREADS):
    """Run `work(index)` on `count` threads released together; re-raise the first error."""
    barrier = threading.Barrier(count)
    errors = []

    def target(index):
        try:
            barrier.wait()
            work(index)
        except BaseException as error:  # noqa: BLE001  (re-raised below)
            errors.append(error)
            barrier.abort()
    threads = [threading.Thread(target=target, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=900)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    real = [error for error in errors if not isinstance(error, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]


@pytest.fixture
def cold_cache(tmp_path):
    """A fresh, empty kernel cache for one test."""
    saved = inductor.config.snapshot()
    inductor.config.cache_dir = str(tmp_path / "cache")
    yield tmp_path / "cache"
    inductor.config.update(**saved)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_threads_compile_one_graph_changing_shapes(cold_cache, backend):
    if backend == "triton":
        pytest.importorskip("triton")
    inductor.config.cpu_backend = backend
    graph = torch.fx.symbolic_trace(program)    # torch.fx's own tracer is not thread-safe
    shapes = SHAPES if backend == "cpp" else SHAPES[:3]

    def work(index):
        generator = torch.Generator().manual_seed(index)
        for rows, columns in shapes[index % 2:] + shapes[:index % 2]:
            x = torch.randn(rows, columns, generator=generator)
            y = torch.randn(rows + 1, columns, generator=generator)
            compiled = inductor.compile_fx(graph, [x, y])
            for _ in range(2):
                torch.testing.assert_close(compiled(x, y), program(x, y))
    run_threads(work)


def test_threads_compile_different_graphs(cold_cache):
    """Each thread its own graph: lowering them at once mixed their buffers up."""
    functions = [lambda x: (x.sin() + 1).sum(0), lambda x: torch.softmax(x * 3, -1),
                 lambda x: (x @ x.t()).relu().amax(1), lambda x: x.cumsum(1) / (x.abs() + 1)]
    graphs = [torch.fx.symbolic_trace(function) for function in functions]

    def work(index):
        for rows in (3, 5, 8):
            x = torch.randn(rows, rows + 2)
            compiled = inductor.compile_fx(graphs[index], [x])
            torch.testing.assert_close(compiled(x), functions[index](x))
    run_threads(work)


def test_threads_train_one_graph(cold_cache):
    """Training graphs compile their forward (and, on the first backward, their backward)
    through `compile_aten` from whichever thread gets there."""
    layer = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    graph = torch.fx.symbolic_trace(layer)

    def work(index):
        for rows in (3, 4, 3, 5):
            x = torch.randn(rows, 6, requires_grad=True)
            compiled = inductor.compile_fx(graph, [x])
            for _ in range(2):
                result = compiled(x)
                expected = layer(x)
                torch.testing.assert_close(result, expected)
                gradient, = torch.autograd.grad(result.square().sum(), [x])
                expected_gradient, = torch.autograd.grad(expected.square().sum(), [x])
                torch.testing.assert_close(gradient, expected_gradient)
    run_threads(work)


def test_tracing_a_submodule_leaves_the_module_itself_alone(cold_cache):
    """A graph calling a submodule (`call_module`) is traced with fake tensors swapped in for
    the module's parameters: in a copy of it, never in the module another thread may be
    calling eagerly at that moment (that thread computed with fake tensors or crashed)."""
    class Probe(torch.nn.Linear):
        def forward(self, x):
            seen.append(layer._parameters["weight"] is weight)
            return super().forward(x)

    class Leaves(torch.fx.Tracer):
        def is_leaf_module(self, module, name):
            return isinstance(module, Probe) or super().is_leaf_module(module, name)

    seen = []
    root = torch.nn.Sequential(Probe(4, 3))
    layer = root[0]
    weight = layer.weight
    graph = torch.fx.GraphModule(root, Leaves().trace(root))
    assert any(node.op == "call_module" for node in graph.graph.nodes)
    x = torch.randn(2, 4, requires_grad=True)
    compiled = inductor.compile_fx(graph, [x])
    torch.testing.assert_close(compiled(x), layer(x))
    assert seen and all(seen), seen


def test_threads_share_one_interpreted_graph(cold_cache):
    """Triton's interpreter patches `triton.language` and keeps the program index globally:
    concurrent launches of one compiled graph must not see each other's."""
    pytest.importorskip("triton")
    inductor.config.cpu_backend = "triton"
    x, y = torch.randn(5, 6), torch.randn(4, 6)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(program), [x, y])
    expected = program(x, y)

    def work(index):
        for _ in range(3):
            torch.testing.assert_close(compiled(x, y), expected)
    run_threads(work)


# -- processes --------------------------------------------------------------------------------
CHILD = r"""
import json, os, sys, time
import torch
import inductor
from inductor.runtime import build

go, backend = sys.argv[1], sys.argv[2]
inductor.config.update(fallback_on_error=False, verify_ir=True, cpu_backend=backend)
built = []
start = build._start_build
def counting(source, path, flags=None):
    built.append(os.path.basename(path))
    return start(source, path, flags)
build._start_build = counting
functions = [lambda x: (x.sin() + 1).sum(0), lambda x: torch.softmax(x * 3, -1),
             lambda x: (x @ x.t()).relu().amax(1), lambda x: x.cumsum(1) / (x.abs() + 1),
             lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]) * 2]
while not os.path.exists(go):
    time.sleep(0.01)
for rows in (3, 6):
    for function in functions:
        x = torch.randn(rows, rows + 1)
        compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [x])
        torch.testing.assert_close(compiled(x), function(x))
print(json.dumps({"built": [name for name in built if name.endswith(".so")
                            and not name.startswith("_native")],
                  "fallbacks": inductor.fallbacks()}))
"""


def _native_root() -> dict:
    """Environment sharing this process's native helpers with children (built once)."""
    from inductor.runtime import native
    path = native.library_path()
    if os.path.exists(path):
        return {"JIT_NATIVE_CACHE_DIR": os.path.dirname(os.path.dirname(os.path.dirname(path)))}
    return {}


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_processes_share_one_cold_cache(tmp_path, backend):
    if backend == "triton":
        pytest.importorskip("triton")
    cache, go = tmp_path / "cache", tmp_path / "go"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment = dict(os.environ, JIT_CACHE_DIR=str(cache), **_native_root(),
                       PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    environment.pop("TRITON_CACHE_DIR", None)
    children = [subprocess.Popen([sys.executable, str(script), str(go), backend],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=environment) for _ in range(3)]
    go.write_text("")
    reports = []
    for child in children:
        output, errors = child.communicate(timeout=900)
        assert child.returncode == 0, errors[-3000:]
        reports.append(json.loads(output.strip().splitlines()[-1]))
    assert all(report["fallbacks"] == {} for report in reports)
    built = [name for report in reports for name in report["built"]]
    libraries = sorted(path.name for path in cache.rglob("*.so")
                       if not path.name.startswith("_native"))
    if backend == "cpp":
        assert libraries and sorted(built) == libraries      # each built by one process
    leftovers = [str(path) for path in cache.rglob("*")
                 if path.name.startswith(("build-", ".tmp-", "module-", "tuning-"))]
    assert leftovers == []
