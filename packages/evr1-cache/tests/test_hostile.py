"""Attacks on the cache, each built for real: hostile media paths, damaged entries, crafted headers, escaping paths.

Every case must cost only itself: one clear row error or report line naming the file and the reason, every other
row built, every other entry verified, and the exit code saying that something failed.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from pathlib import Path

import pytest

from evr1_cache import CacheReader, build_cache
from evr1_cache.cli import main
from evr1_cache.spec import ImageSpec, SamplingSpec
from evr1_cache.testing import make_synthetic_video
from evr1_cache.verify import verify_cache

SPEC_ARGS = ["--max-frames", "8", "--min-pixels", str(16 * 28 * 28), "--max-pixels", str(32 * 28 * 28)]
CLI_SPEC = SamplingSpec(max_frames=8, min_pixels=16 * 28 * 28, max_pixels=32 * 28 * 28)  # the same settings


def write_rows(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return make_synthetic_video(tmp_path / "good.mp4", 30, 10.0, (96, 64))


@pytest.mark.timeout(120)  # a blocking read of the FIFO would hang here
def test_device_pipe_directory_socket_and_nul_rows_are_row_errors(
    tmp_path: Path, good: Path, spec: SamplingSpec, image_spec: ImageSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    os.symlink("/dev/zero", tmp_path / "zero.mp4")
    os.mkfifo(tmp_path / "pipe.mp4")
    (tmp_path / "folder.mp4").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock.mp4"))
    cases = {
        "/dev/zero": "a device",
        "zero.mp4": "a device",  # a symlink to /dev/zero
        "pipe.mp4": "a named pipe",
        "folder.mp4": "a directory",
        "sock.mp4": "a socket",
        "nul\0byte.mp4": "NUL byte",
        "image\0.png": "NUL byte",
    }
    rows = [{"videos": ["good.mp4"]}]
    rows += [{"images": [p]} if p.endswith(".png") else {"videos": [p]} for p in cases]
    data = write_rows(tmp_path / "d.jsonl", rows)
    try:
        # opted out of confinement (/dev/zero is outside): each kind of file is still refused for what it is
        rc = main(
            ["build", str(data), "--out", str(tmp_path / "c"), *SPEC_ARGS, "--no-progress", "--allow-outside-media"]
        )
    finally:
        sock.close()
    assert rc == 1
    err = capsys.readouterr().err
    failed = [line for line in err.splitlines() if line.startswith("FAILED ")]
    assert len(failed) == len(cases)
    for name, reason in cases.items():
        assert any(repr(name)[1:-1] in line and reason in line for line in failed), (name, failed)
    assert f"{len(cases)} media and 0 rows failed" in err
    out_rows = [json.loads(x) for x in (tmp_path / "c" / "d.evr1.jsonl").read_text().splitlines()]
    assert out_rows[0]["video_cache"][0] is not None  # the good row was built all the same
    assert all(r["cache_errors"] for r in out_rows[1:])
    assert CacheReader(tmp_path / "c").entry(good, CLI_SPEC).frames.shape[0] == 6


def test_a_damaged_entry_is_rebuilt_not_skipped(
    tmp_path: Path, good: Path, spec: SamplingSpec, image_spec: ImageSpec
) -> None:
    data = write_rows(tmp_path / "d.jsonl", [{"videos": ["good.mp4"]}])
    first = build_cache(data, tmp_path / "c", spec, image_spec, progress=False)
    entry = CacheReader(tmp_path / "c").path_for(good, spec)
    size = entry.stat().st_size
    for damage in ("random", "truncated", "directory", "empty"):
        if damage == "random":
            entry.write_bytes(os.urandom(size))
        elif damage == "truncated":
            entry.write_bytes(entry.read_bytes()[: size // 2])
        elif damage == "directory":
            entry.unlink()
            entry.mkdir()
            (entry / "x").write_text("x")
        else:
            entry.write_bytes(b"")
        again = build_cache(data, tmp_path / "c", spec, image_spec, progress=False)
        assert (again.built, again.skipped, again.rebuilt, again.ok) == (1, 0, 1, True), damage
        assert any("rebuilt" in n for n in again.notes)
        assert entry.is_file()
        assert entry.stat().st_size == size
        row = json.loads(again.output_data.read_text())  # type: ignore[union-attr]
        assert row["video_cache"][0]["file"] == json.loads(first.output_data.read_text())["video_cache"][0]["file"]  # type: ignore[union-attr]
    assert verify_cache(tmp_path / "c").ok


def _craft(path: Path, header: object, data: bytes = b"", *, raw: bytes | None = None) -> Path:
    text = raw if raw is not None else json.dumps(header).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def _meta() -> dict[str, str]:
    return {"format": "evr1-cache/1", "kind": "video", "meta": "{}", "spec_key": "0" * 16, "source": "{}"}


def test_verify_names_every_crafted_header_and_carries_on(
    tmp_path: Path, good: Path, spec: SamplingSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "c"
    cache.mkdir()
    good_entry = CacheReader(cache).ensure(good, spec).file
    folder = good_entry.parent
    names = iter(f"{i:02x}" + "ab" * 15 + ".safetensors" for i in range(256))

    def at() -> Path:
        """A fresh entry path under the good entry's spec folder (a well-formed name, so the header is what fails)."""
        name = next(names)
        return folder.parent / name[:2] / name

    frames = {"dtype": "U8", "shape": [1, 2, 2, 3], "data_offsets": [0, 12]}
    crafted = {
        "overflowing shape": _craft(at(), {"__metadata__": _meta(), "frames": {**frames, "shape": [2**31] * 3 + [3]}}),
        "huge shape": _craft(at(), {"__metadata__": _meta(), "frames": {**frames, "shape": [2**63, 2**63, 1, 3]}}),
        "negative shape": _craft(at(), {"__metadata__": _meta(), "frames": {**frames, "shape": [-1, 2, 2, 3]}}),
        "missing data_offsets": _craft(
            at(), {"__metadata__": _meta(), "frames": {"dtype": "U8", "shape": [1, 2, 2, 3]}}
        ),
        "50 MB of nested [": _craft(at(), None, raw=b"[" * (50 << 20)),
        "100k nested [": _craft(at(), None, raw=b"[" * 100_000),
        "list as __metadata__": _craft(at(), {"__metadata__": ["format", "evr1-cache/1"], "frames": frames}),
        "header is a list": _craft(at(), [1, 2, 3]),
        "non-string metadata": _craft(at(), {"__metadata__": {**_meta(), "meta": {"x": 1}}, "frames": frames}),
        "float dtype": _craft(at(), {"__metadata__": _meta(), "frames": {**frames, "dtype": "F32"}}, b"\0" * 12),
        "extra tensor": _craft(at(), {"__metadata__": _meta(), "frames": frames, "w": frames}, b"\0" * 12),
        "offsets past the end": _craft(
            at(), {"__metadata__": _meta(), "frames": {**frames, "data_offsets": [0, 10**18]}}
        ),
        "bad meta JSON": _craft(at(), {"__metadata__": _meta(), "frames": frames}, b"\0" * 12),
        "not UTF-8": _craft(at(), None, raw=b"\xff\xfe{}"),
        "8 bytes only": _craft(at(), None, raw=b""),
    }
    (folder / "dir").mkdir()  # a directory where entries live
    os.mkfifo(folder / ("cd" * 16 + ".safetensors"))  # a pipe at an entry path: reported, never opened
    os.symlink(good_entry, folder / ("ef" * 16 + ".safetensors"))
    (folder / "notes.txt").write_text("stray")
    assert main(["verify", str(cache)]) == 1
    out = capsys.readouterr().out
    rep = verify_cache(cache)
    assert rep.entries == 1  # the good entry, verified after all the bad ones
    bad = dict(rep.corrupt)
    for case, path in crafted.items():
        rel = path.relative_to(cache).as_posix()
        assert rel in bad, case
        assert f"BAD {rel}: " in out, case
    assert "a directory where a cache entry should be" in bad[(folder / "dir").relative_to(cache).as_posix()]
    assert "a link" in bad[(folder / ("ef" * 16 + ".safetensors")).relative_to(cache).as_posix()]
    assert "not a regular file" in bad[(folder / ("cd" * 16 + ".safetensors")).relative_to(cache).as_posix()]
    assert "not a cache entry" in bad[(folder / "notes.txt").relative_to(cache).as_posix()]
    assert len(rep.corrupt) == len(crafted) + 4
    assert "exceeds" in bad[crafted["50 MB of nested ["].relative_to(cache).as_posix()]
    assert "RecursionError" in bad[crafted["100k nested ["].relative_to(cache).as_posix()]
    assert main(["verify", str(cache), "--delete"]) == 1
    assert verify_cache(cache).ok
    assert good_entry.is_file()


def test_every_kind_of_temp_leftover_is_counted_and_cleaned(tmp_path: Path, good: Path, spec: SamplingSpec) -> None:
    cache = tmp_path / "c"
    cache.mkdir()
    entry = CacheReader(cache).ensure(good, spec).file
    leftovers = [
        entry.parent / f".{entry.name}.otherhost.4242.140000.tmp",  # ours, from a killed writer
        entry.parent / ".tmpAB12cd",  # what safetensors' own writer leaves (older evr1-cache wrote through it)
        cache / ".d.evr1.jsonl.host.1.2.tmp",  # an interrupted output dataset
        cache / ".errors.rank-00000-of-00001.txt.host.1.2.tmp",
        cache / "index" / ".rank-00000-of-00001.jsonl.host.1.2.tmp",
    ]
    for p in leftovers:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(entry.read_bytes()[:1000])
    rep = verify_cache(cache)
    assert sorted(rep.temp_files) == sorted(p.relative_to(cache).as_posix() for p in leftovers)
    assert rep.entries == 1  # a complete-looking temp file is never counted as an entry
    assert not rep.ok
    cleaned = verify_cache(cache, delete=True)
    assert cleaned.deleted == len(leftovers)
    assert not any(p.exists() for p in leftovers)
    assert verify_cache(cache).ok


def test_media_root_containment_is_the_default_and_refuses_escapes(
    tmp_path: Path, good: Path, spec: SamplingSpec, image_spec: ImageSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    inside = make_synthetic_video(root / "in.mp4", 30, 10.0, (96, 64), gop=4)
    os.symlink(good, root / "link-out.mp4")  # a link inside the root pointing outside it
    rows = [
        {"videos": ["in.mp4"]},
        {"videos": ["../good.mp4"]},
        {"videos": [str(good)]},
        {"videos": ["link-out.mp4"]},
        {"videos": [str(inside)]},  # absolute but inside: fine
    ]
    (tmp_path / "meta").mkdir()
    data = write_rows(tmp_path / "meta" / "d.jsonl", rows)
    free = build_cache(
        data, tmp_path / "c1", spec, image_spec, media_root=root, progress=False, allow_outside_media=True
    )
    assert free.ok  # the explicit opt-out reads media anywhere
    args = ["build", str(data), "--out", str(tmp_path / "c2"), "--media-root", str(root), *SPEC_ARGS]
    assert main([*args, "--no-progress"]) == 1
    failed = [x for x in capsys.readouterr().err.splitlines() if x.startswith("FAILED ")]
    assert len(failed) == 3  # one per row: each names its line
    assert all("outside the media folder" in x and "--allow-outside-media" in x for x in failed)
    assert [any(f"d.jsonl line {n}:" in x for x in failed) for n in (2, 3, 4)] == [True] * 3
    assert any("link-out.mp4" in x for x in failed)
    rows_out = [json.loads(x) for x in (tmp_path / "c2" / "d.evr1.jsonl").read_text().splitlines()]
    assert [r["video_cache"][0] is not None for r in rows_out] == [True, False, False, False, True]
    # without --media-root the data file's folder is the root: every video here lies outside it
    assert main(["build", str(data), "--out", str(tmp_path / "c3"), *SPEC_ARGS, "--no-progress"]) == 1


def test_a_malformed_line_is_a_row_error_and_every_other_row_is_built(
    tmp_path: Path, good: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_synthetic_video(tmp_path / "b.mp4", 30, 10.0, (96, 64), gop=3)
    lines = [
        {"videos": ["good.mp4"]},
        {"videos": ["b.mp4"]},
        '{"videos": ["good.mp4"], "problem": "unterminated',
        "[1, 2]",
        "",
        {"videos": ["b.mp4"], "problem": "last"},
    ]
    data = write_rows(tmp_path / "train.jsonl", lines)
    assert main(["build", str(data), "--out", str(tmp_path / "c"), *SPEC_ARGS, "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert f"FAILED {data}:3: not valid JSON" in captured.err
    assert f"FAILED {data}:4: a row must be a JSON object, got list" in captured.err
    assert "0 media and 2 rows failed" in captured.err
    assert "built 2" in captured.out
    out_rows = [json.loads(x) for x in (tmp_path / "c" / "train.evr1.jsonl").read_text().splitlines()]
    assert len(out_rows) == 3
    assert all(r["video_cache"][0] for r in out_rows)
    errors = (tmp_path / "c" / "errors.rank-00000-of-00001.txt").read_text().splitlines()
    assert errors[0].startswith(f"{data}:3: ")
