"""Read a dataset into plain Python rows: local JSON / JSONL / CSV / Parquet / TXT files, or a hub dataset.

The demo and user files are small, so everything is read into a list of dicts; that keeps row numbers,
error messages and the later steps simple. Every failure is a DataError with a one-line message.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from engine.data.errors import DataError, kind_of
from engine.data.hub import read_hub_rows
from engine.store.limits import Limits, OverLimit, run_limited
from engine.store.paths import PROJECT_ROOT, is_hub_id

SUPPORTED_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".parquet", ".txt")

# Cells as large as a document can be (the C long of every platform holds it).
_MAX_CSV_CELL = 2**31 - 1
# A Parquet file is decoded in a child first (parquet_child.py), under these caps, to learn what it holds: a file
# of 523 bytes held 1.5 GB (one dictionary-encoded 1 MiB string in 1,500 rows). Past MAX_DECODED_BYTES it is
# refused (every row is read into memory as Python values, two to three times the decoded bytes); a row that needs
# more than the child's memory on its own is refused too.
MAX_DECODED_BYTES = 4 * 2**30
PARQUET_LIMITS = Limits(memory_bytes=1024 * 2**20, cpu_s=60.0, wall_s=180.0)
PARQUET_CHILD = Path(__file__).with_name("parquet_child.py")


def resolve_path(path: str) -> Path | None:
    """The local file or directory ``path`` names: as given, relative to the cwd, then to the project root.

    None when there is none, also for names no file system accepts (too long, a NUL byte, an unknown ~user).
    """
    try:
        candidate = Path(path).expanduser()
        if candidate.is_absolute():
            return candidate if candidate.exists() else None
        for base in (Path.cwd(), PROJECT_ROOT):
            if (base / candidate).exists():
                return (base / candidate).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    return None


def looks_like_hub_id(path: str) -> bool:
    """Whether a path that is not on disk could be a hub dataset id (``org/name``); a name with a data-file
    suffix is meant as a file."""
    return is_hub_id(path) and Path(path).suffix.lower() not in SUPPORTED_SUFFIXES


def read_rows(path: str, split: str = "train", first: int | None = None) -> tuple[list[dict[str, Any]], str]:
    """Read every row of a local file or hub dataset; of a hub dataset only the first ``first`` rows when given
    (engine.data.hub: a large one is not downloaded whole). A local file is read whole.

    Returns the rows (dicts of plain Python values) and the source: the resolved file path, or the hub id.
    Raises DataError for a missing, empty, binary, non-UTF-8 or malformed file.
    """
    local = resolve_path(path)
    if local is None:
        if looks_like_hub_id(path):
            return read_hub_rows(path, split, first), path
        raise DataError(f"data file not found: {path}{_where_looked(path)}")
    if local.is_dir():
        raise DataError(f"{local} is a directory; give a data file ({', '.join(SUPPORTED_SUFFIXES)})")
    return read_file(local), str(local)


def _where_looked(path: str) -> str:
    """' (looked in CWD and PROJECT)' for a relative path; nothing for an absolute one."""
    if path.startswith(("/", "~")):
        return ""
    return f" (looked in {' and '.join(dict.fromkeys(str(base) for base in (Path.cwd(), PROJECT_ROOT)))})"


def read_file(path: Path) -> list[dict[str, Any]]:
    """Parse one local data file by its extension."""
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        kind = f"unsupported file type '{suffix}'" if suffix else "no file extension to tell the type"
        raise DataError(f"{path}: {kind}; use {', '.join(SUPPORTED_SUFFIXES)}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not data.strip():
        raise DataError(f"{path} is empty")
    if suffix == ".parquet":
        rows = _parse_parquet(path, data)
    else:
        text = _decode(path, data)
        if suffix == ".json":
            rows = _parse_json(path, text)
        elif suffix in (".jsonl", ".ndjson"):
            rows = _parse_json_lines(path, text)
        elif suffix == ".csv":
            rows = _parse_csv(path, text)
        else:
            rows = [{"text": line} for line in text.splitlines() if line.strip()]
    if not rows:
        raise DataError(f"{path} contains no rows")
    return rows


def _decode(path: Path, data: bytes) -> str:
    """UTF-8 text (a BOM is accepted); UTF-16, binary and other encodings get a message that says which."""
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        raise DataError(f"{path} is UTF-32 text; save it as UTF-8")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DataError(f"{path} is UTF-16 text; save it as UTF-8")
    if _looks_like_utf16(data[:8192]):
        raise DataError(f"{path} is UTF-16 text (without a byte-order mark); save it as UTF-8")
    if b"\x00" in data[:8192]:
        raise DataError(f"{path} looks like a binary file, not {path.suffix.lower()} text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(
            f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at byte offset {exc.start} "
            f"(line {line}) is invalid; save the file as UTF-8"
        ) from None


def _looks_like_utf16(sample: bytes) -> bool:
    """Mostly-ASCII UTF-16 without a BOM: every other byte is NUL (odd ones for little-endian, even for big)."""
    if len(sample) < 4:
        return False
    even, odd = sample[0::2], sample[1::2]
    return (odd.count(0) > 0.9 * len(odd) and even.count(0) == 0) or (
        even.count(0) > 0.9 * len(even) and odd.count(0) == 0
    )


def _loads(text: str) -> Any:
    """``json.loads`` whose other failures (too deep, a number with thousands of digits) read as JSON errors."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("values nested too deeply", text, 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # Python refuses integers of more than 4300 digits (a denial-of-service guard)
        raise json.JSONDecodeError("a number has too many digits", text, 0) from None


def _parse_json(path: Path, text: str) -> list[dict[str, Any]]:
    """A JSON list of objects; a .json file that holds JSON lines is accepted too (it is common)."""
    try:
        value = _loads(text)
    except json.JSONDecodeError as exc:
        # "Extra data" after a first complete object is the signature of JSON lines saved as .json.
        if exc.msg == "Extra data" and text.lstrip().startswith("{"):
            return _parse_json_lines(path, text)
        raise DataError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if isinstance(value, dict):
        raise DataError(f"{path}: the top level is a JSON object; expected a list of objects, one per example")
    if not isinstance(value, list):
        raise DataError(f"{path}: the top level is {kind_of(value)}; expected a list of objects, one per example")
    for number, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            raise DataError(f"{path}: item {number} of the list is {kind_of(item)}; expected an object per example")
    return value


def _parse_json_lines(path: Path, text: str) -> list[dict[str, Any]]:
    """One JSON object per non-empty line; errors name the line."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = _loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path} line {number} is not valid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(value, dict):
            raise DataError(f"{path} line {number} is {kind_of(value)}; expected a JSON object")
        rows.append(value)
    return rows


def _parse_csv(path: Path, text: str) -> list[dict[str, Any]]:
    """A header line, then one example per record; every value stays a string (empty cells are "")."""
    # The default limit (128 KiB per cell) would refuse a long document that JSON lines accept.
    csv.field_size_limit(_MAX_CSV_CELL)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        if not reader.fieldnames:
            raise DataError(f"{path} has no header line")
        rows = []
        for row in reader:
            if None in row:  # DictReader files extra cells under the key None
                raise DataError(f"{path} line {reader.line_num} has more cells than the header")
            # Missing trailing cells come back as None; treat them as empty like any other empty cell.
            rows.append({key: "" if value is None else value for key, value in row.items()})
    except csv.Error as exc:
        raise DataError(f"{path} is not valid CSV: {exc} (line {reader.line_num})") from None
    return rows


def decoded_bytes(path: Path, max_bytes: int = MAX_DECODED_BYTES) -> int:
    """What a data file holds once decoded, in bytes: its size for a text format; for Parquet, its decoded Arrow
    bytes, counted in a child under PARQUET_LIMITS (a count past ``max_bytes`` stops there). DataError when the
    file cannot be read or a part of it is too large to decode within the child's caps."""
    path = Path(path)
    if path.suffix.lower() != ".parquet":
        return path.stat().st_size
    payload = json.dumps({"path": str(path), "max_bytes": max_bytes})
    try:
        return int(json.loads(run_limited(PARQUET_CHILD, payload, PARQUET_LIMITS))["bytes"])
    except OverLimit as exc:
        cap = f"{PARQUET_LIMITS.memory_bytes // 2**20} MiB" if exc.kind == "memory" else "its time"
        raise DataError(f"{path}: a part of this Parquet file takes more than {cap} to decode") from None
    except RuntimeError as exc:
        raise DataError(f"{path} is not a valid Parquet file: {exc}") from None


def _parse_parquet(path: Path, data: bytes) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not data.startswith(b"PAR1"):
        raise DataError(f"{path} is not a Parquet file (it does not start with the Parquet magic bytes)")
    if decoded_bytes(path) > MAX_DECODED_BYTES:
        raise DataError(
            f"{path} holds more than {MAX_DECODED_BYTES / 2**20:,.0f} MiB once decoded ({len(data):,} bytes on disk); "
            "split it or use fewer rows"
        )
    try:
        # One thread: pyarrow's pool threads could still be winding down when a short process (``check`` on a
        # bad file) exits, and then the interpreter aborts with "terminate called without an active exception".
        return pq.read_table(io.BytesIO(data), use_threads=False).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{path} is not a valid Parquet file: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
