"""Who sent one event: the workspace, the demo policy, the visitor (their token checked once), the page's
language, and what follows from them (whose runs they see, their upload folder and quota). Built once per event by
``studio.context.StudioContext.handler``; no Gradio here, so plain handlers take it and tests build it by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from studio.demo.ownership import check_owner, owned_run, owned_run_dirs, owns, owns_run_id
from studio.demo.policy import NORMAL, DemoPolicy, visitor_uploads
from studio.demo.quota import start_refusal, upload_refusal
from studio.i18n.catalog import SOURCE, text

T = TypeVar("T")


@dataclass(frozen=True)
class Caller:
    """Who sent one event, built once per event by ``StudioContext.handler``: a handler takes it instead of the
    workspace, the policy, the visitor's token and the language as four loose arguments.

    ``token`` is what the browser holds (a signed visitor token in demo mode, else None); ``visitor`` is the
    visitor it names once the signature is checked (None outside demo mode, or for a token the server did not
    sign). What a visitor may see and touch is asked of the caller (``owns``, ``run_dirs``, ``run``), so a
    handler cannot forget the policy.
    """

    workspace: Path
    policy: DemoPolicy = NORMAL
    token: str | None = None
    language: str = SOURCE
    visitor: str | None = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "visitor", self.policy.visitor(self.token))

    def say(self, name: str, **values: object) -> str:
        """The words of catalog key ``name`` in the caller's language."""
        return text(name, self.language, **values)

    @property
    def uploads(self) -> Path | None:
        """The folder of the visitor's uploaded datasets (None outside demo mode or without a signed token)."""
        return visitor_uploads(self.workspace, self.policy, self.token)

    def owns(self, owner: str | None) -> bool:
        """Whether the caller may see and act on a run whose status names ``owner`` (always outside demo mode)."""
        return owns(self.policy, owner, self.token)

    def run_dirs(self) -> list[Path]:
        """The run directories the caller may see (every run outside demo mode)."""
        return owned_run_dirs(self.workspace, self.policy, self.token)

    def run(self, run_id: str | None) -> Path:
        """The run directory of a run id picked in the browser; RunError when it is not the caller's."""
        return owned_run(self.workspace, run_id, self.policy, self.token)

    def check(self, run_dir: Path | str) -> Path:
        """``run_dir`` when the caller owns it; else RunError, as for a run that does not exist."""
        return check_owner(Path(run_dir), self.policy, self.token)

    def owns_run_id(self, run_id: str | None) -> bool:
        """Whether a run id picked in the browser names a run the caller may use."""
        return owns_run_id(self.workspace, run_id, self.policy, self.token)

    def shown(self, value: T, workspace: Path | None = None) -> T:
        """``value`` as the caller may see it: in demo mode server paths in it become what the visitor knows
        (``mine.jsonl``), else unchanged (studio.demo.policy.DemoPolicy.shown)."""
        return self.policy.shown(value, workspace or self.workspace)

    def upload_refusal(self, size: int, stored: int | None = None) -> str | None:
        """Why an upload that holds ``size`` bytes once read (``stored`` on disk) is refused by the demo's limits,
        in the caller's language; None if not."""
        return upload_refusal(self.workspace, self.policy, self.token, size, self.language, stored)

    def start_refusal(self) -> str | None:
        """Why a Start or Resume is refused for the disk the caller's runs fill; None when under quota."""
        return start_refusal(self.workspace, self.policy, self.token, self.language)
