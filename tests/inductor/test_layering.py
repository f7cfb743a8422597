"""inductor is a leaf package: it imports nothing from dynamo, guards, torch._dynamo,
torch._inductor, torch.export or aot_autograd (STYLE rule 2, DESIGN section 2); its modules
stay within the size limits and open with a docstring."""
import ast
import pathlib

import inductor

FORBIDDEN = ("dynamo", "guards", "torch._dynamo", "torch._inductor", "torch.export",
             "torch._functorch.aot_autograd")
OWNED_ELSEWHERE = ("autograd",)  # inductor/autograd belongs to the training engineer


def imported_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def own_modules():
    package = pathlib.Path(inductor.__file__).parent
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] not in OWNED_ELSEWHERE:
            yield package, path


def test_inductor_imports_point_one_way():
    offenders = []
    for package, path in own_modules():
        for module in imported_modules(path):
            if any(module == name or module.startswith(name + ".") for name in FORBIDDEN):
                offenders.append(f"{path.relative_to(package)} imports {module}")
        text = path.read_text()
        for name in ("torch._dynamo", "torch._inductor", "aot_autograd"):
            if name in text:
                offenders.append(f"{path.relative_to(package)} mentions {name}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and node.attr == "compile" \
                    and isinstance(node.value, ast.Name) and node.value.id == "torch":
                offenders.append(f"{path.relative_to(package)} uses torch.compile")
    assert offenders == []


def test_modules_stay_within_size_limits():
    for _package, path in own_modules():
        lines = path.read_text().splitlines()
        assert len(lines) <= 800, path
        assert all(len(line) <= 100 for line in lines), path
        assert ast.get_docstring(ast.parse("\n".join(lines))), f"{path} has no docstring"
