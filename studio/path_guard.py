"""Which paths the studio's handlers accept: those in the workspace, the bundled assets, Gradio's uploads, and
folders the person who started the studio allowed (``--allow-path`` / STUDIO_ALLOWED_PATHS); and which run
directory a run id picked in the browser names. A form's config is checked here on its way in
(studio.form.run_config).

Whoever can reach the page chooses these paths, so ``../`` tricks, absolute paths elsewhere and symlinks that
leave the allowed folders are refused, each with a message next to its field. Hub ids (org/name) stay allowed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from engine.api import (
    EMBEDDED_IMAGES_ENV,
    IMAGE_CACHE_ENV,
    IMAGE_ROOTS_ENV,
    PROJECT_ROOT,
    VISITORS_DIR,
    ConfigError,
    PathNotAllowed,
    Problem,
    RunConfig,
    confine,
    env_roots,
    find_local_path,
    image_cache_of,
    is_hub_id,
    model_source_fields,
    runs,
)

ALLOWED_PATHS_ENV = "STUDIO_ALLOWED_PATHS"
ASSETS_DIR = PROJECT_ROOT / "assets"
BUNDLED_DATASETS = ASSETS_DIR / "datasets"  # the demo sets shipped with the studio
# The config fields that name something on the server's disk (or a hub id; model.init_from: a run id of the
# workspace): each is confined to the allowed folders. Those that name a model (the base, distill's teacher) are
# marked so in the schema.
SERVER_PATH_FIELDS = (*model_source_fields(), "data.path", "data.eval_path", "model.init_from")


def gradio_upload_dir() -> Path:
    """Where Gradio keeps uploaded files (its own rule, read here without importing Gradio)."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio")


def chat_images_dir() -> Path:
    """Where Chat keeps the images of its conversations (studio.chat.images.kept_image): under the temp directory,
    from which Gradio shows a file, and outside its upload cache, which it sweeps by age."""
    return Path(tempfile.gettempdir()) / "ts-chat-images"


def private_copy(source: Path, parent: Path | None = None, prefix: str = "ts-") -> Path:
    """A copy of ``source`` in a new folder of its own (named ``prefix`` and random letters) under ``parent`` (the
    temp directory by default): for one visitor alone, and where Gradio may show it. A hard link costs no space
    where the folder shares the source's disk."""
    if parent is not None:
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = Path(tempfile.mkdtemp(prefix=prefix, dir=parent)) / source.name
    try:
        os.link(source, target)
    except OSError:  # another disk, or links not supported
        shutil.copyfile(source, target)
    return target


def allowed_roots(workspace: Path | None) -> list[Path]:
    """The folders a browser may name: the workspace, assets/, Gradio's uploads, STUDIO_ALLOWED_PATHS."""
    roots = [ASSETS_DIR, gradio_upload_dir(), *env_roots(ALLOWED_PATHS_ENV)]
    return [Path(workspace), *roots] if workspace is not None else roots


def image_roots(workspace: Path, demo: bool) -> list[Path]:
    """The folders the images of a dataset or a chat may come from: those a browser may name, or in demo mode the
    bundled sets' and the visitors' upload folders (a visitor names no other path); and Chat's kept images."""
    if demo:
        return [BUNDLED_DATASETS, Path(workspace) / VISITORS_DIR, chat_images_dir()]
    return [*allowed_roots(workspace), chat_images_dir()]


def confine_images(workspace: Path, demo: bool) -> None:
    """Hold this process's dataset checks, and the runs and jobs it starts, to ``image_roots`` (the engine reads
    IMAGE_ROOTS_ENV): a dataset the page may read cannot make the engine open any other file as an image. The
    images datasets hold are written inside the workspace (IMAGE_CACHE_ENV), unless whoever started the studio
    chose a cache; a demo refuses them (EMBEDDED_IMAGES_ENV)."""
    os.environ[IMAGE_ROOTS_ENV] = os.pathsep.join(str(root) for root in image_roots(workspace, demo))
    os.environ.setdefault(IMAGE_CACHE_ENV, str(image_cache_of(workspace)))
    if demo:  # a few kB of a visitor's Parquet could hold thousands of images to write (engine.data.embedded_images)
        os.environ[EMBEDDED_IMAGES_ENV] = "refuse"
    else:
        os.environ.pop(EMBEDDED_IMAGES_ENV, None)


def path_problem(value: str, roots: list[Path]) -> str | None:
    """Why the studio must not use ``value`` (a path or hub id), or None when it may."""
    local = find_local_path(value)
    if local is None and is_hub_id(value):
        return None
    try:
        # Not on disk: check where it would point all the same, so a refusal never tells whether a file exists.
        confine(local if local is not None else value, roots)
    except PathNotAllowed as exc:
        return str(exc)
    return None


def guard_config(config: RunConfig, workspace: Path | None) -> RunConfig:
    """``config`` unchanged when every path field is allowed, else ConfigError naming each field at fault."""
    roots = allowed_roots(workspace)
    problems = []
    for field, value in named_paths(config):
        problem = path_problem(value, roots)
        if problem:
            problems.append(Problem(field, problem))
    if problems:
        raise ConfigError(problems)
    return config


def named_paths(config: RunConfig, fields: tuple[str, ...] = SERVER_PATH_FIELDS) -> list[tuple[str, str]]:
    """(field, path) of every path the config names in ``fields``, empty ones left out: each dataset of a list in
    data.path on its own (``data.path.1``), so none escapes a check."""
    found = []
    for field in fields:
        section, name = field.split(".")
        value = getattr(getattr(config, section), name)
        if field == "data.path" and isinstance(value, list):
            found += [(f"{field}.{number}", entry.path) for number, entry in enumerate(value)]
        elif value:
            found.append((field, value))
    return found


def confine_file(path: str | Path, workspace: Path | None, what: str) -> Path:
    """The resolved ``path`` of a file the browser chose (``what``: 'upload', 'config file'), or ValueError."""
    try:
        return confine(path, allowed_roots(workspace))
    except PathNotAllowed as exc:
        raise PathNotAllowed(f"{what}: {exc}") from None


def resolve_run(workspace: Path, run_id: str) -> Path:
    """The directory of run ``run_id`` picked in the browser or named by an API call: the engine's own lookup
    (engine.runs.find_run), which refuses with a RunError any id that is not a run of this workspace: a path, a NUL
    byte or another control character, a link out of its runs folder."""
    return runs.find_run(workspace, run_id)
