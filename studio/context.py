"""What every tab of the studio shares (the workspace, the components that link the tabs) and what every event
knows of who sent it (``Caller``: the workspace, the demo policy, the visitor, the page's language, the quota)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from studio.demo.policy import (
    NORMAL,
    DemoPolicy,
    check_owner,
    owned_run,
    owned_run_dirs,
    owns,
    owns_run_id,
    visitor_uploads,
)
from studio.demo.quota import start_refusal, upload_refusal
from studio.i18n.catalog import SOURCE, request_language, text

P = ParamSpec("P")
R = TypeVar("R")
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

    def upload_refusal(self, size: int) -> str | None:
        """Why an upload of ``size`` bytes is refused by the demo's quota, in the caller's language; None if not."""
        return upload_refusal(self.workspace, self.policy, self.token, size, self.language)

    def start_refusal(self) -> str | None:
        """Why a Start or Resume is refused for the disk the caller's runs fill; None when under quota."""
        return start_refusal(self.workspace, self.policy, self.token, self.language)


@dataclass
class StudioContext:
    """Shared by the tab builders.

    ``current_run`` is a ``gr.State`` holding the run directory (str) the Monitor shows; the Train tab sets it
    when it starts a run, the Runs tab when a run is picked. ``tabs`` is the ``gr.Tabs`` container, whose
    ``selected`` the handlers set (by tab id: "train", "monitor", "runs") to switch the page to a tab.
    ``policy`` says what visitors may do (studio.demo.policy; no limits outside demo mode) and ``visitor`` is the
    component holding the visitor id (a ``gr.BrowserState`` in demo mode, else a ``gr.State(None)``: nobody in
    particular): handlers take it as an input and ask the policy whose runs to show. ``train_form`` is set once
    the Train tab is built (the Runs tab's "Continue from this run" fills it). ``opened`` is the ``gr.Tab`` that
    the builder given this context fills (the app hands each tab builder a copy with its own). The app makes these
    components (studio.app); this module stays free of Gradio so the plain handlers can import it.
    """

    workspace: Path
    current_run: Any = None  # gr.State[str | None]
    tabs: Any = None  # gr.Tabs
    policy: DemoPolicy = NORMAL
    visitor: Any = None  # gr.BrowserState[str | None] or gr.State(None)
    train_form: Any = None  # the Train tab's studio.form.widgets.ConfigForm, which other tabs may fill
    opened: Any = None  # gr.Tab: the tab being built

    def on_open(self) -> Any:
        """The event listener for "this tab came on screen", for what a tab refreshes as it opens: its own tab's
        ``select`` (a click on it; the app switches by itself only to Train and Monitor); without one, the tabs'
        ``change`` (any switch); None for a tab built alone (tests).

        Every Gradio event costs the browser 65 ms or more of its main thread, so a handler on the tabs' change,
        which runs on every switch, made each switch (Start's to the Monitor too) pay for every tab's refresh.
        """
        if self.opened is not None:
            return self.opened.select
        return self.tabs.change if self.tabs is not None else None

    def caller(self, request: Any, token: str | None) -> Caller:
        """The ``Caller`` of an event: this studio's workspace and policy, the visitor's token, the language of
        the page that sent ``request`` (a ``gr.Request``)."""
        return Caller(self.workspace, self.policy, token, request_language(request))

    def handler(self, fn: Callable[Concatenate[Caller, P], R]) -> Callable[..., R]:
        """``fn(caller, *values)`` as a Gradio event handler whose inputs are ``[ctx.visitor, *values]``: the
        caller is built once, from the request and the visitor's token, before ``fn`` runs. A generator stays a
        generator (Gradio streams what it yields).
        """
        import gradio as gr  # only where the page is built; the plain handlers import this module without it

        if inspect.isgeneratorfunction(fn):

            def streamed(request: Any, token: str | None, *values: Any) -> Any:
                yield from fn(self.caller(request, token), *values)  # type: ignore[arg-type]

            wrapped: Callable[..., Any] = streamed
        else:

            def wrapped(request: Any, token: str | None, *values: Any) -> Any:
                return fn(self.caller(request, token), *values)  # type: ignore[arg-type]

        # Gradio hands the request to the parameter annotated gr.Request (gradio.helpers.special_args); the name
        # is fn's, which Gradio shows for the event. No __wrapped__: inspect.signature would follow it to fn's
        # own parameters, and Gradio would then not see the request parameter.
        wrapped.__annotations__ = {"request": gr.Request}
        wrapped.__name__, wrapped.__qualname__, wrapped.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
        return wrapped

    def inputs(self, *components: Any) -> list[Any]:
        """The inputs of a ``handler``: the visitor's component, then ``components``."""
        return [self.visitor, *components]
