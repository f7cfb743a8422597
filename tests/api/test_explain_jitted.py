"""dynamo.explain of a callable that dynamo.jit already wrapped (issue 24, item 3): the function
or module it wraps is explained (it used to report "0 graph(s)": the wrapper's own frame is C,
so nothing was captured), with the wrapper's backend and options unless explain gets its own."""
import pytest
import torch

import dynamo


def with_break(x):
    y = x.sin() * 2
    print("between the graphs")
    return y.cos() + 1


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x).relu()
        if y.sum() > 0:  # a tensor branch: one break
            y = y * 2
        return y - 1


def shape_of(report):
    return (report.graph_count, report.graph_break_count,
            [(info.kind, info.source_line) for info in report.breaks], report.ops_per_graph)


def test_a_jitted_function_is_explained_as_the_function_it_wraps(capsys):
    x = torch.linspace(-1, 1, 6)
    direct = dynamo.explain(with_break)(x)
    jitted = dynamo.jit(with_break, backend="eager")
    jitted(x)
    report = dynamo.explain(jitted)(x)
    assert (report.graph_count, report.graph_break_count) == (2, 1)
    assert shape_of(report) == shape_of(direct)
    assert report.breaks[0].source_line == 'print("between the graphs")'
    assert torch.equal(report.output, with_break(x))
    assert "framejit explain: 2 graph(s), 1 graph break(s)" in str(report)


def test_a_decorated_function_is_explained_too():
    @dynamo.jit(backend="eager")
    def decorated(x):
        return with_break(x) * 3

    report = dynamo.explain(decorated)(torch.ones(3))
    assert report.graph_count >= 2 and report.graph_break_count == 1
    assert torch.equal(report.output, with_break(torch.ones(3)) * 3)


def test_a_jitted_module_is_explained_as_its_module():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(5, 4)
    direct = dynamo.explain(model)(x)
    jitted = dynamo.jit(model, backend="eager")
    report = dynamo.explain(jitted)(x)
    assert report.graph_break_count == 1 and report.breaks[0].kind == "GB002"
    assert shape_of(report) == shape_of(direct)
    assert "linear" in report.ops_per_graph[0]
    assert torch.equal(report.output, model(x))


def test_the_wrappers_backend_is_used_unless_explain_names_one():
    counting = dynamo.CountingBackend()
    jitted = dynamo.jit(with_break, backend=counting)
    report = dynamo.explain(jitted)(torch.ones(3))
    assert counting.frame_count == report.graph_count == 2
    counting.clear()
    report = dynamo.explain(jitted, backend="eager")(torch.ones(3))
    assert counting.frame_count == 0 and report.graph_count == 2


def test_backend_argument_inductor_on_a_jitted_module():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(5, 4)
    jitted = dynamo.jit(model, backend="eager")
    report = dynamo.explain(jitted, backend="inductor")(x)
    assert report.graph_break_count == 1
    assert "backend" in report.compile_time and report.compile_time["backend"] > 0
    torch.testing.assert_close(report.output, model(x))


def test_the_wrappers_options_are_inherited_and_can_be_overridden():
    jitted = dynamo.jit(with_break, backend="eager", fullgraph=True)
    with pytest.raises(dynamo.GraphBreakError, match="GB001"):
        dynamo.explain(jitted)(torch.ones(3))
    report = dynamo.explain(jitted, fullgraph=False)(torch.ones(3))
    assert report.graph_break_count == 1


def test_explain_of_a_plain_function_still_defaults_to_the_eager_backend():
    report = dynamo.explain(with_break)(torch.ones(3))
    assert report.compile_time.get("backend", 0.0) < 0.5 and report.graph_count == 2
