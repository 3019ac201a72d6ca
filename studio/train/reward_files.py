"""A custom reward's Python file as the studio takes it: uploaded into the workspace (``WORKSPACE/rewards/``), and a
relative ``file:`` read from the workspace, not from the folder the studio was started in (which a person at the
page neither sees nor chooses). No Gradio here.

The engine reads a relative ``file:`` from its current directory, as the CLI's user expects; the studio hands it
the workspace's file by its full path (``resolved``), so the run's config.yaml names the file the run loads.
"""

from __future__ import annotations

import ast
from pathlib import Path

from engine.api import ConfigError, Method, Problem, RunConfig, method_of
from studio.i18n.catalog import SOURCE, SaidError, key, text
from studio.path_guard import confine_file
from studio.train.dataset import store_upload

REWARDS_DIR = "rewards"  # WORKSPACE/rewards/: the uploaded reward files
SUFFIX = ".py"
NO_FILE, NOT_PYTHON, BAD_PYTHON, NO_FUNCTION, STORED, UNREADABLE = (
    key(f"train.rewards.{name}")
    for name in ("no_file", "not_python", "bad_python", "no_function", "stored", "unreadable")
)


class RewardFileError(SaidError):
    """Why an uploaded reward file is not taken: its English as the message, said in the page's language with
    ``said``."""


def rewards_field(method: Method) -> str | None:
    """The form field of a method's reward functions (``<method>.rewards``), or None for a method without them."""
    learns_from_rewards = method.section is not None and "rewards" in method.section.model_fields
    return f"{method.name}.rewards" if learns_from_rewards else None


def rewards_dir(workspace: Path) -> Path:
    """Where the studio keeps uploaded reward files: ``WORKSPACE/rewards/``."""
    return Path(workspace) / REWARDS_DIR


def resolved(config: RunConfig, workspace: Path, lang: str = SOURCE) -> RunConfig:
    """``config`` with each custom reward's relative ``file:`` as the workspace's file of that name (its full path);
    ConfigError at the reward (``<method>.rewards.N``) whose file the workspace lacks, said in ``lang``."""
    method = method_of(config)
    field, specs = rewards_field(method), method.rewards(config)
    if field is None or not any(spec.kind == "custom" for spec in specs):
        return config
    root, problems, rewards = Path(workspace).resolve(), [], []
    for number, spec in enumerate(specs):
        given = Path(spec.file or "").expanduser()
        if spec.kind != "custom" or given.is_absolute():
            rewards.append(spec)
            continue
        path = root / given
        if not path.is_file():
            words = {"file": spec.file, "name": spec.label, "workspace": root}
            problems.append(Problem(f"{field}.{number}", text(NO_FILE, lang, **words)))
        rewards.append(spec.model_copy(update={"file": str(path)}))
    if problems:
        raise ConfigError(problems)
    settings = method.settings(config)
    return config.model_copy(update={method.name: settings.model_copy(update={"rewards": rewards})})


def functions_of(source: str, name: str) -> list[str]:
    """The public functions a reward file defines at its top level, in order, read without running it;
    RewardFileError when it is not valid Python or defines none."""
    try:
        tree = ast.parse(source, filename=name)
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise RewardFileError(BAD_PYTHON, upload=name, error=f"{getattr(exc, 'msg', exc)}{where}") from None
    defined = [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_")
    ]
    if not defined:
        raise RewardFileError(NO_FUNCTION, upload=name)
    return defined


def store_reward_file(source: str | Path, workspace: Path) -> tuple[str, list[str]]:
    """Copy an uploaded reward file into ``WORKSPACE/rewards/``: its ``file:`` as a custom reward names it (relative
    to the workspace, ``rewards/NAME.py``) and the functions it defines. A file of the same name and content is
    reused, a different one gets a numbered name. RewardFileError for a file that is not Python or defines no
    function (nothing is stored then); ValueError for a source outside the folders the studio may read."""
    source = Path(source)
    if source.suffix.lower() != SUFFIX:
        raise RewardFileError(NOT_PYTHON, upload=source.name)
    source = confine_file(source, workspace, "upload")
    try:
        functions = functions_of(source.read_text(encoding="utf-8"), source.name)
    except (OSError, UnicodeDecodeError) as exc:
        raise RewardFileError(UNREADABLE, upload=source.name, error=exc) from None
    target = store_upload(source, rewards_dir(workspace))
    return f"{REWARDS_DIR}/{target.name}", functions


def stored_note(file: str, functions: list[str], lang: str = SOURCE) -> str:
    """What the panel says of a stored upload, in ``lang``."""
    return text(STORED, lang, file=file, function=functions[0], functions=", ".join(functions))
