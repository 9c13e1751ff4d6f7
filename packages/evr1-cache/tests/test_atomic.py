"""The workspace's one atomic-write helper: a write that fails midway leaves the old file (or nothing) and no temp."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from evr1_cache.atomic import (
    atomic_bytes,
    atomic_folder,
    atomic_json,
    atomic_open,
    atomic_path,
    atomic_text,
    is_temp,
    temp_path,
)


class Boom(Exception):
    pass


def _only(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _killed_midway(writer: AbstractContextManager[Any], write: Callable[[Any], object]) -> None:
    """Write part of the output, then fail as a killed or crashing writer would."""
    with writer as target:
        write(target)
        raise Boom


def test_text_bytes_json_land_complete(tmp_path: Path) -> None:
    atomic_text(tmp_path / "a" / "t.txt", "héllo")
    atomic_bytes(tmp_path / "a" / "b.bin", b"\x00\x01")
    atomic_json(tmp_path / "a" / "j.json", {"x": [1, 2]})
    assert (tmp_path / "a" / "t.txt").read_text(encoding="utf-8") == "héllo"
    assert (tmp_path / "a" / "b.bin").read_bytes() == b"\x00\x01"
    assert json.loads((tmp_path / "a" / "j.json").read_text()) == {"x": [1, 2]}
    assert _only(tmp_path / "a") == ["b.bin", "j.json", "t.txt"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "rows.jsonl"
    atomic_text(target, "old\n")
    with pytest.raises(Boom):
        _killed_midway(atomic_open(target, "w"), lambda fh: fh.write("half a "))
    assert target.read_text() == "old\n"
    assert _only(tmp_path) == ["rows.jsonl"]


def test_atomic_path_keeps_the_suffix_for_writers_that_read_it(tmp_path: Path) -> None:
    target = tmp_path / "curve.png"
    with atomic_path(target, keep_suffix=True) as tmp:
        assert tmp.suffix == ".png"
        assert tmp.parent == tmp_path
        assert is_temp(tmp)
        assert not target.exists()
        tmp.write_bytes(b"png")
    assert target.read_bytes() == b"png"
    with pytest.raises(Boom):
        _killed_midway(atomic_path(target, keep_suffix=True), lambda tmp: tmp.write_bytes(b"broken"))
    assert target.read_bytes() == b"png"
    assert _only(tmp_path) == ["curve.png"]


def test_atomic_folder_replaces_a_folder_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "ckpt"
    with atomic_folder(target) as tmp:
        (tmp / "state.json").write_text("1")
    assert _only(target) == ["state.json"]
    with pytest.raises(Boom):
        _killed_midway(atomic_folder(target), lambda tmp: (tmp / "state.json").write_text("2"))
    assert (target / "state.json").read_text() == "1"
    with atomic_folder(target) as tmp:
        (tmp / "other.json").write_text("3")
    assert _only(target) == ["other.json"]  # the old folder is gone, not merged
    assert _only(tmp_path) == ["ckpt"]


def test_is_temp_knows_every_leftover_and_nothing_else(tmp_path: Path) -> None:
    final = tmp_path / "entry.safetensors"
    assert is_temp(temp_path(final))
    assert is_temp(temp_path(final, keep_suffix=True))
    assert is_temp(tmp_path / ".tmpab12cd")  # safetensors' own temp name
    assert not is_temp(final)
    assert not is_temp(tmp_path / ".hidden.safetensors")
