"""`read_dataset`: every readable row with its 1-based line, one `RowError` per unreadable row, `DatasetError` for a file
that cannot be read at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import evr1_cache.dataset as ds
from evr1_cache import DatasetError, Row, RowError, cache_refs, read_dataset, read_rows, row_id


def test_jsonl_rows_keep_their_lines_and_bad_lines_cost_only_themselves(tmp_path: Path) -> None:
    lines = [
        '{"id": 1}',
        "",
        "   ",
        '{"id": 2, "text": "ünïcode ✓"}',
        '{"id": 3',
        '"a string"',
        "null",
        '{"id": 4}\r',
        "[" * 100_000,  # deeper than the parser's recursion limit
        '{"id": 5}',
    ]
    path = tmp_path / "d.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'\xff\xfe{"id": 6}\n{"id": 7}')
    got = read_dataset(path)
    assert got.format == "jsonl"
    assert [(r.line, r.data["id"]) for r in got.rows] == [(1, 1), (4, 2), (8, 4), (10, 5), (12, 7)]
    assert got.rows[1].data["text"] == "ünïcode ✓"
    assert [(e.line, e.reason.split(" (")[0]) for e in got.errors] == [
        (5, "not valid JSON"),
        (6, "a row must be a JSON object, got str"),
        (7, "a row must be a JSON object, got NoneType"),
        (9, "not valid JSON"),
        (11, "not UTF-8 text"),
    ]
    assert str(got.errors[0]).startswith(f"{path}:5: not valid JSON (Expecting ',' delimiter")
    assert not got.ok


def test_an_overlong_line_is_one_row_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ds, "MAX_LINE_BYTES", 64)
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": 1}\n{"pad": "' + "x" * 500 + '"}\n{"id": 3}\n')
    got = read_dataset(path)
    assert [r.line for r in got.rows] == [1, 3]
    assert got.errors == (RowError(str(path), 2, "line longer than 64 bytes; split or remove it"),)


def test_json_arrays_keep_item_lines_and_json_lines_in_a_json_file(tmp_path: Path) -> None:
    arr = tmp_path / "a.json"
    arr.write_text('[\n  {"id": 1},\n  7,\n  {"id": 3,\n   "x": [1, 2]},\n  {"id": 4}\n]\n')
    got = read_dataset(arr)
    assert [(r.line, r.data["id"]) for r in got.rows] == [(2, 1), (4, 3), (6, 4)]
    assert [(e.line, e.reason) for e in got.errors] == [
        (3, "a row must be a JSON object, got int (fix: make every item of the array a {...} object)")
    ]
    broken = tmp_path / "b.json"
    broken.write_text('[{"id": 1},\n {"id": 2} {"id": 3}]')
    got = read_dataset(broken)
    assert [r.data["id"] for r in got.rows] == [1, 2]
    assert got.errors[0].line == 2
    assert "expected ',' or ']'" in got.errors[0].reason
    lines = tmp_path / "l.json"
    lines.write_text('{"id": 1}\n{"id": 2}\n')
    assert [r.data for r in read_dataset(lines).rows] == [{"id": 1}, {"id": 2}]
    empty = tmp_path / "e.json"
    empty.write_text("  [ ]  ")
    assert read_dataset(empty).rows == ()
    big = tmp_path / "big.json"
    big.write_text(json.dumps([{"i": i} for i in range(20_000)], indent=1))
    rows = read_dataset(big).rows
    assert len(rows) == 20_000
    assert rows[-1] == Row(3 * 20_000 - 1, {"i": 19_999})


def test_parquet_rows_are_numbered_from_one(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist([{"videos": ["a.mp4"], "id": 1}, {"videos": None, "id": 2}]), path)
    got = read_dataset(path)
    assert got.format == "parquet"
    assert [(r.line, r.data["id"], r.data["videos"]) for r in got.rows] == [(1, 1, ["a.mp4"]), (2, 2, None)]
    (tmp_path / "bad.parquet").write_bytes(os.urandom(64))
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        read_dataset(tmp_path / "bad.parquet")


def test_whole_file_problems_are_dataset_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not found"):
        read_dataset(tmp_path / "missing.jsonl")
    (tmp_path / "d.csv").write_text("a,b\n")
    with pytest.raises(DatasetError, match=r"unsupported dataset format '\.csv'"):
        read_dataset(tmp_path / "d.csv")
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(DatasetError, match="not a regular file"):
        read_dataset(tmp_path / "dir.jsonl")
    os.mkfifo(tmp_path / "pipe.jsonl")
    with pytest.raises(DatasetError, match="not a regular file"):
        read_dataset(tmp_path / "pipe.jsonl")
    (tmp_path / "latin.json").write_bytes(b'[{"a": "\xe9"}]')
    with pytest.raises(DatasetError, match="not UTF-8"):
        read_dataset(tmp_path / "latin.json")
    assert issubclass(DatasetError, ValueError)  # every evr1 CLI maps it to exit code 2


def test_read_rows_joins_files_in_order_and_names_the_first_bad_line(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.json"
    a.write_text('{"id": "a1"}\n\n{"id": "a2"}\n')
    b.write_text('[{"id": "b1"}]')
    assert [r["id"] for r in read_rows(a, b)] == ["a1", "a2", "b1"]
    a.write_text('{"id": "a1"}\n{oops\n[]\n')
    with pytest.raises(DatasetError, match=r"a\.jsonl:2: not valid JSON .*\(and 1 more\)"):
        read_rows(b, a)


def test_row_id_is_the_rows_own_id_else_its_one_based_number() -> None:
    assert row_id({"problem_id": "p7", "id": 3}, 5) == "p7"
    assert row_id({"id": 0}, 5) == "0"  # a falsy id is still an id
    assert row_id({"problem_id": None, "uid": "u"}, 5) == "u"
    assert row_id({"sample_id": 9}) == "9"
    assert row_id({"problem_id": ""}, 5) == "#5"
    assert row_id({}, 1) == "#1"
    assert row_id({}) == "(no id column)"


def test_cache_refs_read_what_build_writes_and_nothing_else() -> None:
    ref = {"file": "videos/k/ab/x.safetensors", "meta": "{}"}
    row = {"video_cache": [ref, None, "videos/k/cd/y.safetensors", 7], "image_cache": "not a list"}
    assert cache_refs(row, "video", 5) == [ref, None, {"file": "videos/k/cd/y.safetensors"}, None, None]
    assert cache_refs(row, "video", 1) == [ref]
    assert cache_refs(row, "image", 2) == [None, None]
    assert cache_refs({}, "video", 1) == [None]
