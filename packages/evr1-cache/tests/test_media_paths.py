"""Attacks through a row's media path (evr1_cache.paths): a path is a path, confined to the dataset's folder.

Each test is the attacker's row and the expected refusal: a `file:` or `http:` string with a local decoy of that name
is read as the decoy (never the outside file, never a request); a URL is refused; absolute paths, `../` and symlinks
out of the folder are refused by default, naming the line, the path and the flag; a playlist naming other files is
not followed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from evr1_cache import ALLOW_OUTSIDE_FLAG, CacheReader, MediaError, MediaPathError, MediaPaths, build_cache, probe
from evr1_cache.cli import main
from evr1_cache.spec import ImageSpec, SamplingSpec
from evr1_cache.testing import make_synthetic_video

SPEC = SamplingSpec(max_frames=4, min_pixels=16 * 28 * 28, max_pixels=32 * 28 * 28)
SPEC_ARGS = ["--max-frames", "4", "--min-pixels", str(16 * 28 * 28), "--max-pixels", str(32 * 28 * 28)]
DECOY = (96, 64)  # the decoy's size; the outside secret is 160x120
SECRET = (160, 120)


def _rows(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(dataset folder, an outside secret video)."""
    data = tmp_path / "data"
    data.mkdir()
    secret = make_synthetic_video(tmp_path / "elsewhere" / "secret.mp4", 12, 6.0, SECRET)
    return data, secret


def test_a_file_url_with_a_local_decoy_reads_the_decoy_never_the_outside_file(layout: tuple[Path, Path]) -> None:
    data, secret = layout
    row_path = f"file:{secret}"  # "file:/…/elsewhere/secret.mp4": FFmpeg's file protocol, a relative path to us
    decoy = data / row_path
    make_synthetic_video(decoy, 12, 6.0, DECOY)
    _rows(data / "d.jsonl", [{"videos": [row_path]}])
    report = build_cache(data / "d.jsonl", data / "cache", SPEC, ImageSpec(), progress=False)
    assert report.ok, report.errors
    entry = CacheReader(data / "cache").entry(str(decoy), SPEC)
    assert (entry.meta.width, entry.meta.height) == DECOY  # before: the secret's 160x120 was decoded
    cwd = os.getcwd()
    os.chdir(data)
    try:  # the relative string itself, handed to the probe and the decoders, is a path too
        assert (probe(row_path).width, probe(row_path).height) == DECOY
    finally:
        os.chdir(cwd)


def test_an_http_path_with_a_local_decoy_sends_no_request(layout: tuple[Path, Path]) -> None:
    data, _ = layout
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    row_path = f"http:/127.0.0.1:{port}/x.mp4"
    make_synthetic_video(data / row_path, 12, 6.0, DECOY)
    _rows(data / "d.jsonl", [{"videos": [row_path]}])
    try:
        report = build_cache(data / "d.jsonl", data / "cache", SPEC, ImageSpec(), progress=False)
        with pytest.raises(TimeoutError):  # nobody connected
            server.accept()
    finally:
        server.close()
    assert report.ok, report.errors


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/x.mp4", "https://example.com/v.mp4", "rtmp://h/live"])
def test_a_remote_url_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(MediaPathError, match="remote media"):
        MediaPaths.for_folder(tmp_path, allow_outside=True).resolve(url, "d.jsonl line 1")


def test_escapes_are_refused_by_default_naming_line_path_and_flag(
    layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data, secret = layout
    make_synthetic_video(data / "in.mp4", 12, 6.0, DECOY)
    os.symlink(secret, data / "link-out.mp4")
    (data / "sub").mkdir()
    rows = [
        {"videos": ["in.mp4"]},
        {"videos": [str(secret)]},  # absolute, outside
        {"videos": ["../elsewhere/secret.mp4"]},
        {"videos": ["link-out.mp4"]},  # a link inside pointing out
        {"videos": ["sub/../in.mp4"]},  # `..` that stays inside: fine
        {"videos": [f"file://{secret}"]},  # a file:// URI is the path it names: outside
    ]
    _rows(data / "d.jsonl", rows)
    assert main(["build", str(data / "d.jsonl"), "--out", str(data / "c"), *SPEC_ARGS, "--no-progress"]) == 1
    err = capsys.readouterr().err
    failed = [x for x in err.splitlines() if x.startswith("FAILED ")]
    assert len(failed) == 4, err
    for line_no in (2, 3, 4, 6):
        assert any(f"d.jsonl line {line_no}: " in x for x in failed), (line_no, failed)
    assert all("outside the media folder" in x and ALLOW_OUTSIDE_FLAG in x for x in failed)
    out_rows = [json.loads(x) for x in (data / "c" / "d.evr1.jsonl").read_text().splitlines()]
    assert [r["video_cache"][0] is not None for r in out_rows] == [True, False, False, False, True, False]
    assert [r["videos"][0] for r in out_rows][1:4] == [str(secret), "../elsewhere/secret.mp4", "link-out.mp4"]
    # the explicit opt-out reads them all
    args = ["build", str(data / "d.jsonl"), "--out", str(data / "c2"), *SPEC_ARGS, "--no-progress"]
    assert main([*args, ALLOW_OUTSIDE_FLAG]) == 0
    # --media-root moves the folder the paths stay in
    assert main([*args[:3], str(data / "c3"), *SPEC_ARGS, "--no-progress", "--media-root", str(data.parent)]) == 1


def test_a_playlist_naming_other_files_is_not_followed(layout: tuple[Path, Path]) -> None:
    data, secret = layout
    shutil.copy(secret, data / "seg.ts")  # even a segment inside the folder: the playlist format itself is refused
    playlist = data / "list.m3u8"
    playlist.write_text(f"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nfile:{secret}\n#EXT-X-ENDLIST\n")
    with pytest.raises(MediaError, match="a hls file reads other files"):
        probe(playlist)
    concat = data / "list.ffconcat"
    concat.write_text(f"ffconcat version 1.0\nfile '{secret}'\n")
    with pytest.raises(MediaError, match=r"concat|not a readable video"):
        probe(concat)
