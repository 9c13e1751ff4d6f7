"""Attacks on `evr1-eval run` through the annotations' media paths and the media themselves (issue: trust at the edges).

Each test is the attacker's row and the expected refusal, through the real command (fake backend, real decoding):
a `file:` / `http:` path with a local decoy of that name reads the decoy (never the outside file, never a request);
absolute paths, `../` and symlinks out of the media folder are load errors naming the file, the line, the path and
`--allow-outside-media`; a FIFO is an error row, not a hang; a 16000 x 16000 decode bomb is an error row, decoded in
well under 1 GiB (the slow test measures the peak in a child process).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from evr1_cache import MediaLoader, decode_video
from evr1_cache.testing import make_decode_bomb, make_synthetic_video, peak_rss_kib
from evr1_eval.benchmarks import get_benchmark
from evr1_eval.cli import main
from evr1_eval.jobs import sampling_overrides
from evr1_eval.runner import SampleMedia, sampling_for

SAMPLING = ["--sampling", "fps=2", "--sampling", "max_pixels=3136", "--sampling", "min_pixels=784"]


def _row(i: int, path: str) -> dict[str, object]:
    return {
        "problem_id": f"p{i}",
        "problem": "What is shown?",
        "options": ["A. a digit", "B. a cat"],
        "solution": "<answer>A</answer>",
        "problem_type": "multiple choice",
        "path": path,
    }


def _write(ann: Path, paths: list[str]) -> None:
    ann.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(_row(i, p)) for i, p in enumerate(paths)]
    (ann / "mvbench.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _run(ann: Path, out: Path, *extra: str) -> list[str]:
    argv = ["run", "--model", "m", "--backend", "fake", "--engine-kwargs", json.dumps({"response": "A"})]
    argv += ["--benchmarks", "mvbench", "--annotations-dir", str(ann), "--out", str(out), "--no-progress", *SAMPLING]
    main([*argv, *extra])
    results = out / "mvbench" / "results.jsonl"
    return results.read_text().splitlines() if results.exists() else []


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    return make_synthetic_video(tmp_path / "elsewhere" / "secret.mp4", 12, 6.0, (160, 120))


def test_a_file_url_with_a_decoy_is_loaded_and_decoded_as_the_decoy(tmp_path: Path, secret: Path) -> None:
    ann = tmp_path / "ann"
    row_path = f"file:{secret}"
    decoy = make_synthetic_video(ann / row_path, 12, 6.0, (96, 64))
    _write(ann, [row_path])
    bench = get_benchmark("mvbench")
    loaded = bench.load(ann / "mvbench.jsonl")
    assert loaded.errors == []
    assert loaded.samples[0].videos == (str(decoy),)
    spec = sampling_for(
        bench, sampling_overrides(bench.sampling, {"fps": 2, "max_pixels": 3136, "min_pixels": 784}, "m")
    )
    media = SampleMedia(MediaLoader()).load(loaded.samples[0], spec)
    assert np.array_equal(media.videos[0].frames, decode_video(decoy, spec)[0])  # before: the secret's frames
    assert not np.array_equal(media.videos[0].frames, decode_video(secret, spec)[0])
    rows = [json.loads(x) for x in _run(ann, tmp_path / "out")]
    assert [r["error"] for r in rows] == [None]


def test_an_http_path_with_a_decoy_sends_no_request(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    ann = tmp_path / "ann"
    row_path = f"http:/127.0.0.1:{server.getsockname()[1]}/x.mp4"
    make_synthetic_video(ann / row_path, 12, 6.0, (96, 64))
    _write(ann, [row_path, "http://127.0.0.1:9/remote.mp4"])
    try:
        lines = _run(ann, tmp_path / "out")
        with pytest.raises(TimeoutError):  # before: FFmpeg connected to the server
            server.accept()
    finally:
        server.close()
    assert [json.loads(x)["error"] for x in lines] == [None]  # the remote URL never became a sample


def test_escapes_are_load_errors_naming_line_path_and_flag(
    tmp_path: Path, secret: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ann = tmp_path / "ann"
    make_synthetic_video(ann / "in.mp4", 12, 6.0, (96, 64))
    os.symlink(secret, ann / "link-out.mp4")
    _write(ann, ["in.mp4", str(secret), "../elsewhere/secret.mp4", "link-out.mp4", "http://h/x.mp4"])
    rows = [json.loads(x) for x in _run(ann, tmp_path / "out")]
    assert [r["id"] for r in rows] == ["p0"]  # before: all four outside / remote videos were read
    err = capsys.readouterr().err
    for line in (2, 3, 4):
        assert f"mvbench.jsonl line {line}: " in err
    assert err.count("--allow-outside-media") >= 3
    assert "mvbench.jsonl line 5: " in err
    assert "remote media" in err
    # the explicit opt-out reads them (the remote URL stays refused)
    rows = [json.loads(x) for x in _run(ann, tmp_path / "out2", "--allow-outside-media")]
    assert sorted(r["id"] for r in rows) == ["p0", "p1", "p2", "p3"]
    assert all(r["error"] is None for r in rows)
    # --media-root moves the folder they must stay in
    rows = [json.loads(x) for x in _run(ann, tmp_path / "out3", "--media-root", str(tmp_path))]
    # relative paths now join tmp_path: "../elsewhere/..." leaves it; "in.mp4" and "link-out.mp4" are not there
    assert {r["id"]: r["error"] is None for r in rows} == {"p0": False, "p1": True, "p3": False}


def test_a_fifo_is_an_error_row_not_a_hang(tmp_path: Path) -> None:
    ann = tmp_path / "ann"
    ann.mkdir()
    os.mkfifo(ann / "pipe.mp4")
    make_synthetic_video(ann / "in.mp4", 12, 6.0, (96, 64))
    _write(ann, ["pipe.mp4", "in.mp4"])
    rows = {json.loads(x)["id"]: json.loads(x) for x in _run(ann, tmp_path / "out")}
    assert "named pipe" in rows["p0"]["error"]
    assert rows["p1"]["error"] is None


@pytest.mark.slow
def test_a_16000_square_bomb_is_an_error_row_under_1_gib(tmp_path: Path) -> None:
    ann = tmp_path / "ann"
    make_decode_bomb(ann / "bomb.mp4")
    _write(ann, ["bomb.mp4"])
    out = tmp_path / "out"
    argv = [
        sys.executable,
        "-m",
        "evr1_eval.cli",
        "run",
        "--model",
        "m",
        "--backend",
        "fake",
        "--benchmarks",
        "mvbench",
    ]
    argv += ["--annotations-dir", str(ann), "--out", str(out), "--no-progress", *SAMPLING]
    _, kib, text = peak_rss_kib(argv)
    rows = [json.loads(x) for x in (out / "mvbench" / "results.jsonl").read_text().splitlines()]
    assert "decode budget" in rows[0]["error"], text
    assert kib < 2**20, f"peak {kib / 2**10:.0f} MiB"  # before: ~5.4 GiB


def test_a_media_url_is_read_only_with_allow_remote_media(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the flag a URL row is a load error naming the line, the URL and the flag, and the (loopback) server gets
    no request; with `--allow-remote-media http` the clip is downloaded once and scored like a local file."""
    from evr1_cache import RemoteMedia
    from evr1_cache.testing import Route, loopback_http

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    for proxy in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    clip = make_synthetic_video(tmp_path / "local" / "clip.mp4", 12, 6.0, (96, 64))
    ann = tmp_path / "ann"
    with loopback_http({"/clip.mp4": Route(clip.read_bytes())}) as server:
        url = f"{server.url}/clip.mp4"
        _write(ann, [url])
        assert _run(ann, tmp_path / "out") == []
        err = capsys.readouterr().err
        assert f"mvbench.jsonl line 1: {url}" in err, err
        assert "--allow-remote-media" in err, err
        assert server.requests == []
        rows = [json.loads(x) for x in _run(ann, tmp_path / "out2", "--allow-remote-media", "http")]
        assert [r["error"] for r in rows] == [None]
        loaded = get_benchmark("mvbench").load(ann / "mvbench.jsonl", allow_remote_media=["http"])
        assert server.requests == ["/clip.mp4"]  # the second load reused the download
    local = RemoteMedia(frozenset({"http"})).target(url)
    assert loaded.samples[0].videos == (str(local),)
    assert local.read_bytes() == clip.read_bytes()
