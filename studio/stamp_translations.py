"""``python -m studio.stamp_translations``: after translating, record which English each translation says (the key's
fingerprint in assets/locales/translated-from.json), so a later change of the English shows up as stale in
tests/studio/test_translations.py until every language is brought up to date and stamped again."""

from __future__ import annotations

import tempfile
from pathlib import Path

from studio.i18n import catalog


def used_by_the_page() -> frozenset[str]:
    """Every key the studio uses: its page built as one's own studio and as the public demo."""
    from studio.app import build_app
    from studio.demo.policy import DemoPolicy

    with tempfile.TemporaryDirectory() as folder:
        for name, policy in (("studio", None), ("demo", DemoPolicy(enabled=True))):
            workspace = Path(folder) / name
            workspace.mkdir()
            build_app(workspace, policy) if policy else build_app(workspace)
    return catalog.used_keys()


def main() -> None:
    """Stamp every key in use that every language translates; list those some language still lacks."""
    used = used_by_the_page()
    translated = set(used)
    for lang in catalog.LANGUAGES:
        translated &= set(catalog.translations(lang))
    catalog.stamp(translated)
    print(f"stamped {len(translated)} keys; not yet in every language: {sorted(used - translated)}")


if __name__ == "__main__":
    main()
