"""explain(): the report's fields, its text (golden files), and fullgraph=True errors.

Regenerate the golden files after an intended change with
`JIT_UPDATE_GOLDEN=1 python -m pytest tests/breaks/test_explain.py`.
"""
import os
import pathlib
import re

import pytest
import torch

import dynamo
from tests.breaks import explained

GOLDEN = pathlib.Path(__file__).parent / "golden"


def normalised(report) -> str:
    text = str(report)
    text = text.replace(os.path.abspath(explained.__file__), "explained.py")
    text = re.sub(r"compile time: .*", "compile time: <elided>", text)
    return text + "\n"


# `step`'s golden text lists its graphs' ops as traced with static sizes (symbolic: one more)
STATIC = {"step": pytest.mark.static_shapes(reason="golden op lists of static graphs")}


@pytest.mark.parametrize("name", [pytest.param(name, marks=STATIC.get(name, ()))
                                  for name in sorted(explained.PROGRAMS)])
def test_explain_output_matches_golden(name, capsys):
    function, arguments = explained.PROGRAMS[name]
    text = normalised(dynamo.explain(function)(*arguments()))
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("JIT_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_report_fields_name_each_break():
    report = dynamo.explain(explained.step)(torch.linspace(-1, 1, 8), 2)
    assert report.graph_break_count == 3 and report.graph_count == len(report.graphs) == 5
    kinds = [info.kind for info in report.breaks]
    assert kinds == ["GB001", "GB002", "GB001"]
    loop_print, branch, helper_print = report.breaks
    assert loop_print.source_line == 'print("iteration", i)'
    assert branch.source_line == "if y.sum() > 0:"
    assert helper_print.location.endswith(":7") and helper_print.calls[0].endswith(":18")
    assert all(info.resumed for info in report.breaks) and report.eager_frames == []
    assert report.ops_per_graph[0] == ["Tensor.sin"]
    assert set(report.compile_time) >= {"trace"}
    assert torch.equal(report.output, explained.step(torch.linspace(-1, 1, 8), 2))


def test_report_of_a_program_without_breaks():
    report = dynamo.explain(explained.no_break)(torch.ones(2, 4))
    assert (report.graph_count, report.graph_break_count, report.breaks) == (1, 0, [])
    assert report.guards and any("L['x']" in line for line in report.guards[0])


def test_fullgraph_names_the_construct_and_its_line():
    jitted = dynamo.jit(explained.step, fullgraph=True, backend="eager")
    with pytest.raises(dynamo.GraphBreakError) as raised:
        jitted(torch.ones(4), 2)
    message = str(raised.value)
    assert "GB001" in message and "print" in message
    assert f"{explained.__file__}:15" in message and "hint:" in message
    assert raised.value.failure.kind.id == "GB001"


def test_fullgraph_reports_a_break_inside_a_helper_with_its_caller():
    jitted = dynamo.jit(explained.helper, fullgraph=True, backend="eager")
    with pytest.raises(dynamo.GraphBreakError, match=r"explained.py:7"):
        jitted(torch.ones(4))

    def caller(x):
        return explained.helper(x) * 3
    with pytest.raises(dynamo.GraphBreakError, match=r"called from .*test_explain.py"):
        dynamo.jit(caller, fullgraph=True, backend="eager")(torch.ones(4))


def test_fullgraph_passes_when_there_is_no_break():
    jitted = dynamo.jit(explained.no_break, fullgraph=True, backend="eager")
    assert torch.equal(jitted(torch.ones(2, 4)), explained.no_break(torch.ones(2, 4)))
