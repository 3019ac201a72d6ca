"""The layout's rules, read from the code's own imports (ast): no import cycle inside engine/ or studio/, the
engine never imports gradio, the studio imports no training library at module level, and only the studio's
page builders import gradio."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from engine.store.paths import PROJECT_ROOT

HEAVY = ("torch", "transformers", "trl", "peft", "bitsandbytes", "datasets", "accelerate")


def _modules(package: str) -> dict[str, Path]:
    """module name -> file, for every module of a package."""
    found = {}
    for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(PROJECT_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``: imports for annotations only, never run (import-linter leaves them out
    the same way). RunConfig is composed from the methods' sections, so a method names it in annotations only."""
    blocks = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    ]
    return {id(inner) for block in blocks for statement in block.body for inner in ast.walk(statement)}


def _imports(path: Path, module: str) -> list[tuple[str, ast.stmt, bool]]:
    """(imported name, statement, at module level) for every import in a file that runs, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    top_level = {id(node) for node in tree.body}
    annotations_only = _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in annotations_only:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, node, id(node) in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            found += [(f"{base}.{alias.name}", node, id(node) in top_level) for alias in node.names]
            found.append((base, node, id(node) in top_level))
    return found


def _edges(package: str) -> dict[str, set[str]]:
    """Which modules of the package each module imports (anywhere in the file; a package's __init__ handing on
    its own submodules is not an edge)."""
    modules = _modules(package)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for imported, _, _ in _imports(path, name):
            target = imported
            while target and target not in modules:
                target = target.rpartition(".")[0]
            is_facade = path.name == "__init__.py" and target.startswith(name + ".")
            if target and target != name and not is_facade:
                edges[name].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("package", ["engine", "studio"])
def test_no_import_cycle(package: str) -> None:
    assert _cycles(_edges(package)) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_engine_never_imports_gradio() -> None:
    offenders = [
        f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}"
        for name, path in _modules("engine").items()
        for imported, node, _ in _imports(path, name)
        if imported.split(".")[0] == "gradio"
    ]
    assert offenders == []


def test_studio_imports_no_training_library_at_module_level() -> None:
    offenders = [
        f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} {imported}"
        for name, path in _modules("studio").items()
        for imported, node, top in _imports(path, name)
        if top and imported.split(".")[0] in HEAVY
    ]
    assert offenders == []


def _builds_the_page(path: Path) -> bool:
    """app.py, and in each folder the tab it builds (tab.py) and the widgets more than one place builds with."""
    relative = path.relative_to(PROJECT_ROOT / "studio")
    return relative.as_posix() == "app.py" or (len(relative.parts) == 2 and path.name in ("tab.py", "widgets.py"))


def test_only_the_page_builders_import_gradio() -> None:
    offenders = [
        f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}"
        for name, path in _modules("studio").items()
        if not _builds_the_page(path)
        for imported, node, _ in _imports(path, name)
        if imported.split(".")[0] == "gradio"
    ]
    assert offenders == []
