"""Whose runs a visitor of a public demo may see and act on: a run records its owner as a digest of the visitor's
token (``owner_tag``), and every view and action on runs asks ``owns`` (outside demo mode, anyone owns every run)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

from engine.api import read_status, runs, runs_dir
from studio.path_guard import resolve_run


class DemoPolicy(Protocol):
    """What ownership asks of studio.demo.policy.DemoPolicy (which imports this module): whether the studio is a
    public demo, and the visitor a token stands for."""

    @property
    def enabled(self) -> bool: ...

    def visitor(self, token: object) -> str | None: ...


def owner_tag(visitor: str) -> str:
    """What a run records as its owner: a digest, so a status file never holds the token itself."""
    return hashlib.sha256(visitor.encode()).hexdigest()[:32]


def owns(policy: DemoPolicy, owner: str | None, visitor: str | None) -> bool:
    """Whether the visitor may see and act on a run whose status names ``owner`` (always, outside demo mode)."""
    if not policy.enabled:
        return True
    visitor = policy.visitor(visitor)
    return bool(visitor) and owner == owner_tag(visitor)


def owned_run_dirs(workspace: Path, policy: DemoPolicy, visitor: str | None) -> list[Path]:
    """The run directories the visitor may see (every run, outside demo mode)."""
    return [run_dir for run_dir in runs.run_dirs(workspace) if owns(policy, read_status(run_dir).owner, visitor)]


def check_owner(run_dir: Path, policy: DemoPolicy, visitor: str | None) -> Path:
    """``run_dir`` when the visitor owns it; else the same RunError as for a run that does not exist."""
    if not owns(policy, read_status(Path(run_dir)).owner, visitor):
        raise runs.RunError(f"no run {Path(run_dir).name!r} here")
    return Path(run_dir)


def owned_run(workspace: Path, run_id: str | None, policy: DemoPolicy, visitor: str | None) -> Path:
    """The run directory of a run id picked in the browser; RunError when it is not a run of the workspace or,
    in demo mode, not the visitor's."""
    return check_owner(resolve_run(workspace, run_id or ""), policy, visitor)


def owns_run_id(workspace: Path, run_id: str | None, policy: DemoPolicy, visitor: str | None) -> bool:
    """Whether a run id picked in the browser names a run the visitor may use (any id outside demo mode)."""
    if not policy.enabled:
        return True
    return bool(run_id) and owns(policy, read_status(runs_dir(workspace) / Path(str(run_id)).name).owner, visitor)
