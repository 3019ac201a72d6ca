"""The layout of a workspace: the one place that says where its runs, jobs, exports, uploads and handshake
files live. Standard library only.

```
runs/<time>-<hex>-<name>/   one run directory each (engine.store.rundir)
jobs/<time>-<hex>-<kind>/   evaluate and export jobs (engine.runs.jobs)
exports/                    exported adapters and merged models, each with its .zip (demo mode: the one export a
                            visitor keeps, in exports/visitors/<owner>/)
datasets/                   files uploaded on the Train tab (demo mode: visitors/<owner>/datasets/)
configs/                    configs saved from the Train tab
cache/images/               images held inside datasets, written out (engine.data.embedded_images; the studio's)
trackio/                    trackio's projects (PROJECT.db), for runs that report to trackio (engine.training.trackers)
studio/recent_models.json   the Train tab's recent models
.standby/                   the warm standby's handshake files (engine.runs.standby)
.start.lock                 one Start at a time, across studios on the same workspace
.visitor-key                demo mode: the key that signs visitor tokens (never sent to a browser)
```
"""

from __future__ import annotations

from pathlib import Path

RUNS_DIR = "runs"
JOBS_DIR = "jobs"
EXPORTS_DIR = "exports"
DATASETS_DIR = "datasets"
CONFIGS_DIR = "configs"
VISITORS_DIR = "visitors"
RECENT_MODELS_FILE = "studio/recent_models.json"
STANDBY_DIR = ".standby"
START_LOCK_FILE = ".start.lock"
VISITOR_KEY_FILE = ".visitor-key"
TRACKIO_DIR = "trackio"
IMAGE_CACHE_DIR = "cache/images"


def runs_dir(workspace: Path) -> Path:
    """Where a workspace's run directories live."""
    return Path(workspace) / RUNS_DIR


def jobs_dir(workspace: Path) -> Path:
    """Where a workspace's background jobs (evaluate, export) live."""
    return Path(workspace) / JOBS_DIR


def exports_dir(workspace: Path) -> Path:
    """Where a workspace's exports go (resolved: exports are confined to it)."""
    return Path(workspace).resolve() / EXPORTS_DIR


def visitor_exports_dir(workspace: Path, owner: str) -> Path:
    """Where demo mode keeps one visitor's export (inside exports_dir, where every export must lie)."""
    return exports_dir(workspace) / VISITORS_DIR / owner


def datasets_dir(workspace: Path) -> Path:
    """Where the Train tab keeps uploaded datasets."""
    return Path(workspace) / DATASETS_DIR


def visitor_datasets_dir(workspace: Path, owner: str) -> Path:
    """Where demo mode keeps one visitor's uploaded datasets."""
    return Path(workspace) / VISITORS_DIR / owner / DATASETS_DIR


def configs_dir(workspace: Path) -> Path:
    """Where the Train tab saves configs."""
    return Path(workspace) / CONFIGS_DIR


def trackio_dir(workspace: Path) -> Path:
    """Where trackio keeps the projects of the workspace's runs (its TRACKIO_DIR; resolved, as trackio is told)."""
    return Path(workspace).resolve() / TRACKIO_DIR


def image_cache_of(workspace: Path) -> Path:
    """Where a studio on this workspace writes the images its datasets hold (resolved: its runs inherit it)."""
    return Path(workspace).resolve() / IMAGE_CACHE_DIR


def recent_models_file(workspace: Path) -> Path:
    """The Train tab's list of recently used models."""
    return Path(workspace) / RECENT_MODELS_FILE


def standby_dir(workspace: Path) -> Path:
    """Where a workspace's warm standby keeps its handshake files."""
    return Path(workspace) / STANDBY_DIR


def start_lock_file(workspace: Path) -> Path:
    """The lock file that lets one starter at a time start a run in the workspace."""
    return Path(workspace) / START_LOCK_FILE


def visitor_key_file(workspace: Path) -> Path:
    """Demo mode's key that signs visitor tokens (kept, so a studio restart keeps its visitors)."""
    return Path(workspace) / VISITOR_KEY_FILE


def workspace_of(run_dir: Path) -> Path | None:
    """The workspace holding a run (``WORKSPACE/runs/<id>``), or None for a run directory elsewhere."""
    run_dir = Path(run_dir).resolve()
    return run_dir.parent.parent if run_dir.parent.name == RUNS_DIR else None
