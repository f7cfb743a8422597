"""guards is a leaf package: it imports nothing from dynamo, inductor, torch._dynamo or
torch._inductor (STYLE rule 2, DESIGN section 2)."""
import ast
import pathlib

import guards

FORBIDDEN = ("dynamo", "inductor", "torch._dynamo", "torch._inductor", "torch.compile")


def imported_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_guards_imports_point_one_way():
    package = pathlib.Path(guards.__file__).parent
    offenders = []
    for path in package.rglob("*.py"):
        for module in imported_modules(path):
            if any(module == name or module.startswith(name + ".") for name in FORBIDDEN):
                offenders.append(f"{path.relative_to(package)} imports {module}")
        text = path.read_text()
        if "torch._dynamo" in text or "torch._inductor" in text or "torch.compile(" in text:
            offenders.append(f"{path.relative_to(package)} mentions a forbidden module")
    assert offenders == []


def test_modules_stay_within_size_limits():
    package = pathlib.Path(guards.__file__).parent
    for path in package.rglob("*.py"):
        lines = path.read_text().splitlines()
        assert len(lines) <= 800, path
        assert all(len(line) <= 100 for line in lines), path
        assert ast.get_docstring(ast.parse("\n".join(lines))), f"{path} has no docstring"
