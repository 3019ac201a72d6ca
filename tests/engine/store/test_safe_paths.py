"""engine.store.paths: ``confine`` keeps paths inside allowed folders, symlinks resolved; hub ids told apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.store.paths import PathNotAllowed, confine, env_roots, is_hub_id


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """An allowed folder holding a file, and a folder beside it that is not allowed."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "sub").mkdir(parents=True)
    outside.mkdir()
    (allowed / "sub" / "data.jsonl").write_text("{}\n")
    (outside / "secret.jsonl").write_text("{}\n")
    return allowed, outside


def test_a_path_inside_is_returned_resolved(folders: tuple[Path, Path]) -> None:
    allowed, _ = folders
    assert confine(allowed / "sub" / ".." / "sub" / "data.jsonl", [allowed]) == allowed / "sub" / "data.jsonl"
    assert confine(allowed, [allowed]) == allowed
    assert confine(allowed / "not-yet-there.jsonl", [allowed]) == allowed / "not-yet-there.jsonl"


@pytest.mark.parametrize("escape", ["../outside/secret.jsonl", "sub/../../outside/secret.jsonl", "/etc/passwd"])
def test_dot_dot_and_absolute_paths_elsewhere_are_refused(folders: tuple[Path, Path], escape: str) -> None:
    allowed, _ = folders
    path = escape if escape.startswith("/") else str(allowed / escape)
    with pytest.raises(PathNotAllowed, match="is outside the folders the studio may read") as caught:
        confine(path, [allowed])
    assert f"(allowed: {allowed})" in str(caught.value)


def test_relative_paths_are_taken_from_the_current_directory(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed, _ = folders
    monkeypatch.chdir(allowed / "sub")
    assert confine("data.jsonl", [allowed]) == allowed / "sub" / "data.jsonl"
    with pytest.raises(PathNotAllowed):
        confine("../../outside/secret.jsonl", [allowed])


def test_symlinks_are_followed_before_the_check(folders: tuple[Path, Path]) -> None:
    allowed, outside = folders
    (allowed / "link-out.jsonl").symlink_to(outside / "secret.jsonl")
    (allowed / "dir-out").symlink_to(outside, target_is_directory=True)
    (allowed / "link-in.jsonl").symlink_to(allowed / "sub" / "data.jsonl")
    for escaping in (allowed / "link-out.jsonl", allowed / "dir-out" / "secret.jsonl"):
        with pytest.raises(PathNotAllowed):
            confine(escaping, [allowed])
    assert confine(allowed / "link-in.jsonl", [allowed]) == allowed / "sub" / "data.jsonl"
    # An allowed root that is itself a link still admits what lies below its target.
    (outside / "root-link").symlink_to(allowed, target_is_directory=True)
    assert confine(allowed / "sub" / "data.jsonl", [outside / "root-link"]) == allowed / "sub" / "data.jsonl"


def test_names_no_file_system_accepts_are_refused_not_raised(folders: tuple[Path, Path]) -> None:
    allowed, _ = folders
    with pytest.raises(PathNotAllowed, match="is not a usable path"):
        confine(str(allowed / "a\x00b"), [allowed])
    with pytest.raises(PathNotAllowed):
        confine("/" + "x" * 5000, [allowed])
    with pytest.raises(PathNotAllowed):
        confine("anything", [])


@pytest.mark.parametrize(
    ("text", "hub"),
    [
        ("org/name", True),
        ("gpt2", True),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", True),
        ("/org/name", False),
        ("./name", False),
        ("../name", False),
        ("org/../name", False),
        ("org/name/extra", False),
        ("~/models", False),
        ("org/.hidden", False),
    ],
)
def test_hub_ids_are_told_from_paths(text: str, hub: bool) -> None:
    assert is_hub_id(text) is hub


def test_env_roots_reads_a_path_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_ROOTS", "/data/a::~/b: ")
    assert env_roots("SOME_ROOTS") == [Path("/data/a"), Path("~/b").expanduser()]
    monkeypatch.delenv("SOME_ROOTS")
    assert env_roots("SOME_ROOTS") == []
