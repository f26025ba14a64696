"""The dependency rule of docs/architecture.md, checked on the source: no module under harness/
imports backends (backends plug in through entry points: `dmlconform.backends` for backends,
`dmlconform.commands` for their commands), and no import cycle among the modules of harness/ and
backends/. Every import counts (also one inside a function, which only delays the cycle), except
those under `if TYPE_CHECKING:` (never executed).

Also what the rule changed for users: `dmlconform directml ...` (registered by the DirectML
backend), `python -m harness.directml_dlls list` and `dmlconform spec table` (the ONNX Runtime
column, asked of the onnxruntime backend) work as before.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "backends")

# Cycles that are known and owned elsewhere, each as the set of its modules (a strongly connected
# component of the import graph), e.g. frozenset({"harness.reference.evaluate", "harness.reference.legal"}).
# The test fails on any other cycle, and on a listed one that no longer exists as written: whoever
# removes or changes it updates this set. (It listed the harness.reference cycle, evaluate <->
# families <-> legal, later the family modules and their package, until its owner removed it.)
KNOWN_CYCLES: set[frozenset[str]] = set()


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the packages in the checkout."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
           (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node, anywhere (functions too), except under `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _graph() -> dict[str, dict[str, int]]:
    """Module -> {imported module of the packages: first line}. A name is resolved to the longest
    module it starts with (`from harness.model import descriptor` is the module descriptor;
    `from harness.model.layout import total_bytes` is harness.model.layout)."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _loop(graph: dict[str, dict[str, int]], members: frozenset[str]) -> str:
    """One concrete loop through a cycle's first module, with each import's line: `a (line 3) -> b ...`."""
    start = min(members)
    paths = {start: [start]}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for child in sorted(graph[node]):
            if child == start:
                path = paths[node] + [start]
                return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(path, path[1:])) + f" -> {start}"
            if child in members and child not in paths:
                paths[child] = paths[node] + [child]
                todo.append(child)
    return ""


def _describe(graph: dict[str, dict[str, int]], cycle: frozenset[str]) -> str:
    return f"{len(cycle)} modules {sorted(cycle)}; e.g. {_loop(graph, cycle)}"


GRAPH = _graph()


def test_the_graph_sees_every_module_and_resolves_imports():
    assert "harness.cli" in GRAPH and "backends.directml" in GRAPH and "backends.directml.pack" in GRAPH
    assert "harness.model.descriptor" in GRAPH["harness.model.validator"]  # absolute, from-import
    assert "backends.directml.stack" in GRAPH["backends.directml.pack"]  # relative (`from .stack import`)
    assert "harness.run.registry" in GRAPH["harness.cli"]  # inside a function
    assert "harness.model.descriptor" not in GRAPH["harness.model.layout"]  # only under `if TYPE_CHECKING:`


def test_no_harness_module_imports_backends():
    crossing = [f"{name} imports {target} (line {line})" for name, edges in sorted(GRAPH.items()) if name.split(".")[0] == "harness"
                for target, line in sorted(edges.items()) if target.split(".")[0] == "backends"]
    assert not crossing, ("harness must not import backends (docs/architecture.md, dependency rule; backend commands "
                          "plug in through the dmlconform.commands entry points):\n" + "\n".join(crossing))


def _compare(cycles: list[frozenset[str]], known: set[frozenset[str]]) -> tuple[list[frozenset[str]], list[frozenset[str]]]:
    """(cycles that are not known, known cycles that no longer exist as written)."""
    return [c for c in cycles if c not in known], sorted((c for c in known if c not in cycles), key=sorted)


def test_cycles_are_found_and_compared_with_the_known_ones():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}, "e": {"f": 5}, "f": {"e": 6}}
    cycles = _cycles(graph)
    assert sorted(map(sorted, cycles)) == [["a", "b", "c"], ["e", "f"]]
    assert _loop(graph, frozenset("abc")) == "a (line 1) -> b (line 2) -> c (line 3) -> a"
    assert _compare(cycles, {frozenset("abc")}) == ([frozenset("ef")], [])
    assert _compare(cycles, {frozenset("abc"), frozenset("ef"), frozenset("xy")}) == ([], [frozenset("xy")])
    assert _compare(cycles, {frozenset("ab"), frozenset("ef")}) == ([frozenset("abc")], [frozenset("ab")])


def test_no_import_cycles_but_the_known_ones():
    cycles = _cycles(GRAPH)
    new, gone = _compare(cycles, KNOWN_CYCLES)
    assert not new, "import cycle(s):\n" + "\n".join(_describe(GRAPH, c) for c in new)
    assert not gone, ("a known cycle of KNOWN_CYCLES no longer exists as written (removed, or its members changed): "
                      "update KNOWN_CYCLES:\n" + "\n".join(str(sorted(c)) for c in gone)
                      + "\nthe cycles now: " + ("; ".join(str(sorted(c)) for c in cycles) or "none"))


def test_directml_command_is_registered_by_the_backend(capsys):
    from harness.cli import main
    with pytest.raises(SystemExit) as exit_:
        main(["directml", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: dmlconform directml [-h] {pack,unpack} ...")
    assert "write a relocatable archive of the set-up DirectML stack" in out and "unpack an archive into a directory" in out


def test_a_missing_backend_command_is_one_line_and_exit_2(monkeypatch, capsys):
    import harness.commands
    from harness.cli import main
    monkeypatch.setattr(harness.commands, "command_entry_points", lambda: {})  # an installation without DirectML
    assert main(["directml", "pack", "stack.tar.xz"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("dmlconform directml: unavailable: the DirectML backend is not installed "
                            "(no 'directml' entry point in the dmlconform.commands group)\n")
    assert main(["spec", "schema"]) == 0  # every other command is unaffected


def test_a_backend_command_that_does_not_load_is_one_line_and_exit_2(monkeypatch, capsys):
    from harness.cli import main
    monkeypatch.setenv("DMLCONFORM_EXTRA_COMMANDS", "directml=no_such_package.cli:register")
    assert main(["directml", "unpack", "a.tar.xz", "dir"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dmlconform directml: unavailable: the DirectML backend does not load (no_such_package.cli:register): ")
    assert err.count("\n") == 1


def test_directml_dlls_lists_the_known_versions_offline():
    """`list` reads backends/directml/versions.yaml only (no network); the tool is found through
    the dmlconform.commands entry points."""
    versions = yaml.safe_load((ROOT / "backends" / "directml" / "versions.yaml").read_text())["versions"]
    proc = subprocess.run([sys.executable, "-m", "harness.directml_dlls", "list"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.splitlines() == [f"wheel {v['wheel']:8} DirectML {v['directml']:8} max FL {v['max_feature_level']}"
                                        for v in versions]


def test_running_the_dlls_module_itself_warns_nothing():
    """`python -m backends.directml.dlls` (scripts/setup_directml.sh): its package does not import
    it first (which made runpy warn: found in sys.modules ... prior to execution)."""
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "backends.directml.dlls", "list"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_spec_table_asks_the_onnxruntime_backend(capsys):
    from backends.onnxruntime_backend import load_mappings
    from harness.cli import main
    from harness.spec.inventory import inventory_markdown
    from harness.spec.load import load_specs
    assert main(["spec", "table"]) == 0
    assert capsys.readouterr().out == inventory_markdown(load_specs(), set(load_mappings())) + "\n"
