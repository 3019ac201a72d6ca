"""The layout's rules, read from the code's own imports (ast): no import cycle inside engine/ or studio/, the
engine never imports gradio, the studio imports no training library at module level, and only the studio's
page builders import gradio."""

from __future__ import annotations

import ast
import fnmatch
import re
import typing
from pathlib import Path

import pytest

from engine.store.paths import PROJECT_ROOT

HEAVY = ("torch", "transformers", "trl", "peft", "bitsandbytes", "datasets", "accelerate", "lm_eval")


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


def _folders(edges: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The module graph drawn by folder: studio.train.actions -> studio.form.schema is train -> form (a module at
    the package's top is a folder of its own)."""

    def folder(module: str) -> str:
        return ".".join(module.split(".")[:2]) if module != package else module

    graph: dict[str, set[str]] = {}
    for source, targets in edges.items():
        graph.setdefault(folder(source), set()).update(folder(t) for t in targets if folder(t) != folder(source))
    return graph


def test_no_studio_folder_imports_in_a_circle() -> None:
    """Folder by folder the studio's imports run one way (form below i18n below the tabs; nothing back up), as
    ``farm-studio look studio`` draws them: a folder whose modules sit on two floors shows as a loop here."""
    assert _cycles(_folders(_edges("studio"), "studio")) == []


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
    """app.py and context.py (what the tabs share, and how their events are wired), and in each folder the tab it
    builds (tab.py) and the widgets it builds with (widgets.py, or *_widgets.py: the Train tab's config form)."""
    relative = path.relative_to(PROJECT_ROOT / "studio")
    return relative.as_posix() in ("app.py", "context.py") or (
        len(relative.parts) == 2 and (path.name == "tab.py" or path.name.endswith("widgets.py"))
    )


def test_only_the_page_builders_import_gradio() -> None:
    offenders = [
        f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}"
        for name, path in _modules("studio").items()
        if not _builds_the_page(path)
        for imported, node, _ in _imports(path, name)
        if imported.split(".")[0] == "gradio"
    ]
    assert offenders == []


# The engine's floors, lowest first: a module imports only from its own floor or below. Modules are matched by
# the longest pattern (fnmatch). A method's package spans two floors: its record and section sit below the config
# (which composes RunConfig from them), its trainer module beside the training code it calls (engine.training.methods).
ENGINE_FLOORS: tuple[tuple[str, ...], ...] = (
    ("engine",),
    ("engine.store*",),
    ("engine.config.schema*",),
    ("engine.training.methods*",),
    ("engine.config*",),
    ("engine.data*", "engine.runs*"),
    ("engine.training*", "engine.training.methods.*.trainer"),
    ("engine.evaluate*", "engine.chat*", "engine.training.methods.*.scoring"),
    ("engine.export*", "engine.sweeps*"),
    ("engine.cli*", "engine.api"),  # the command line: the engine.cli package (engine.cli.train, ...)
    ("engine.__main__",),
)


def _floor(module: str) -> int:
    """The floor of an engine module: that of the longest pattern it matches."""
    matches = [
        (len(pattern), floor)
        for floor, patterns in enumerate(ENGINE_FLOORS)
        for pattern in patterns
        if fnmatch.fnmatchcase(module, pattern)
    ]
    assert matches, f"{module} is on no floor of ENGINE_FLOORS"
    return max(matches)[1]


def test_no_engine_import_runs_back_up_a_floor() -> None:
    upward = sorted(
        f"{module} (floor {_floor(module)}) imports {target} (floor {_floor(target)})"
        for module, targets in _edges("engine").items()
        for target in targets
        if _floor(target) > _floor(module)
    )
    assert upward == []


def test_the_floor_check_finds_an_upward_import() -> None:
    assert _floor("engine.config") > _floor("engine.training.methods.dpo.section")
    assert _floor("engine.training.methods.dpo.trainer") > _floor("engine.config") > _floor("engine.training.methods")


def _method_name_uses(path: Path) -> list[str]:
    """Where a file names a training method in code: a string equal to a method's name (a data format of the same
    name, kto, is the data's word, not the method's), or an attribute named after one (``config.grpo``)."""
    from engine.config.data import DataSection
    from engine.training.methods import METHODS

    formats = set(typing.get_args(DataSection.model_fields["format"].annotation))
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Constant) and node.value in METHODS and node.value not in formats:
            found.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr in METHODS:
            found.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} .{node.attr}")
    return found


def test_only_a_methods_own_package_names_it_in_code() -> None:
    """No ``if method == "grpo"`` and no ``config.dpo`` outside engine/training/methods/: what differs between methods
    is asked of their Method record, so adding one changes no other file."""
    offenders = [
        use
        for package in ("engine", "studio")
        for path in sorted((PROJECT_ROOT / package).rglob("*.py"))
        if not path.is_relative_to(PROJECT_ROOT / "engine" / "training" / "methods")
        for use in _method_name_uses(path)
    ]
    assert offenders == []


def test_the_method_name_check_finds_a_dispatch(tmp_path: Path) -> None:
    sneaky = PROJECT_ROOT / "engine" / "_probe_method_names.py"
    try:
        sneaky.write_text('def f(config):\n    return config.method == "grpo" or config.dpo.beta\n', encoding="utf-8")
        assert [use.split(" ")[1] for use in _method_name_uses(sneaky)] == ["'grpo'", ".dpo"]
    finally:
        sneaky.unlink()


# Methods added after the seam was built: their names appear nowhere in engine/ or studio/ outside their own package
# and the registry, not even in a comment (the locales, outside both folders, name them too).
NEWER_METHODS: tuple[str, ...] = ("rloo", "rm")


@pytest.mark.parametrize("name", NEWER_METHODS)
def test_a_newer_method_touches_nothing_outside_its_package(name: str) -> None:
    allowed = {PROJECT_ROOT / "engine" / "training" / "methods" / "__init__.py"}
    word = re.compile(rf"\b{re.escape(name)}\b", re.IGNORECASE)
    offenders = [
        str(path.relative_to(PROJECT_ROOT))
        for package in ("engine", "studio")
        for path in sorted((PROJECT_ROOT / package).rglob("*.py"))
        if not path.is_relative_to(PROJECT_ROOT / "engine" / "training" / "methods" / name) and path not in allowed
        if word.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_worker_a_fork_runs_is_where_the_supervisor_names_it() -> None:
    """The supervisor names its forked worker by module, as a cold start names it by command: the name must hold."""
    import importlib

    from engine.runs.supervisor import FORKED_WORKER

    worker = importlib.import_module(FORKED_WORKER)
    assert callable(worker.train_forked) and callable(worker.exit_forked)


def test_the_studio_reaches_the_engine_through_engine_api_alone() -> None:
    """engine/api.py is the studio's one door into the engine: documented, light, and the place to look for what
    the studio may do with runs."""
    offenders = sorted(
        f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} {imported}"
        for name, path in _modules("studio").items()
        for imported, node, _ in _imports(path, name)
        if imported.split(".")[0] == "engine" and not imported.startswith("engine.api")
    )
    assert offenders == []


def test_the_engine_api_imports_no_training_library() -> None:
    import subprocess
    import sys

    heavy = ("torch", "transformers", "trl", "peft", "datasets", "bitsandbytes", "lm_eval")
    code = f"import sys, engine.api; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT)
    assert out.stdout.strip() == "[]"


def _python(code: str) -> str:
    """What a fresh interpreter in the project prints running ``code``."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("first", ["engine.training.methods", "engine.training.methods.dpo.section", "engine.config"])
def test_the_config_and_the_methods_import_in_either_order(first: str) -> None:
    """The methods' sections build on engine.config.schema, whose package composes RunConfig from the methods: the
    package hands RunConfig on when first asked for (engine/config/__init__.py), so a fresh process may import
    either side first."""
    code = (
        f"import sys, {first}; methods_first = 'engine.training.methods' in sys.modules\n"
        "from engine.config import RunConfig, parse_config\n"
        "print(methods_first, sorted(RunConfig.model_fields) == sorted(parse_config({}).model_dump()))"
    )
    assert _python(code).split() == [str(first != "engine.config"), "True"]


def test_the_config_schema_imports_no_method() -> None:
    assert _python("import sys, engine.config.schema; print('engine.training.methods' in sys.modules)") == "False"
