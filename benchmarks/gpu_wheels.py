"""Two steps of benchmarks/gpu_prepare.sh, on what a GPU check carries to a lent machine:

    python benchmarks/gpu_wheels.py slim .whl/bitsandbytes-*.whl --keep cpu cuda130
    python benchmarks/gpu_wheels.py slim .whl/transformers-*.whl --models auto llama llava clip --scan .whl engine
    python benchmarks/gpu_wheels.py slim .whl/sqlalchemy-*.whl --pure-python
    python benchmarks/gpu_wheels.py size . --limit-mib 64 --exclude .git .venv

``slim`` rewrites a wheel in place without what the check never loads, and the wheel's RECORD loses the lines of
what went, so pip installs it as any wheel (a device call carries 64 MiB):

- ``--keep BACKEND...``: native libraries of other backends go. bitsandbytes ships one
  ``libbitsandbytes_<backend>.so`` per CUDA, ROCm and XPU version (43 MB in all); a library is kept when its backend
  starts with one of ``--keep``.
- ``--models FAMILY...``: transformers' model families (``transformers/models/<family>/``, 10 of its 12 MiB) other
  than these are cut to their ``__init__.py`` and ``tokenization_*.py`` files (and what those import). Also kept
  whole: every family that transformers' other modules, a kept family's modules or a ``--scan`` source import at
  module level (``from ..llama.modeling_llama import ...``, ``from transformers import BloomPreTrainedModel``: a name
  resolves to the file whose ``__all__`` exports it), and so on until nothing new is kept. In a folder or file given
  to ``--scan`` (this project's own code) an import counts wherever it stands; in a wheel only at module level and
  outside a ``try`` that goes on without it: TRL, peft and Liger import a family's modules inside the functions for
  that family (``apply_liger_kernel_to_mixtral``), which a run of another family never calls. Files that nothing
  imports at run time are not read (``modular_*.py``, ``convert_*.py``: transformers' import structure skips them
  too). What a cut family keeps answers the lookups by name that reach every family: the auto classes import, in
  order, each family that their tables list with a wanted class (``CLIPImageProcessor`` is listed under aimv2,
  altclip, ... before clip) and go on past one that lacks it; and ``transformers.BertTokenizer`` (any tokenizer
  class, through its alias search) would recurse without end were its file gone.
- ``--pure-python``: compiled modules that have their Python source beside them (``x_cy.cpython-312-*.so`` next to
  ``x_cy.py``, as SQLAlchemy 2.1 ships its Cython speed-ups) go; Python then imports the source.

``size`` sums what a device call carries from the repository: the files git would copy (tracked, and untracked ones
it does not ignore) plus the ignored folders named on the command line's carry (``.whl``, ``.gpu``), and exits 1 past
the limit.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

NATIVE = re.compile(r"^(?P<package>[^/]+)/lib\w+?_(?P<backend>[a-z]+\d*)\.so$")
COMPILED = re.compile(r"^(?P<module>.+)\.cpython-\d+-[\w-]+\.so$")
FAMILY = re.compile(r"^transformers/models/(?P<family>[^/]+)/(?P<rest>.+)$")
NOT_IMPORTED = ("modular_", "convert_")  # transformers' sources for its own tools, never imported at run time
OPTIONAL = ("ImportError", "ModuleNotFoundError", "Exception", "BaseException")  # an import that may fail
CARRIED = (".whl", ".gpu")  # the ignored folders the device call names in carry


def rewrite(wheel: Path, drop: Callable[[list[str]], set[str]]) -> list[str]:
    """Rewrite ``wheel`` in place without the entries ``drop`` picks from its names (and their RECORD lines); the
    names of what went."""
    with zipfile.ZipFile(wheel) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    dropped = drop([info.filename for info, _ in entries])
    slimmed = wheel.with_suffix(".slim")
    with zipfile.ZipFile(slimmed, "w", zipfile.ZIP_DEFLATED) as target:
        for info, data in entries:
            if info.filename in dropped:
                continue
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if line.split(",")[0] not in dropped).encode()
            target.writestr(info, data)
    slimmed.replace(wheel)
    return sorted(dropped)


def other_backends(keep: list[str]) -> Callable[[list[str]], set[str]]:
    """The native libraries whose backend matches none of ``keep``."""

    def drop(names: list[str]) -> set[str]:
        return {
            name
            for name in names
            if (found := NATIVE.match(name)) and not any(found["backend"].startswith(token) for token in keep)
        }

    return drop


def compiled_with_source(names: list[str]) -> set[str]:
    """The compiled modules whose Python source the wheel also holds."""
    present = set(names)
    return {name for name in names if (found := COMPILED.match(name)) and f"{found['module']}.py" in present}


def imported_modules(tree: ast.Module, package: list[str], anywhere: bool) -> Iterator[tuple[list[str], list[str]]]:
    """(module, imported names) of each import in ``tree``, relative ones resolved against ``package``: at module
    level (in classes, ``try`` and ``if`` blocks too; not in functions), or anywhere; never one under ``if
    TYPE_CHECKING`` nor one in a ``try`` that goes on without it (``except ImportError``, ``except Exception``)."""

    def walk(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
        for node in nodes:
            if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                yield from walk(node.orelse)
                continue
            if isinstance(node, ast.Try) and any(map(optional, node.handlers)):
                yield from walk([*node.handlers, *node.orelse, *node.finalbody])
                continue
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and not anywhere:
                continue
            yield node
            yield from walk(ast.iter_child_nodes(node))

    for node in walk(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split("."), []
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            yield base + (node.module.split(".") if node.module else []), [alias.name for alias in node.names]


def optional(handler: ast.ExceptHandler) -> bool:
    """Whether an ``except`` clause catches a failed import."""
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(kind is None or ast.unparse(kind) in OPTIONAL for kind in caught)


def files_imported(
    tree: ast.Module, package: list[str], anywhere: bool, files: set[str], exports: dict[str, str]
) -> set[str]:
    """The files of a transformers wheel (``files``) that the imports of ``tree`` reach: a module, a package's
    ``__init__.py``, a submodule imported from a package, or the file whose ``__all__`` exports a name imported from a
    package (``from transformers import BloomPreTrainedModel``: ``exports`` maps names to files)."""
    found = set()
    for module, names in imported_modules(tree, package, anywhere):
        if module[:1] != ["transformers"]:
            continue
        path = "/".join(module)
        found |= {f"{path}.py", f"{path}/__init__.py"} & files
        for name in names:
            found |= {f"{path}/{name}.py", f"{path}/{name}/__init__.py"} & files
            if f"{path}/__init__.py" in files and name in exports:
                found.add(exports[name])
    return found


def parse(name: str, text: bytes) -> ast.Module | None:
    """The syntax tree of a Python file, or None (said on stderr: its imports go unseen) when this interpreter
    cannot parse it."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        print(f"warning: {name} does not parse here ({exc}): its imports are not followed", file=sys.stderr)
        return None


def python_sources(source: Path, skip: str) -> Iterator[tuple[str, bytes, bool]]:
    """(path, text, anywhere) of each Python file of a ``--scan`` source that names transformers: a wheel, or a
    folder of wheels (those of the distribution ``skip`` left out), or this project's code (a folder or a file)."""
    wheels = [source] if source.suffix == ".whl" else sorted(source.glob("*.whl")) if source.is_dir() else []
    for wheel in wheels:
        if wheel.name.split("-")[0] != skip:
            with zipfile.ZipFile(wheel) as archive:
                for name in archive.namelist():
                    if name.endswith(".py") and b"transformers" in (text := archive.read(name)):
                        yield name, text, False
    if not wheels:
        for path in sorted(source.rglob("*.py")) if source.is_dir() else [source]:
            if b"transformers" in (text := path.read_bytes()):
                yield str(path), text, True


def family(name: str) -> str | None:
    found = FAMILY.match(name)
    return found["family"] if found else None


def kept_transformers(wheel: Path, models: list[str], scan: list[Path]) -> tuple[set[str], set[str]]:
    """What a transformers ``wheel`` keeps of its model families: (the families kept whole, the files kept of the
    others). Whole: ``models``, and every family imported (as the module docstring says) by transformers' other
    modules, a kept family or a ``scan`` source, until nothing new is kept. Of the others: the ``__init__.py``, the
    ``tokenization_*.py`` files and what they import."""
    with zipfile.ZipFile(wheel) as archive:
        texts = {name: archive.read(name) for name in archive.namelist() if name.endswith(".py")}
    families = {found for name in texts if (found := family(name))}
    unknown = set(models) - families
    if unknown:
        raise SystemExit(f"{wheel.name} has no model family {', '.join(sorted(unknown))}")
    trees = {
        name: tree
        for name, text in texts.items()
        if not name.split("/")[-1].startswith(NOT_IMPORTED) and (tree := parse(name, text)) is not None
    }
    exports: dict[str, str] = {}
    for name, tree in trees.items():
        if family(name):
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                    exports |= dict.fromkeys(ast.literal_eval(node.value), name)
    files = set(texts)
    # What each module imports at module level (relative imports resolved against its folder).
    reaches = {name: files_imported(tree, name.split("/")[:-1], False, files, exports) for name, tree in trees.items()}
    wanted = set(models)
    for name, reached in reaches.items():
        if not family(name):
            wanted |= {found for path in reached if (found := family(path))}
    for source in scan:
        for name, text, anywhere in python_sources(source, wheel.name.split("-")[0]):
            if (tree := parse(name, text)) is not None:
                reached = files_imported(tree, [], anywhere, files, exports)
                wanted |= {found for path in reached if (found := family(path))}
    todo = list(wanted)
    while todo:
        kept = todo.pop()
        for name, reached in reaches.items():
            if family(name) == kept:
                new = {found for path in reached if (found := family(path))} - wanted
                wanted |= new
                todo.extend(new)
    partial = {
        name
        for name in files
        if family(name) not in (None, *wanted)
        and (FAMILY.match(name)["rest"] == "__init__.py" or name.split("/")[-1].startswith("tokenization_"))
    }
    todo = list(partial)
    while todo:
        new = {path for path in reaches.get(todo.pop(), set()) if family(path) not in wanted} - partial
        partial |= new
        todo.extend(new)
    return wanted, partial


def other_families(whole: set[str], partial: set[str]) -> Callable[[list[str]], set[str]]:
    """Every file of a model family not in ``whole`` but those in ``partial``."""

    def drop(names: list[str]) -> set[str]:
        return {name for name in names if family(name) not in (None, *whole) and name not in partial}

    return drop


def carried_bytes(root: Path, exclude: list[str]) -> int:
    """The bytes a device call carries from ``root``: git's tracked and unignored files, and the CARRIED folders."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    files = {root / name for name in listed if name and name.split("/")[0] not in exclude}
    for folder in CARRIED:
        files |= {path for path in (root / folder).rglob("*")}
    return sum(path.stat().st_size for path in files if path.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    slim_step = steps.add_parser("slim", help="drop from a wheel what the GPU check never loads")
    slim_step.add_argument("wheel", type=Path)
    how = slim_step.add_mutually_exclusive_group(required=True)
    how.add_argument("--keep", nargs="+", help="native libraries: the backends kept (cpu cuda130 ...)")
    how.add_argument("--models", nargs="+", help="transformers: the model families kept (auto llama ...)")
    how.add_argument("--pure-python", action="store_true", help="compiled modules that have their source beside")
    slim_step.add_argument("--scan", nargs="*", type=Path, default=[], help="with --models: wheels, folders of code")
    size_step = steps.add_parser("size", help="what a device call carries, against its limit")
    size_step.add_argument("root", type=Path)
    size_step.add_argument("--limit-mib", type=float, default=64.0)
    size_step.add_argument("--exclude", nargs="*", default=[".git", ".venv"])
    args = parser.parse_args()
    if args.step == "slim":
        before = args.wheel.stat().st_size
        if args.keep:
            dropped = rewrite(args.wheel, other_backends(args.keep))
            what = f"{len(dropped)} libraries dropped; kept {', '.join(args.keep)}"
        elif args.models:
            whole, partial = kept_transformers(args.wheel, args.models, args.scan)
            dropped = rewrite(args.wheel, other_families(whole, partial))
            cut = {family(name) for name in dropped}
            what = (
                f"{len(cut)} model families cut to their __init__.py and tokenizers ({len(partial)} files kept); "
                f"kept whole: {', '.join(sorted(whole))}"
            )
        else:
            dropped = rewrite(args.wheel, compiled_with_source)
            what = f"{len(dropped)} compiled modules dropped, their Python source kept"
        print(f"{args.wheel.name}: {before / 2**20:.1f} -> {args.wheel.stat().st_size / 2**20:.1f} MiB ({what})")
        return 0
    size = carried_bytes(args.root.resolve(), args.exclude) / 2**20
    fits = size <= args.limit_mib
    print(f"a device call carries {size:.1f} MiB of the {args.limit_mib:g} MiB it may: {'fits' if fits else 'TOO BIG'}")
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main())
