"""A lone view of an intermediate is a view of it also where the torch-level graph cannot run on
fake tensors (graph fuzzer seed 5152, found by the view check of issue 21): `v0 = a.argmin();
v1 = v0.view([1]); v0[v0 > 0] = 4; return v1` (the boolean `setitem` has no fake run, so eager's
output geometry is unknown). `v1` was computed alone, no view, where eager's `v1._base` is `v0`;
it is now rebuilt over `v0` returned as a hidden base, laid out as the decomposed graph lays it
out. Backends: eager (the graph itself), inductor C++ and Triton (interpreted on the CPU).
"""
import operator

import torch

import inductor


def _graph() -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    a0 = graph.placeholder("a0")
    v0 = graph.call_method("argmin", (a0,))
    v1 = graph.call_function(torch.ops.aten.view.default, (v0, [1]))
    mask = graph.call_function(operator.gt, (v0, 0))
    graph.call_function(operator.setitem, (v0, mask, 4))
    graph.output((v1,))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_lone_view_of_an_intermediate_without_a_fake_run(code_generator, monkeypatch):
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    gm = _graph()
    a = torch.tensor([[3., -7.], [1., 2.]])
    compiled = gm if code_generator == "eager" else inductor.compile_fx(gm, [a])
    for values in (a, torch.tensor([[1., -2.], [5., 0.]])):
        expected, got = gm(values)[0], compiled(values)[0]
        torch.testing.assert_close(got, expected)
        assert expected._base is not None and got._base is not None
        assert got._base.shape == expected._base.shape == ()
        assert got._base.dtype == torch.int64
