"""The catalog of the checks' messages as a whole: every ``check.<name>`` key is in every language with the same
placeholders, their English stays in the engine (beside the checks), no validator writes its message inline, and
every table of such messages is collected (engine.api.CHECK_MESSAGES). Each check said in the visitor's language:
tests/studio/test_check_translations.py."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from engine.api import CHECK_MESSAGES
from engine.store.paths import PROJECT_ROOT
from studio.i18n import catalog
from studio.i18n.catalog import LANGUAGES, SOURCE, translations

OTHERS = [lang for lang in LANGUAGES if lang != SOURCE]
# Where the engine's validators live: the run config (its sections and the schema's base), the sweep file, the methods'.
VALIDATOR_DIRS = ("engine/config", "engine/sweeps", "engine/training/methods")


def test_every_check_key_is_in_every_language() -> None:
    names = set(catalog.check_words())
    assert len(names) >= 79
    for lang in LANGUAGES:
        assert sorted(names - set(translations(lang))) == [], lang
    for lang in OTHERS:
        for name in names:
            assert catalog.placeholders(translations(lang)[name]) == catalog.placeholders(catalog.english()[name])


def test_the_checks_english_stays_in_the_engine() -> None:
    """en.json holds the studio's words only: the checks' English is written beside the checks."""
    assert sorted(set(catalog.check_words()) & set(catalog.language_file(SOURCE))) == []


# --- no validator writes its message inline -------------------------------------------------------------------


def _validator_modules() -> list[Path]:
    return sorted(path for folder in VALIDATOR_DIRS for path in (PROJECT_ROOT / folder).rglob("*.py"))


def _inline(node: ast.AST | None) -> bool:
    """Whether ``node`` is text written in place: a string, an f-string, one joined with ``+`` or ``%``, a string's
    ``.format(...)``, or one of them picked by ``... if ... else ...``."""
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return True
    if isinstance(node, ast.BinOp):
        return _inline(node.left) or _inline(node.right)
    if isinstance(node, ast.IfExp):
        return _inline(node.body) or _inline(node.orelse)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _inline(node.func.value)
    return False


def _raises_inline(node: ast.AST) -> bool:
    """Whether ``node`` raises a ValueError (or AssertionError, which pydantic reports too) with its words in place."""
    if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
        return False
    return getattr(node.exc.func, "id", "") in ("ValueError", "AssertionError") and _inline(node.exc.args[0])


def _is_validator(function: ast.FunctionDef) -> bool:
    """A pydantic validator: decorated with field_validator / model_validator (called, or named alone)."""
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name.endswith("_validator"):
            return True
    return False


def _inline_messages(path: Path) -> list[str]:
    """Where a validator of ``path`` raises a ValueError (or AssertionError) with its words written in place, and
    where a ``*_problem`` function (the reason a value is refused: a name, a secret, a pattern) returns them."""
    found = []
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(function, ast.FunctionDef):
            continue
        validator, reason = _is_validator(function), function.name.endswith("_problem")
        for node in ast.walk(function):
            if (validator and _raises_inline(node)) or (
                reason and isinstance(node, ast.Return) and _inline(node.value)
            ):
                found.append(f"{path.name}:{node.lineno} {function.name}")
    return found


def test_no_validator_writes_its_message_inline() -> None:
    """A check's message is a named template beside it (a ``*_MESSAGES`` table), so the studio can say it again."""
    modules = _validator_modules()
    assert any(path.name == "sections.py" for path in modules)
    found = [where for path in modules for where in _inline_messages(path)]
    assert found == [], "write these messages as named templates beside their checks: " + ", ".join(found)


def test_the_inline_check_finds_a_message_written_in_place(tmp_path: Path) -> None:
    """The check above is no vacuous pass: a validator and a reason written the old way are found."""
    source = tmp_path / "section.py"
    source.write_text(
        "class S:\n"
        "    @field_validator('x')\n"
        "    @classmethod\n"
        "    def _x(cls, value):\n"
        "        raise ValueError(f'bad {value}')\n"
        "def name_problem(name):\n"
        "    return 'give a name'\n"
    )
    assert sorted(_inline_messages(source)) == ["section.py:5 _x", "section.py:7 name_problem"]


def _tables_defined(path: Path) -> list[str]:
    """The names of the ``*_MESSAGES`` tables that ``path`` assigns at module level."""
    names = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names += [target.id for target in targets if isinstance(target, ast.Name) and target.id.endswith("_MESSAGES")]
    return names


def test_every_table_of_messages_is_collected() -> None:
    """Each ``*_MESSAGES`` table of the modules with validators is the catalog's: a check's (engine.api's
    CHECK_MESSAGES) or a rule across fields' (catalog.rule_words); a new table that neither collects fails here."""
    rules, seen = set(catalog.rule_words()), 0
    for path in _validator_modules():
        names = _tables_defined(path)
        if not names:
            continue
        parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
        # A package's tables are its own module's (engine.config), not a second copy under "engine.config.__init__".
        module = importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        for name in names:
            table, seen = getattr(module, name), seen + 1
            collected = any(table is known for known in CHECK_MESSAGES)
            assert collected or {f"rule.{rule}" for rule in table} <= rules, f"{path.name}: {name} is not collected"
    assert seen >= len(CHECK_MESSAGES)
