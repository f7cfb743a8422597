"""The graph-break catalogue in docs/graph-breaks.md is the one the registry generates, and
every registered kind is documented with a message free of framejit's internal names."""
import pathlib

from dynamo import breaks

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "graph-breaks.md"


def test_docs_catalogue_is_current():
    document = DOC.read_text()
    assert breaks.with_catalogue(document) == document, \
        "run: python -m dynamo.breaks --write docs/graph-breaks.md"


def test_every_kind_has_a_stable_id_title_hint_and_example():
    ids = list(breaks.KINDS)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for kind in breaks.KINDS.values():
        assert kind.id.startswith("GB") and kind.title and kind.hint and kind.example
        assert f"### {kind.id}" in DOC.read_text()
        for internal in ("Variable", "Tracer", "Unsupported", "Stop", "region"):
            assert internal not in kind.message and internal not in kind.title
