"""The page's own words use no emoji: where no colour-emoji font is installed (many Linux desktops, servers that
screenshot) an emoji shows as an empty box. Symbols that common text fonts carry (✓ ✗ ⚠ → ↻ ⧖, all in DejaVu
Sans) do instead. Checked over every language file and the studio's and assets' own source."""

from __future__ import annotations

from pathlib import Path

from engine.store.paths import PROJECT_ROOT

# Characters drawn as emoji by default (Unicode's Emoji_Presentation) in the Basic Multilingual Plane, the
# emoji variation selector, and everything in the supplementary planes' emoji blocks.
EMOJI_BMP = set(
    "⌚⌛⏩⏪⏫⏬⏰⏳☔☕♈♉♊♋♌♍♎♏♐♑♒♓♿"
    "⚓⚡⚪⚫⚽⚾⛄⛅⛎⛔⛪⛲⛳⛵⛺⛽"
    "✅✊✋✨❌❎❓❔❕❗➕➖➗➰➿⬛⬜⭐⭕"
)
VARIATION_EMOJI = "\ufe0f"


def is_emoji(character: str) -> bool:
    return character in EMOJI_BMP or character == VARIATION_EMOJI or 0x1F000 <= ord(character) <= 0x1FAFF


def shipped_text_files() -> list[Path]:
    assets = PROJECT_ROOT / "assets"
    return sorted(
        [*(PROJECT_ROOT / "studio").rglob("*.py"), *assets.glob("locales/*.json"), *assets.glob("*.js")]
        + [*assets.glob("*.css")]
    )


def test_no_emoji_in_what_the_page_says() -> None:
    found = {
        str(path.relative_to(PROJECT_ROOT)): sorted({c for c in path.read_text(encoding="utf-8") if is_emoji(c)})
        for path in shipped_text_files()
    }
    assert len(found) > 50  # the studio's modules, four languages, the scripts and styles
    assert {path: chars for path, chars in found.items() if chars} == {}


def test_the_check_sees_an_emoji() -> None:
    assert [is_emoji(c) for c in "✅⏳🚀⚠️✓✗⚠→"] == [True, True, True, False, True, False, False, False, False]
