"""Remote media only when asked: a local HTTP server (127.0.0.1 only) serves a generated clip.

Without `--allow-remote-media` a URL row is refused and no request reaches the server; with it, the clip is downloaded
once and cached with the same frames as the local file; over-cap files, redirects out of the allowed schemes and
schemes outside the allow-list are refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from evr1_cache import CacheReader, MediaError, MediaPathError, MediaPaths, RemoteMedia, decode_video
from evr1_cache.cli import main
from evr1_cache.spec import SamplingSpec
from evr1_cache.testing import Route, loopback_http, make_synthetic_video

SPEC_ARGS = ["--max-frames", "8", "--min-pixels", str(16 * 28 * 28), "--max-pixels", str(32 * 28 * 28)]
CLI_SPEC = SamplingSpec(max_frames=8, min_pixels=16 * 28 * 28, max_pixels=32 * 28 * 28)  # the same settings


def _routes(clip: bytes) -> dict[str, Route]:
    return {
        "/clip.mp4": Route(clip),
        "/no-length.mp4": Route(clip, length=False),  # the cap applies while reading
        "/to-clip": Route(location="/clip.mp4"),
        "/to-file": Route(location="file:///etc/hostname"),
        "/to-ftp": Route(location="ftp://127.0.0.1/clip.mp4"),
        "/to-https": Route(location="https://127.0.0.1:1/clip.mp4"),
    }


@dataclass(frozen=True)
class Server:
    url: str
    requests: list[str]
    clip: bytes


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """The loopback server serving a generated clip; downloads go under tmp_path (XDG_CACHE_HOME), no proxy."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    clip = make_synthetic_video(tmp_path / "local" / "clip.mp4", 20, 10.0, (96, 64)).read_bytes()
    with loopback_http(_routes(clip)) as httpd:
        yield Server(httpd.url, httpd.requests, clip)


def _data(tmp_path: Path, urls: list[str]) -> Path:
    data = tmp_path / "data" / "d.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(json.dumps({"videos": [u]}) + "\n" for u in urls), encoding="utf-8")
    return data


def _build(data: Path, out: Path, *extra: str) -> int:
    return main(["build", str(data), "--out", str(out), *SPEC_ARGS, "--no-progress", *extra])


def test_a_url_is_refused_without_the_flag_and_nothing_is_requested(
    tmp_path: Path, server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"{server.url}/clip.mp4"
    rc = _build(_data(tmp_path, [url]), tmp_path / "cache")
    err = capsys.readouterr().err
    assert rc != 0
    assert "d.jsonl:1" in err or "line 1" in err, err
    assert url in err, err
    assert "--allow-remote-media" in err, err
    assert server.requests == []


def test_an_allowed_url_is_downloaded_once_and_cached_like_the_local_file(tmp_path: Path, server: Server) -> None:
    url = f"{server.url}/clip.mp4"
    data = _data(tmp_path, [url, url])
    assert _build(data, tmp_path / "cache", "--allow-remote-media", "http") == 0
    assert _build(data, tmp_path / "cache", "--allow-remote-media", "http") == 0  # the second run reuses the file
    assert server.requests == ["/clip.mp4"]
    local = RemoteMedia(frozenset({"http"})).target(url)  # the default folder, under XDG_CACHE_HOME
    assert local.is_relative_to(tmp_path / "user-cache")
    assert local.read_bytes() == server.clip
    entry = CacheReader(tmp_path / "cache").entry(local, CLI_SPEC)
    frames, _ = decode_video(tmp_path / "local" / "clip.mp4", CLI_SPEC)
    assert entry.frames.shape == frames.shape
    assert np.array_equal(entry.frames, frames)


def test_an_allowed_url_resolves_to_its_download_and_the_download_is_not_confined(
    tmp_path: Path, server: Server
) -> None:
    paths = MediaPaths.for_folder(tmp_path / "data", allow_outside=False, allow_remote="http")
    local = paths.resolve(f"{server.url}/clip.mp4", "d.jsonl line 1")
    assert paths.resolve(local) == local  # its own download folder passes confinement (plan re-checks the path)
    assert paths.resolve(f"{server.url}/to-clip") != local  # a redirect within http is followed: another URL's copy
    assert server.requests == ["/clip.mp4", "/to-clip", "/clip.mp4"]


def test_a_file_over_the_cap_is_refused_and_nothing_is_left(tmp_path: Path, server: Server) -> None:
    remote = RemoteMedia(frozenset({"http"}), tmp_path / "dl", max_bytes=len(server.clip) - 1)
    for name in ("clip.mp4", "no-length.mp4"):  # Content-Length checked first, else the bytes while reading
        with pytest.raises(MediaError, match="cap"):
            remote.fetch(f"{server.url}/{name}")
    assert list((tmp_path / "dl").iterdir()) == []
    assert Path(RemoteMedia(frozenset({"http"}), tmp_path / "dl", len(server.clip)).fetch(f"{server.url}/no-length.mp4")).read_bytes() == server.clip  # fmt: skip


@pytest.mark.parametrize("path", ["/to-file", "/to-ftp", "/to-https"])
def test_a_redirect_out_of_the_allowed_schemes_is_refused(tmp_path: Path, server: Server, path: str) -> None:
    paths = MediaPaths.for_folder(tmp_path, allow_outside=False, allow_remote="http")
    with pytest.raises(MediaPathError, match=r"redirects to .* not followed") as info:
        paths.resolve(server.url + path, "d.jsonl line 3")
    assert "d.jsonl line 3" in str(info.value)
    assert server.requests == [path]  # the redirect target was never requested
    assert not (tmp_path / "user-cache" / "evr1" / "remote-media").exists() or not any(
        (tmp_path / "user-cache" / "evr1" / "remote-media").iterdir()
    )


@pytest.mark.parametrize("schemes", ["ftp", "http,file", "gopher"])
def test_a_scheme_outside_the_allow_list_is_refused_by_the_flag(
    tmp_path: Path, schemes: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        _build(_data(tmp_path, ["x.mp4"]), tmp_path / "cache", "--allow-remote-media", schemes)
    assert info.value.code == 2
    assert "choose from http,https" in capsys.readouterr().err
    with pytest.raises(ValueError, match="choose from http,https"):
        MediaPaths.for_folder(tmp_path, allow_outside=False, allow_remote=schemes)


def test_a_url_of_a_scheme_not_allowed_in_this_run_is_refused_naming_row_url_and_flag(
    tmp_path: Path, server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    https = server.url.replace("http:", "https:") + "/clip.mp4"
    rtmp = "rtmp://127.0.0.1/live"
    rc = _build(_data(tmp_path, [https, rtmp]), tmp_path / "cache", "--allow-remote-media", "http")
    err = capsys.readouterr().err
    assert rc != 0
    for text in (https, rtmp, "--allow-remote-media with https", "rtmp: cannot be allowed"):
        assert text in err, err
    assert server.requests == []


def test_plan_reads_a_url_only_with_the_flag(
    tmp_path: Path, server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"{server.url}/clip.mp4"
    data = tmp_path / "data" / "d.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text(json.dumps({"problem": "What is shown?", "videos": [url]}) + "\n", encoding="utf-8")
    args = ["plan", str(data), "--family", "qwen2_5_vl", *SPEC_ARGS]
    main(args)
    captured = capsys.readouterr()
    assert "0 of 1 rows planned" in captured.out, captured.out
    assert url in captured.err, captured.err
    assert "--allow-remote-media" in captured.err, captured.err
    assert server.requests == []
    main([*args, "--allow-remote-media", "http"])
    captured = capsys.readouterr()
    assert "1 of 1 rows planned" in captured.out, captured.err
    assert server.requests == ["/clip.mp4"]


def test_a_failed_download_names_the_url(tmp_path: Path, server: Server) -> None:
    paths = MediaPaths.for_folder(tmp_path, allow_outside=False, allow_remote="http")
    with pytest.raises(MediaPathError, match=r"d.jsonl line 2: http://127\.0\.0\.1:\d+/missing\.mp4: download failed"):
        paths.resolve(f"{server.url}/missing.mp4", "d.jsonl line 2")
