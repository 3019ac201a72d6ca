"""The HTML pieces the tabs share (studio.markup): escaping, clamping, and the classes the CSS keys on."""

from __future__ import annotations

import pytest

from studio.markup import badge_html, bold, format_duration, message_html, progress_bar_html, text_block


def test_a_message_always_escapes_its_text() -> None:
    shown = message_html("<script>alert('x')</script> & co", "error")
    assert shown == (
        '<div class="ts-message ts-message-error">&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; co</div>'
    )
    assert "<script>" not in message_html(["a ", "<script>", bold("<script>")], "warn")


def test_only_bold_pieces_made_here_stay_markup() -> None:
    assert message_html(["press ", bold("Load"), "."], "warn") == (
        '<div class="ts-message ts-message-warn">press <b>Load</b>.</div>'
    )
    assert (
        message_html(["<b>not bold</b>"]) == '<div class="ts-message ts-message-ok">&lt;b&gt;not bold&lt;/b&gt;</div>'
    )


def test_an_empty_message_shows_no_box() -> None:
    assert message_html("") == "" and message_html([]) == ""


@pytest.mark.parametrize(("percent", "width"), [(-20, "0"), (0, "0"), (42.4, "42"), (100, "100"), (250, "100")])
def test_the_progress_bar_is_held_within_0_and_100_percent(percent: float, width: str) -> None:
    assert f'style="width:{width}%"' in progress_bar_html(percent, "<span>x</span>")


def test_the_progress_bar_carries_its_callers_classes_and_text() -> None:
    bar = progress_bar_html(12.345, "<span>a</span><b>b</b>", "ts-state-running", "ts-fill ts-fill-live", decimals=1)
    assert bar == (
        '<div class="ts-progress ts-state-running"><div class="ts-bar"><div class="ts-fill ts-fill-live" '
        'style="width:12.3%"></div></div><div class="ts-progress-text"><span>a</span><b>b</b></div></div>'
    )
    assert progress_bar_html(5, "").startswith('<div class="ts-progress"><div class="ts-bar"><div class="ts-fill" ')


def test_the_badge_pulses_while_a_process_works_and_escapes_the_state() -> None:
    assert (
        badge_html("running") == '<span class="ts-badge ts-state-running"><span class="ts-pulse"></span>running</span>'
    )
    assert badge_html("completed") == '<span class="ts-badge ts-state-completed">completed</span>'
    assert badge_html(None) == '<span class="ts-badge ts-state-unknown">unknown</span>'
    assert "<x>" not in badge_html("<x>")


def test_durations() -> None:
    assert format_duration(45) == "0:45" and format_duration(3 * 3600 + 62) == "3:01:02"
    assert format_duration(None) == "—" and format_duration(-1) == "—"


def test_a_text_block_escapes_and_keeps_its_lines() -> None:
    assert "a<br>&lt;b&gt;" in text_block("  a\n<b>  ")
