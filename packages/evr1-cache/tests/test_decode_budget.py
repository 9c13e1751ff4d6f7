"""The decode budget (evr1_cache.budget): a frame or a video too large to decode is refused before it is allocated.

Attack: a 0.75 MB H.264 file of two 16000 x 16000 frames. Before: `evr1-cache build` took 5.3 GB and 28-57 s. Now:
refused from the stream header, the build's peak memory stays far under 1 GiB (the slow test measures it in a child
process). The fast tests lower the budget on an ordinary clip to check every refusal point without the big encode.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from evr1_cache import ImageSpec, MediaError, SamplingSpec, budget, build_cache, decode_video, load_image, probe
from evr1_cache.testing import make_decode_bomb, make_synthetic_image, make_synthetic_video, peak_rss_kib

SPEC = SamplingSpec(max_frames=4, min_pixels=16 * 28 * 28, max_pixels=32 * 28 * 28)


@pytest.fixture
def clip(tmp_path: Path) -> Path:
    return make_synthetic_video(tmp_path / "clip.mp4", 12, 6.0, (96, 64))


def test_a_frame_over_the_budget_is_refused_by_the_probe_and_the_build(
    clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, _ = decode_video(clip, SPEC)
    monkeypatch.setattr(budget, "MAX_FRAME_PIXELS", 96 * 64 - 1)
    with pytest.raises(MediaError, match=r"frames of 96x64 .* exceed the decode budget"):
        probe(clip)
    (tmp_path / "d.jsonl").write_text(json.dumps({"videos": ["clip.mp4"]}) + "\n")
    report = build_cache(tmp_path / "d.jsonl", tmp_path / "c", SPEC, ImageSpec(), progress=False)
    assert report.failed == 1
    assert (
        "decode budget"
        in "".join(report.errors) + (tmp_path / "c").joinpath("errors.rank-00000-of-00001.txt").read_text()
    )
    monkeypatch.setattr(budget, "MAX_FRAME_PIXELS", 96 * 64)  # exactly at the budget: decoded, the same pixels
    after, _ = decode_video(clip, SPEC)
    assert np.array_equal(before, after)


def test_an_image_over_the_budget_is_refused_before_its_pixels_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = make_synthetic_image(tmp_path / "i.png", (64, 48))
    monkeypatch.setattr(budget, "MAX_FRAME_PIXELS", 64 * 48 - 1)
    with pytest.raises(MediaError, match="exceed the decode budget"):
        load_image(image, ImageSpec())


def test_a_video_whose_kept_frames_pass_the_budget_is_refused(clip: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    frames, _ = decode_video(clip, SPEC)
    t, h, w, _ = frames.shape
    monkeypatch.setattr(budget, "MAX_VIDEO_BYTES", frames.nbytes - 1)  # one byte short of the resized frames
    with pytest.raises(MediaError, match=rf"{t} frames of {w}x{h} take .* over the decode budget"):
        decode_video(clip, SPEC)
    monkeypatch.setattr(budget, "MAX_VIDEO_BYTES", frames.nbytes)
    assert np.array_equal(decode_video(clip, SPEC)[0], frames)


def test_large_frames_get_fewer_decoder_threads() -> None:
    assert budget.decode_threads(0, 1920, 1080) == 0  # FFmpeg's own choice where frames are small
    assert budget.decode_threads(8, 1920, 1080) == 8
    assert budget.decode_threads(64, 8192, 8192) == budget.THREAD_FRAME_BYTES // (8192 * 8192 * 3 // 2)
    assert budget.decode_threads(4, 20000, 20000) == 1


@pytest.mark.slow
def test_a_16000_square_bomb_is_refused_under_1_gib(tmp_path: Path) -> None:
    bomb = make_decode_bomb(tmp_path / "bomb.mp4")
    assert bomb.stat().st_size < 2**20
    (tmp_path / "d.jsonl").write_text(json.dumps({"videos": ["bomb.mp4"]}) + "\n")
    argv = [sys.executable, "-m", "evr1_cache.cli", "build", str(tmp_path / "d.jsonl"), "--out", str(tmp_path / "c")]
    code, kib, out = peak_rss_kib([*argv, "--no-progress"])
    assert code == 1, out
    assert "16000x16000" in out
    assert "decode budget" in out
    assert kib < 2**20, f"peak {kib / 2**10:.0f} MiB"  # before: ~5.3 GiB
