"""Loading files by extension, resolving paths, and one clear line for every broken file."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.data import DataError, loading
from engine.data.loading import read_rows

ROWS = [
    {"instruction": "Say hi", "input": "", "output": "Hi!"},
    {"instruction": "Add", "input": "1+1", "output": "2"},
]


def error_of(path: Path | str) -> str:
    """The DataError message for reading ``path``; it must be one line."""
    with pytest.raises(DataError) as caught:
        read_rows(str(path))
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_json_list_jsonl_and_json_lines_saved_as_json(tmp_path: Path):
    (tmp_path / "a.json").write_text(json.dumps(ROWS, indent=2), encoding="utf-8")
    lines = "".join(json.dumps(row) + "\n" for row in ROWS)
    (tmp_path / "b.jsonl").write_text(lines + "\n\n", encoding="utf-8")  # blank lines are skipped
    (tmp_path / "c.json").write_text(lines, encoding="utf-8")
    for name in ("a.json", "b.jsonl", "c.json"):
        rows, source = read_rows(str(tmp_path / name))
        assert rows == ROWS
        assert source == str(tmp_path / name)


def test_csv_keeps_strings_multiline_cells_and_empty_cells(tmp_path: Path):
    path = tmp_path / "d.csv"
    path.write_text('instruction,input,output\n"Two\nlines",,"a, b"\nAdd,1+1,2\n', encoding="utf-8")
    rows, _ = read_rows(str(path))
    assert rows == [
        {"instruction": "Two\nlines", "input": "", "output": "a, b"},
        {"instruction": "Add", "input": "1+1", "output": "2"},
    ]


def test_parquet(tmp_path: Path):
    path = tmp_path / "e.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    assert read_rows(str(path))[0] == ROWS


def dictionary_bomb(path: Path, rows: int, value_bytes: int) -> Path:
    """A Parquet file whose one column repeats a single ``value_bytes`` string in every row, dictionary-encoded and
    compressed: a few hundred bytes on disk."""
    # The one value straight from its bytes (no per-character UTF-8 check), and no min/max statistics: each of those
    # walks the whole value again (as zstd above its fastest level does): a 1.5 GiB value took 80 s to write, now 4 s.
    value = pa.StringArray.from_buffers(
        1, pa.array([0, value_bytes], pa.int32()).buffers()[1], pa.py_buffer(b"x" * value_bytes)
    )
    column = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), value)
    pq.write_table(pa.table({"text": column}), path, compression="zstd", compression_level=1, write_statistics=False)
    return path


def test_a_parquet_file_counts_what_it_holds_once_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bomb = dictionary_bomb(tmp_path / "bomb.parquet", rows=1500, value_bytes=2**20)
    assert bomb.stat().st_size < 4096
    assert loading.decoded_bytes(bomb) >= 1500 * 2**20  # every row's string, not the dictionary's one
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), plain)
    assert loading.decoded_bytes(plain) < 4096
    monkeypatch.setattr(loading, "MAX_DECODED_BYTES", 100 * 2**20)
    with pytest.raises(DataError, match=r"bomb\.parquet holds more than 100 MiB once decoded \(\d+ bytes on disk\)"):
        read_rows(str(bomb))
    assert read_rows(str(plain))[0] == ROWS


def test_a_parquet_row_too_large_to_decode_is_refused(tmp_path: Path):
    """One string of 1.5 GiB (one repeated character compresses to almost nothing) needs more than the decoding
    child may hold: refused, and never decoded in this process."""
    huge = dictionary_bomb(tmp_path / "huge.parquet", rows=1, value_bytes=3 * 2**29)
    with pytest.raises(DataError, match=r"huge\.parquet: a part of this Parquet file takes more than 1024 MiB"):
        read_rows(str(huge))


def test_txt_one_example_per_non_empty_line(tmp_path: Path):
    path = tmp_path / "f.txt"
    path.write_text("first line\n\n   \nsecond line\r\n", encoding="utf-8")
    assert read_rows(str(path))[0] == [{"text": "first line"}, {"text": "second line"}]


def test_utf8_bom_is_accepted(tmp_path: Path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"text": "caf\u00e9"}, ensure_ascii=False).encode("utf-8"))
    assert read_rows(str(path))[0] == [{"text": "caf\u00e9"}]


def test_relative_paths_resolve_against_cwd_then_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "assets").mkdir(parents=True)
    elsewhere.mkdir()
    (root / "assets" / "x.jsonl").write_text('{"text": "from the root"}\n', encoding="utf-8")
    monkeypatch.setattr(loading, "PROJECT_ROOT", root)
    monkeypatch.chdir(elsewhere)
    rows, source = read_rows("assets/x.jsonl")
    assert rows == [{"text": "from the root"}]
    assert source == str(root / "assets" / "x.jsonl")
    # A file of the same relative name in the current directory wins.
    (elsewhere / "assets").mkdir()
    (elsewhere / "assets" / "x.jsonl").write_text('{"text": "from the cwd"}\n', encoding="utf-8")
    assert read_rows("assets/x.jsonl")[0] == [{"text": "from the cwd"}]


def test_the_bundled_demo_data_resolves_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if not (loading.PROJECT_ROOT / "assets/datasets/demo_sft_train.jsonl").exists():
        pytest.skip("demo dataset not built")
    monkeypatch.chdir(tmp_path)
    rows, _ = read_rows("assets/datasets/demo_sft_train.jsonl")
    assert rows and "messages" in rows[0]


def test_missing_file_and_directory(tmp_path: Path):
    assert "data file not found: " in error_of(tmp_path / "nope.jsonl")
    assert "data file not found: data/nope.json" in error_of("data/nope.json")  # a path, never a hub id
    assert error_of(tmp_path).endswith(
        "is a directory; give a data file (.json, .jsonl, .ndjson, .csv, .parquet, .txt)"
    )


def test_hub_id_that_cannot_be_loaded_offline():
    message = error_of("someone/no-such-dataset-here")
    assert message.startswith("someone/no-such-dataset-here is not a local file, and loading it as a hub dataset")


@pytest.mark.parametrize("content", [b"", b"  \n\n"])
def test_empty_file(tmp_path: Path, content: bytes):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    assert error_of(path) == f"{path} is empty"


def test_not_utf8_names_byte_offset_and_line(tmp_path: Path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    assert error_of(path) == (
        f"{path} is not UTF-8 text: byte 0xe9 at byte offset 28 (line 2) is invalid; save the file as UTF-8"
    )


def test_utf16_and_binary(tmp_path: Path):
    utf16 = tmp_path / "u16.json"
    utf16.write_bytes('[{"text": "x"}]'.encode("utf-16"))
    assert error_of(utf16) == f"{utf16} is UTF-16 text; save it as UTF-8"
    binary = tmp_path / "image.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert error_of(binary) == f"{binary} looks like a binary file, not .json text"
    fake = tmp_path / "fake.parquet"
    fake.write_text("not parquet", encoding="utf-8")
    assert "is not a Parquet file" in error_of(fake)


def test_invalid_json_names_line_and_column(tmp_path: Path):
    path = tmp_path / "bad.json"
    path.write_text('[\n  {"text": "a"}\n  {"text": "b"}\n]', encoding="utf-8")
    assert error_of(path) == f"{path} is not valid JSON: Expecting ',' delimiter at line 3 column 3"


def test_invalid_json_lines_names_the_line(tmp_path: Path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "a"}\n\n{"text": "b",}\n', encoding="utf-8")
    assert error_of(path).startswith(f"{path} line 3 is not valid JSON: ")
    path.write_text('{"text": "a"}\n["a", "list"]\n', encoding="utf-8")
    assert error_of(path) == f"{path} line 2 is a list; expected a JSON object"


def test_json_top_level_must_be_a_list_of_objects(tmp_path: Path):
    path = tmp_path / "top.json"
    path.write_text('{"data": []}', encoding="utf-8")
    assert "the top level is a JSON object; expected a list of objects" in error_of(path)
    path.write_text("42", encoding="utf-8")
    assert "the top level is a number; expected a list of objects" in error_of(path)
    path.write_text('[{"text": "a"}, "b"]', encoding="utf-8")
    assert error_of(path) == f"{path}: item 2 of the list is a string; expected an object per example"
    path.write_text("[]", encoding="utf-8")
    assert error_of(path) == f"{path} contains no rows"


def test_csv_with_more_cells_than_the_header(tmp_path: Path):
    path = tmp_path / "bad.csv"
    path.write_text("text\nfine\ntoo,many\n", encoding="utf-8")
    assert error_of(path) == f"{path} line 3 has more cells than the header"


def test_unsupported_extension(tmp_path: Path):
    path = tmp_path / "data.xlsx"
    path.write_bytes(b"PK\x03\x04")
    assert error_of(path).startswith(f"{path}: unsupported file type '.xlsx'")
