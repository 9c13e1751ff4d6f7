"""Read a dataset file (JSON Lines, a JSON array, Parquet) into rows, each with its 1-based line, and per-row errors.

Why our own reader: one malformed line must cost that row only. Read through `datasets`, a bad line 7 of a JSONL file
became a 72-line traceback ("in row 6"), the whole build stopped and no row was processed. Here a line that is not a
JSON object becomes a `RowError` naming the file and the line, and every other row is read. A problem with the file
as a whole (missing, not a regular file, an unknown suffix, an unreadable Parquet file) is a `DatasetError` — a usage
error, exit code 2 in every evr1 CLI. This is the one reader of the EasyVideoR1 row format that evr1-cache's build
and planner, `evr1-eval precompute` and evr1-train's engine and export share, and `row_id` is the one way a row is
named in their messages, reports and exported files.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: A longer line is a row error, not a memory blow-up (real rows are a few KB).
MAX_LINE_BYTES = 64 << 20
SUFFIXES = (".jsonl", ".json", ".parquet")


#: Columns of a dataset row that are evr1's own bookkeeping, never a task's data: verl's row fields, the stored
#: trajectory, the cache references `build` writes and the row-level spec override of `build --plan`. Training forwards every other column to the reward in
#: `extra_info`, and evaluation (`evr1_data`) must select the same ones, so both read this one set.
BOOKKEEPING_COLUMNS: frozenset[str] = frozenset(
    {
        "data_source",
        "reward_model",
        "extra_info",
        "agent_name",
        "offline_output",
        "has_offline_trajectory",
        "video_cache",
        "image_cache",
        "cache_errors",
        "evr1_plan",
    }
)


#: Columns that name a row, in the order they are looked for.
ID_COLUMNS = ("problem_id", "id", "uid", "sample_id")


def row_id(row: Mapping[str, Any], number: int | None = None) -> str:
    """How a row is named: its own id (`ID_COLUMNS`), else `#<number>`, the 1-based row number the caller knows (its
    line for a JSON Lines file; its position where several files are read as one), else "(no id column)"."""
    for key in ID_COLUMNS:
        value = row.get(key)
        if value is not None and str(value):
            return str(value)
    return f"#{number}" if number is not None else "(no id column)"


def cache_refs(row: Mapping[str, Any], kind: str, count: int) -> list[Mapping[str, Any] | None]:
    """The row's `video_cache` / `image_cache` column (`kind`: "video" | "image") as `evr1-cache build` writes it: one
    reference (`{"file": ..., "meta": ...}`) per media item, None where there is none; a bare file name is `{"file":
    name}`, anything else (the column is data) is None."""
    refs = row.get(f"{kind}_cache")
    out: list[Mapping[str, Any] | None] = [None] * count
    if isinstance(refs, Sequence) and not isinstance(refs, (str, bytes)):
        for i, ref in enumerate(list(refs)[:count]):
            out[i] = ref if isinstance(ref, Mapping) else {"file": ref} if isinstance(ref, str) and ref else None
    return out


class DatasetError(ValueError):
    """The dataset file as a whole cannot be read (a usage error: the file, not a row, is wrong)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One row: its 1-based line in the file (its 1-based row number in Parquet) and its fields."""

    line: int
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RowError:
    """A row that could not be read: which file, which line (Parquet: row), why."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass(frozen=True, slots=True)
class DatasetRows:
    """Every readable row of a dataset file, in file order, and one error per unreadable row."""

    path: Path
    format: str  #: "jsonl" | "json" | "parquet"
    rows: tuple[Row, ...]
    errors: tuple[RowError, ...]

    @property
    def ok(self) -> bool:
        return not self.errors


def read_dataset(path: str | os.PathLike[str]) -> DatasetRows:
    """Rows of a `.jsonl`, `.json` (an array of objects, or JSON Lines) or `.parquet` file (see module docstring)."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise DatasetError(f"dataset file {p} not found") from None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"dataset file {p} cannot be read ({exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise DatasetError(f"dataset file {p} is not a regular file")
    suffix = p.suffix.lower()
    if suffix not in SUFFIXES:
        raise DatasetError(f"{p}: unsupported dataset format {suffix!r}; use .jsonl, .json or .parquet")
    if suffix == ".parquet":
        return _parquet(p)
    with open(p, "rb") as fh:
        first = _first_char(fh)
        fh.seek(0)
        if suffix == ".json" and first == b"[":
            return _json_array(p, fh.read())
        rows, errors = _json_lines(p, fh)
    return DatasetRows(p, "jsonl" if suffix == ".jsonl" else "json", tuple(rows), tuple(errors))


def read_rows(*paths: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The fields of every row of the dataset files, in order; a malformed row is a `DatasetError` naming its file and
    line (for tools that need all rows: the planner, the trainer, the export; `build` uses `read_dataset` and carries
    on past bad rows)."""
    out: list[dict[str, Any]] = []
    for path in paths:
        data = read_dataset(path)
        if data.errors:
            more = f" (and {len(data.errors) - 1} more)" if len(data.errors) > 1 else ""
            raise DatasetError(f"{data.errors[0]}{more}")
        out += [dict(row.data) for row in data.rows]
    return out


def _first_char(fh: Any) -> bytes:
    while chunk := fh.read(4096):
        stripped = chunk.lstrip()
        if stripped:
            return bytes(stripped[:1])
    return b""


def _not_an_object(value: object, fix: str) -> str:
    return f"a row must be a JSON object, got {type(value).__name__} (fix: {fix})"


def _object(p: Path, line: int, text: str, errors: list[RowError]) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        detail = f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        errors.append(RowError(str(p), line, f"not valid JSON ({detail}); fix or remove that line"))
        return None
    if not isinstance(value, dict):
        errors.append(RowError(str(p), line, _not_an_object(value, "write one {...} object per line")))
        return None
    return value


def _json_lines(p: Path, fh: Any) -> tuple[list[Row], list[RowError]]:
    rows: list[Row] = []
    errors: list[RowError] = []
    for line, raw in enumerate(_lines(fh), 1):
        if raw is None:
            errors.append(RowError(str(p), line, f"line longer than {MAX_LINE_BYTES} bytes; split or remove it"))
            continue
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(RowError(str(p), line, f"not UTF-8 text (byte {exc.start}); re-save the file as UTF-8"))
            continue
        data = _object(p, line, text, errors)
        if data is not None:
            rows.append(Row(line, data))
    return rows, errors


def _lines(fh: Any) -> Iterator[bytes | None]:
    """Each line (without its end), None for one over MAX_LINE_BYTES (its remainder is skipped)."""
    while True:
        raw = fh.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := fh.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield None
            continue
        yield raw.rstrip(b"\r\n")


def _json_array(p: Path, data: bytes) -> DatasetRows:
    """A JSON array read item by item, so each item keeps its line and a bad item costs only itself (a syntax error
    ends the array: the rows before it are kept, the rest is reported)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{p}: not UTF-8 text (byte {exc.start}); re-save the file as UTF-8") from None
    dec = json.JSONDecoder()
    rows: list[Row] = []
    errors: list[RowError] = []
    n = len(text)
    seen = [0, 1]  # (position, line there): line numbers are counted forward once, not from the start each time

    def line_at(pos: int) -> int:
        seen[1] += text.count("\n", seen[0], pos)
        seen[0] = pos
        return seen[1]

    def skip(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    pos = skip(text.index("[") + 1)
    while pos < n and text[pos] != "]":
        line = line_at(pos)
        try:
            value, end = dec.raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            why = f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            errors.append(RowError(str(p), line, f"not valid JSON ({why}); the rest of the array is unread"))
            break
        if isinstance(value, dict):
            rows.append(Row(line, value))
        else:
            errors.append(RowError(str(p), line, _not_an_object(value, "make every item of the array a {...} object")))
        pos = skip(end)
        if pos < n and text[pos] == ",":
            pos = skip(pos + 1)
        elif pos >= n or text[pos] != "]":
            errors.append(RowError(str(p), line_at(pos), "expected ',' or ']' after a row; the rest is unread"))
            break
    return DatasetRows(p, "json", tuple(rows), tuple(errors))


def _parquet(p: Path) -> DatasetRows:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DatasetError(f"{p}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        table = pq.read_table(p)
    except Exception as exc:  # pyarrow raises its own error types for damaged files
        raise DatasetError(f"{p}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    rows = tuple(Row(i, dict(r)) for i, r in enumerate(table.to_pylist(), 1))
    return DatasetRows(p, "parquet", rows, ())
