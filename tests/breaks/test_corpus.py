"""Graph breaks in every placement: results, printed output, logging and side effects match
eager, and every break resumes (no frame falls back to running eagerly)."""
import pytest

import dynamo
from tests.breaks import corpus
from tests.capture.differential import check

CASES = corpus.cases()


def test_corpus_is_large_enough():
    assert len(CASES) >= 60


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_break_placement(case):
    corpus.LOG_LINES.clear()
    check(case.function, *case.args, graphs=None, breaks=None)
    logged = list(corpus.LOG_LINES)
    corpus.LOG_LINES.clear()
    case.function(*case.args)  # eager, once more, for the log lines of one call
    assert logged == list(corpus.LOG_LINES) * 4  # check(): two eager and two jitted calls

    dynamo.reset()
    report = dynamo.explain(case.function)(*case.args)
    if not case.resumes:  # corpus.EAGER_PLACEMENTS: `f` itself runs eagerly
        assert any(frame[0] == "f" for frame in report.eager_frames), str(report)
        return
    assert report.eager_frames == [], str(report)
    assert all(info.resumed for info in report.breaks), str(report)
    if case.kind_id is not None:
        assert case.kind_id in {info.kind for info in report.breaks}, str(report)
    assert report.graph_count >= 1
