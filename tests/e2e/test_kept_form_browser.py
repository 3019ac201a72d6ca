"""The kept Train form (studio.train.kept_form) against a visitor who types while the page loads, in a real Chromium.

A slow page answers the kept form's restore late; a person who has typed into a field by then keeps what they typed,
and only the fields they left alone come back from the browser's storage. The race is made deterministic: the
restore's request to the server is held back (Playwright routing) until the test has typed, whatever the machine's
speed, and the test checks that the hold does delay the restore.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import VIEWPORT, Studio, wait_until

from studio.train.kept_form import STORAGE_KEY
from tests.helpers.servers import free_port

pytestmark = pytest.mark.e2e

NAME = "kept-form-typed-while-loading"  # also marks the restore's request: it carries the stored form
STORED = {"method": "kto", "train.max_steps": 55, "name": NAME}  # a previous visit's form
TYPED = "321"
PICKED = "dpo"


@pytest.fixture(scope="module")
def studio(workspace: Path) -> Iterator[Studio]:
    """A studio without its warm training process: nothing here starts a run, and on 2 cores its imports (several
    CPU-seconds) would only slow the other worker's tests."""
    server = Studio(workspace, free_port(), extra_args=("--no-standby",))
    server.start()
    yield server
    server.kill()


def is_restore(request: Any) -> bool:
    """Whether ``request`` sends the stored form to the server (the kept form's restore, a load event)."""
    return "/queue/join" in request.url and NAME in (request.post_data or "")


def stored_steps(page: Any) -> Any:
    """What the page has stored of max_steps now."""
    return page.evaluate(f"() => JSON.parse(localStorage.getItem({json.dumps(STORAGE_KEY)}) || '{{}}')")[
        "train.max_steps"
    ]


def test_a_field_typed_into_while_the_page_loads_keeps_what_was_typed(studio: Any, browser: Any) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    # A previous visit's form, in the storage before the page's own scripts run.
    context.add_init_script(f"localStorage.setItem({json.dumps(STORAGE_KEY)}, {json.dumps(json.dumps(STORED))})")
    page = context.new_page()
    held: list[Any] = []  # the restore's request, answered only once the visitor has typed

    def hold_the_restore(route: Any) -> None:
        # Only the first: once restored, the name is in every event's values, and those must go through.
        if is_restore(route.request) and not held:
            held.append(route)
        else:
            route.continue_()

    page.route("**/queue/join*", hold_the_restore)
    with page.expect_request(is_restore):
        page.goto(studio.url)

    steps = page.locator("#cfg-train-max_steps input").first
    method = page.locator("#cfg-method input").first
    name = page.locator("#cfg-name input, #cfg-name textarea").first
    preset = name.input_value()
    assert preset != NAME and method.input_value() != PICKED
    steps.click()
    steps.press("Control+a")
    steps.press_sequentially(TYPED, delay=40)  # key by key, as a person types
    method.click()
    page.get_by_role("option", name=PICKED, exact=True).first.click()
    name.click()  # only clicked into: nothing changed there
    assert (steps.input_value(), method.input_value()) == (TYPED, PICKED)

    # The hold holds: nothing is restored while the request waits.
    assert len(held) == 1
    assert page.locator("html[data-form-ready]").count() == 0
    assert name.input_value() == preset
    held[0].continue_()
    page.locator("html[data-form-ready]").wait_for(state="attached")

    assert name.input_value() == NAME  # left alone: restored
    assert (steps.input_value(), method.input_value()) == (TYPED, PICKED)  # typed into, picked: kept
    wait_until(lambda: stored_steps(page) == int(TYPED), 30, what="the typed max_steps to be stored")
    context.close()
