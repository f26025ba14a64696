"""Every public function of the product (harness/, backends/) has type hints on its parameters and
its return: the core is typed, and stays so as operators and backends are added."""
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _importable_functions(tree: ast.Module):
    """The functions a caller can import or reach through a class: module-level functions and
    methods (classes nested in classes too), not closures inside a function body, which no caller
    can reach (harness.run.drawn's `collect`: its source is Hypothesis's derandomized seed)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child
            elif isinstance(child, ast.ClassDef):
                stack.append(child)
            elif isinstance(child, (ast.If, ast.Try)):  # a conditional definition at module level
                stack.append(child)


def _untyped() -> list[str]:
    found = []
    for path in sorted(list((ROOT / "harness").rglob("*.py")) + list((ROOT / "backends").rglob("*.py"))):
        for node in _importable_functions(ast.parse(path.read_text(encoding="utf-8"))):
            if not node.name.startswith("_"):
                params = [a for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs if a.arg not in ("self", "cls")]
                if node.returns is None or any(a.annotation is None for a in params):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    return found


def test_every_public_function_has_type_hints():
    assert _untyped() == []


def test_the_check_finds_an_untyped_function(tmp_path, monkeypatch):
    """The scan is not vacuous: an untyped public function in a product folder is reported."""
    fake = tmp_path / "harness"
    fake.mkdir()
    (fake / "m.py").write_text("def public(x):\n    return x\n\ndef _private(x):\n    return x\n")
    (tmp_path / "backends").mkdir()
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _untyped() == ["harness/m.py:1 public"]
