"""Fallbacks are counted and visible (issue 21, class 6): a graph inductor gives up on runs
through eager kernels with the right results, and `inductor.fallbacks()`, the graph's report and
`dynamo.explain()` say so, by reason; the test suite's check (tests/conftest.py) fails a test
that did not expect one."""
import pytest
import torch

import dynamo
import inductor
from inductor import pipeline
from inductor.runtime import fallbacks


def function(x):
    return (x.sin() + 1).sum(-1)


def _broken_generate(*args, **kwargs):
    raise TypeError("planted: inner_fn() missing 1 required positional argument: 'rindex'")


@pytest.fixture
def settings():
    saved = inductor.config.snapshot()
    yield inductor.config
    inductor.config.update(**saved)


@pytest.mark.expect_fallback("error", reason="a planted compiler error")
def test_compiler_error_is_counted_by_reason(settings, monkeypatch):
    settings.fallback_on_error = True
    monkeypatch.setattr(pipeline, "_generate", _broken_generate)
    before = fallbacks.fallbacks()
    x = torch.randn(3, 4)
    for _ in range(2):
        compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [x])
        torch.testing.assert_close(compiled(x), function(x))
    assert compiled.report.reason.startswith("compilation failed: TypeError: planted")
    key = ("error: compilation failed: TypeError: planted: inner_fn() missing 1 required "
           "positional argument: 'rindex'")
    assert fallbacks.since(before) == {key: 2}
    assert inductor.fallbacks()[key] >= 2
    assert fallbacks.total(["error"]) >= 2


@pytest.mark.expect_fallback("unsupported", reason="meta tensors have no code generator")
def test_unsupported_and_configured_kinds(settings):
    before = fallbacks.fallbacks()
    x = torch.randn(3, 4, device="meta")
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [x])
    assert compiled(x).shape == (3,)
    settings.fallback_only = True
    y = torch.randn(3, 4)
    torch.testing.assert_close(
        inductor.compile_fx(torch.fx.symbolic_trace(function), [y])(y), function(y))
    assert fallbacks.since(before) == {
        "unsupported: no code generator for meta tensors": 1,
        "configured: inductor.config.fallback_only is set": 1}


def test_reasons_keep_one_line_and_unknown_kinds_raise():
    before = fallbacks.fallbacks()
    fallbacks.record("configured", "first line\nsecond line " + "x" * 500)
    assert fallbacks.since(before) == {"configured: first line": 1}
    with pytest.raises(ValueError, match="unknown fallback kind"):
        fallbacks.record("surprise", "reason")


@pytest.mark.expect_fallback("error", reason="a planted compiler error")
def test_explain_lists_inductor_fallbacks(settings, monkeypatch):
    settings.fallback_on_error = True
    monkeypatch.setattr(pipeline, "_generate", _broken_generate)
    x = torch.randn(3, 4)
    # static sizes: with symbolic ones (JIT_DYNAMIC_BY_DEFAULT=1) the planted error is met by
    # the symbolic compile and again by its per-size variant, each its own listed fallback
    report = dynamo.explain(function, backend="inductor", dynamic=False)(x)
    torch.testing.assert_close(report.output, function(x))
    assert list(report.fallbacks.values()) == [1]
    assert next(iter(report.fallbacks)).startswith("error: compilation failed: TypeError")
    assert "inductor fallbacks" in str(report) and "1 x error: compilation failed" in str(report)


def test_explain_without_fallbacks_says_nothing_of_them():
    report = dynamo.explain(function, backend="inductor")(torch.randn(3, 4))
    assert report.fallbacks == {} and "fallback" not in str(report)


PLANTED = """
import pytest
from inductor.runtime import fallbacks

def test_unmarked():
    fallbacks.record("error", "compilation failed: planted")

@pytest.mark.expect_fallback("error", reason="planted")
def test_marked():
    fallbacks.record("error", "compilation failed: planted")

@pytest.mark.expect_fallback("unsupported", reason="another kind")
def test_marked_other_kind():
    fallbacks.record("error", "compilation failed: planted")

def test_configured():
    fallbacks.record("configured", "inductor.config.fallback_only is set")
"""


def test_unexpected_fallback_fails_the_test(tmp_path):
    """The conftest check: a fallback in an unmarked test (or one marked for another kind)
    fails it; a marked one, or a configured one, passes."""
    import os
    import pathlib
    import subprocess
    import sys
    tests = pathlib.Path(__file__).parent.parent
    (tmp_path / "conftest.py").write_text((tests / "conftest.py").read_text())
    (tmp_path / "test_planted.py").write_text(PLANTED)
    environment = dict(os.environ, PYTHONPATH=str(tests.parent))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "--rootdir", str(tmp_path), str(tmp_path)], capture_output=True,
                            text=True, env=environment, cwd=tmp_path, timeout=600)
    assert "4 passed, 2 errors" in result.stdout, result.stdout[-3000:]
    assert "ERROR at teardown of test_unmarked" in result.stdout
    assert "ERROR at teardown of test_marked_other_kind" in result.stdout
    assert "1 x error: compilation failed: planted" in result.stdout


@pytest.mark.expect_fallback("unsupported", reason="the limit of variants is what is tested")
def test_variants_past_the_limit_are_counted_once():
    """`Specialized` runs its fallback past `limit` variants: a give-up like any other, counted
    once per graph (it ran uncounted before)."""
    from inductor.runtime import fallbacks
    from inductor.runtime.compiled_graph import Specialized
    before = fallbacks.fallbacks()
    specialized = Specialized(lambda *inputs: "compiled", True, None,
                              lambda inputs: (lambda *args: "variant"),
                              lambda *inputs: "as is", limit=0)
    with torch.no_grad():
        assert specialized(torch.ones(1)) == "as is"
        assert specialized(torch.ones(1)) == "as is"
    assert specialized(torch.ones(1)) == "compiled"
    counted = fallbacks.since(before)
    assert sum(counted.values()) == 1
    assert next(iter(counted)).startswith("unsupported: more than 0 variants")
