"""The bad-input corpus: broken datasets and what the studio and the CLI must say about each.

Tiny text files are committed beside this module; binary, oddly encoded and large ones are written by
``build_corpus`` (run ``python tests/data/bad_inputs/corpus.py DIR`` to look at them). Each case names a file,
the config settings it is checked with, and the fragments its message must contain: the row by number, or the
field / column at fault. A case without fragments is a file that must be accepted.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MAX_LENGTH = 64  # tokens; the long-row cases are longer than this
HUGE_LINE_BYTES = 3_000_000


@dataclass(frozen=True)
class Case:
    """One broken (or merely odd) dataset and the outcome it must have."""

    file: str
    expect: tuple[str, ...]  # fragments of the error message; () when the file must be accepted
    data: dict[str, Any] = field(default_factory=dict)  # extra data-section settings
    warning: str = ""  # for accepted files: a fragment of a warning once tokens are counted
    cli: bool = False  # also run through ``python -m engine check`` (a subprocess each: a representative few)
    as_eval: bool = False  # the file is data.eval_path (the training file is the bundled demo set)

    @property
    def id(self) -> str:
        return self.file + (":eval" if self.as_eval else "") + (":" + ",".join(self.data) if self.data else "")


CASES = [
    Case("invalid_json.jsonl", ("line 2 is not valid JSON",), cli=True),
    Case("mixed_formats.jsonl", ("row 3:", "formats are mixed", "conversational row (messages)"), cli=True),
    Case("missing_column.jsonl", ("row 2: missing column 'output'",)),
    Case("misnamed_columns.jsonl", ("cannot tell the format from the columns answer, question", "data.columns")),
    Case(
        "unmapped_column.jsonl",
        ("data.format is alpaca, but no row has the column(s) reply",),
        data={"format": "alpaca", "columns": {"output": "reply"}},
    ),
    Case("empty_strings.jsonl", ("1 of 2 rows has problems", "row 2: output is empty"), cli=True),
    Case("empty_answer.jsonl", ("row 1: messages[1] (assistant) is empty",)),
    Case("null_value.jsonl", ("row 2: instruction is empty",)),
    Case("bad_role.jsonl", ("row 1: messages[0].role 'bot' is not one of system, user, assistant",)),
    Case("messages_not_a_list.jsonl", ("row 1: messages is a string, not a list of turns",)),
    Case("bom.jsonl", ()),  # a UTF-8 byte-order mark is fine
    Case("utf16_bom.jsonl", ("is UTF-16 text; save it as UTF-8",), cli=True),
    Case("utf16_no_bom.jsonl", ("is UTF-16 text (without a byte-order mark)",)),
    Case("latin1.jsonl", ("is not UTF-8 text: byte 0xe9", "(line 2)"), cli=True),
    Case("long_row.jsonl", (), warning=f"1 of 2 rows are longer than max_length {MAX_LENGTH} tokens"),
    Case("huge_line.jsonl", (), warning=f"1 of 1 rows are longer than max_length {MAX_LENGTH} tokens"),
    Case("big_cell.csv", ()),  # a cell over csv's default 128 KiB limit
    Case("empty.jsonl", ("empty.jsonl is empty",), cli=True),
    Case("whitespace_only.jsonl", ("whitespace_only.jsonl is empty",)),
    Case("empty.txt", ("empty.txt is empty",)),
    Case("binary.jsonl", ("looks like a binary file, not .jsonl text",), cli=True),
    Case("ragged.csv", ("line 3 has more cells than the header",), cli=True),
    Case("wrong_columns.parquet", ("cannot tell the format from the columns bar, foo",), cli=True),
    Case("wrong_types.parquet", ("2 of 2 rows have problems", "row 1: output is a number, not a string")),
    Case("truncated.parquet", ("is not a valid Parquet file",)),
    Case("top_level_object.json", ("the top level is a JSON object; expected a list of objects",)),
    Case("list_with_number.json", ("item 2 of the list is a number",)),
    Case("deep_nesting.jsonl", ("line 1 is not valid JSON: values nested too deeply",)),
    Case("huge_number.jsonl", ("line 1 is not valid JSON: a number has too many digits",)),
    Case("spreadsheet.xlsx", ("unsupported file type '.xlsx'",)),
    Case("folder.jsonl", ("is a directory",)),
    Case("no_such_file.jsonl", ("data file not found", "no_such_file.jsonl")),
    Case("invalid_json.jsonl", ("data.eval_path:", "line 2 is not valid JSON"), as_eval=True, cli=True),
    # Files that read well but leave nothing to train on once tokenized (found with tokens only).
    Case("long_prompt.jsonl", ("no training row has a token to learn from within max_length 64", "train.max_length")),
    Case(
        "good_chat.jsonl",
        ("no training row has a token to learn from", "data.chat_template"),
        data={"chat_template": "a template that renders no answers"},
    ),
]


def _alpaca(instruction: str, output: str) -> str:
    return json.dumps({"instruction": instruction, "output": output}) + "\n"


def _write_parquet(path: Path, columns: dict[str, list[Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path)


def generated_files() -> dict[str, bytes]:
    """The corpus files that are binary, oddly encoded, large, or easily mangled by editors."""
    text = '{"text": "café au lait"}\n'
    random_bytes = random.Random(0).randbytes(4096)
    long_answer = " ".join(f"word{i}" for i in range(400))  # hundreds of tokens, over MAX_LENGTH
    huge_answer = "lorem ipsum dolor " * (HUGE_LINE_BYTES // 18)  # one multi-megabyte line
    return {
        "bom.jsonl": b"\xef\xbb\xbf" + b'{"text": "a byte-order mark starts this file"}\n{"text": "second"}\n',
        "whitespace_only.jsonl": b"  \n\n\t \n",
        "utf16_bom.jsonl": text.encode("utf-16"),
        "utf16_no_bom.jsonl": text.encode("utf-16-le"),
        "latin1.jsonl": ('{"text": "plain"}\n' + text).encode("latin-1"),
        "binary.jsonl": b"\x00\x01" + random_bytes,
        "long_row.jsonl": (_alpaca("short", "fine") + _alpaca("write a lot", long_answer)).encode(),
        "huge_line.jsonl": _alpaca("write a book", huge_answer).encode(),
        "long_prompt.jsonl": _alpaca(long_answer, "short").encode(),  # the answer falls past max_length
        "big_cell.csv": ("instruction,output\nsummarise," + "x" * 200_000 + "\n").encode(),
        "deep_nesting.jsonl": ('{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n").encode(),
        "huge_number.jsonl": ('{"text": ' + "9" * 5000 + "}\n").encode(),
        "truncated.parquet": b"PAR1" + random_bytes[:64],
    }


def build_corpus(target: Path) -> Path:
    """Write the whole corpus (committed and generated files) into ``target``; returns it."""
    target.mkdir(parents=True, exist_ok=True)
    for path in HERE.iterdir():
        if path.is_file() and path.suffix != ".py":
            shutil.copyfile(path, target / path.name)
    for name, content in generated_files().items():
        (target / name).write_bytes(content)
    _write_parquet(target / "wrong_columns.parquet", {"foo": [1, 2], "bar": ["x", "y"]})
    _write_parquet(target / "wrong_types.parquet", {"instruction": ["a", "b"], "output": [1, 2]})
    (target / "folder.jsonl").mkdir(exist_ok=True)
    return target


if __name__ == "__main__":
    print(build_corpus(Path(sys.argv[1] if len(sys.argv) > 1 else "bad_inputs")))
