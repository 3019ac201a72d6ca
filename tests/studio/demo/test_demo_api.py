"""A public demo publishes no API: every event of the page is private (the README says so)."""

from __future__ import annotations

from pathlib import Path

from studio.app import build_app
from studio.demo.policy import DemoPolicy


def test_the_demo_lists_no_endpoint(tmp_path: Path) -> None:
    info = build_app(tmp_path, DemoPolicy(enabled=True)).get_api_info()
    assert info["named_endpoints"] == {} and not info.get("unnamed_endpoints")


def test_a_private_studio_still_lists_its_api(tmp_path: Path) -> None:
    named = build_app(tmp_path).get_api_info()["named_endpoints"]
    assert "/list_runs" in named and not any(name.startswith("/lambda") for name in named)
