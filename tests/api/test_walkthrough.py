"""docs/walkthrough.md, the new user's first session (issue 24): every Python block runs as
written, in order, in one namespace (the README's blocks are run the same way:
tests/api/test_readme.py), and the page covers what it promises."""
import pathlib

import dynamo
from tests.api.test_readme import python_blocks

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "walkthrough.md"


def test_every_python_block_runs_as_written(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(dynamo.config, "debug_dir", "")
    dynamo.reset()
    namespace = {"__name__": "doc_walkthrough"}
    blocks = python_blocks(PAGE)
    assert len(blocks) >= 6
    try:
        for block in blocks:
            exec(compile(block.padded(), str(block.path), "exec"), namespace)
    finally:
        dynamo.config.disable = False
        dynamo.reset()
    printed = capsys.readouterr().out
    assert "framejit explain: 2 graph(s), 1 graph break(s)" in printed
    assert "['000_noisy', '001_noisy_resumed', 'index.html']" in printed
    assert "kernels.cpp" in printed and "loop_ir.txt" in printed


def test_the_page_walks_through_each_step():
    text = PAGE.read_text()
    for heading in ("Install", "A first jitted function", "dynamo.explain", "A training step",
                    "Turning it off", "the debug dump"):
        assert heading in text, heading
