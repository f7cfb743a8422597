"""The first five minutes (issue 24, item 4): every Python block of README.md and docs/api.md
runs as written (the README's "Use" block used to raise NameError: `fn`, `x`, `w`).

A document's blocks run in order in one namespace, compiled with the document's path and
padded so that tracebacks and `explain()` name the Markdown file's own lines. A block directly
after a marker line is not run:
- `<!-- doc-test: signature of NAME -->`: a call signature; it must parse as one and list
  exactly the parameters (names, kinds, defaults) of the object NAME imports to.
- `<!-- doc-test: not run (REASON) -->`: it must compile.
"""
import ast
import dataclasses
import importlib
import inspect
import pathlib
import re

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", "docs/api.md")
MARKER = re.compile(r"<!-- doc-test: (signature of (?P<name>[\w.]+)|not run \((?P<why>.+)\)) -->")


@dataclasses.dataclass(frozen=True)
class Block:
    path: pathlib.Path
    line: int  # the Markdown line of the block's first line of code
    source: str
    marker: "re.Match | None"

    def padded(self) -> str:
        return "\n" * (self.line - 1) + self.source


def python_blocks(path: pathlib.Path) -> list:
    lines = path.read_text().splitlines()
    blocks, index = [], 0
    while index < len(lines):
        if lines[index].strip() != "```python":
            index += 1
            continue
        end = lines.index("```", index + 1)
        marker = MARKER.fullmatch(lines[index - 1].strip()) if index else None
        if index and lines[index - 1].startswith("<!-- doc-test") and marker is None:
            raise AssertionError(f"{path}:{index}: unknown marker {lines[index - 1]!r}")
        blocks.append(Block(path, index + 2, "\n".join(lines[index + 1:end]) + "\n", marker))
        index = end + 1
    return blocks


def test_both_documents_have_blocks_that_run():
    for name in DOCUMENTS:
        blocks = python_blocks(ROOT / name)
        assert [block for block in blocks if block.marker is None], name


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_python_block_runs_as_written(name, capsys):
    namespace = {"__name__": f"doc_{pathlib.Path(name).stem}"}
    ran = 0
    for block in python_blocks(ROOT / name):
        if block.marker is not None and block.marker["name"]:
            continue  # a signature: test_documented_signatures_are_the_real_ones
        code = compile(block.padded(), str(block.path), "exec")  # "not run" ones compile too
        if block.marker is None:
            exec(code, namespace)
            ran += 1
    assert ran
    if name == "README.md":
        printed = capsys.readouterr().out
        # the README's explain() of its jitted `step`: the function it wraps, one graph
        assert "framejit explain: 1 graph(s), 0 graph break(s)" in printed
        assert "torch.Size([64])" in printed and "torch.Size([64, 16])" in printed


def _resolve(dotted: str):
    module, _, attribute = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def _documented_signature(source: str, name: str) -> inspect.Signature:
    call = source.strip()
    assert call.startswith(name + "(") and call.endswith(")"), call
    definition = f"def documented{call[len(name):]}:\n    pass\n"
    namespace: dict = {}
    exec(compile(ast.parse(definition), "<signature>", "exec"), namespace)
    return inspect.signature(namespace["documented"])


def _shape(signature: inspect.Signature) -> list:
    return [(parameter.name, parameter.kind, parameter.default)
            for parameter in signature.parameters.values()]


def signature_blocks() -> list:
    return [block for name in DOCUMENTS for block in python_blocks(ROOT / name)
            if block.marker is not None and block.marker["name"]]


@pytest.mark.parametrize("block", signature_blocks(),
                         ids=lambda block: f"{block.path.name}:{block.line}")
def test_documented_signatures_are_the_real_ones(block):
    name = block.marker["name"]
    documented = _documented_signature(block.source, name)
    assert _shape(documented) == _shape(inspect.signature(_resolve(name))), \
        f"{block.path}:{block.line} documents {name}{documented}"


def test_the_markers_are_checked():
    names = [block.marker["name"] for block in signature_blocks()]
    assert "dynamo.jit" in names and "dynamo.explain" in names
    with pytest.raises(AssertionError):
        _documented_signature("dynamo.jit(fn, *, backend)", "dynamo.explain")
    wrong = _documented_signature("dynamo.explain(fn_or_module, backend='eager')",
                                  "dynamo.explain")
    assert _shape(wrong) != _shape(inspect.signature(_resolve("dynamo.explain")))


def test_readme_use_block_compiles_what_it_says(capsys):
    """The README's step, run on its own: compiled by the inductor backend, eager's values."""
    use = next(block for block in python_blocks(ROOT / "README.md") if "def step" in block.source)
    namespace: dict = {}
    exec(compile(use.padded(), str(use.path), "exec"), namespace)
    x, w = namespace["x"], namespace["w"]
    expected = torch.relu(x @ w).sum(-1)
    torch.testing.assert_close(namespace["step"](x, w), expected)
    import dynamo
    assert dynamo.is_jitted(namespace["step"]) and dynamo.is_jitted(namespace["fast"])


def test_the_demos_graph_break_part(capsys):
    """`python -m benchmarks.demo` (the README's first command) ends with a program with a graph
    break, its explain() and the hint applied: cheap enough to run here (the speed part is not)."""
    from benchmarks import demo

    demo.show_graph_break()
    printed = capsys.readouterr().out
    assert "framejit explain: 2 graph(s), 1 graph break(s)" in printed
    assert "GB003 tensor to Python value at demo.py:" in printed
    assert "hint: keep the value as a 0-d tensor" in printed
    assert printed.rstrip().endswith("framejit explain: 1 graph(s), 0 graph break(s)")
