"""The synthetic fixtures themselves: the drawn index must survive encoding, scaling and every codec we test with."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from evr1_cache import write_video
from evr1_cache.testing import draw_frame_index, make_synthetic_image, make_synthetic_video, read_frame_index


@pytest.mark.parametrize("index", [0, 1, 2, 255, 4097, 65535])
@pytest.mark.parametrize("size", [(32, 32), (160, 120), (97, 203)])
def test_index_roundtrip_on_raw_and_scaled_frames(index: int, size: tuple[int, int]) -> None:
    frame = draw_frame_index(index, size)
    assert frame.shape == (size[1], size[0], 3)
    assert read_frame_index(frame) == index
    scaled = np.asarray(Image.fromarray(frame).resize((size[0] * 3 // 2, size[1] // 2 + 20), Image.BICUBIC))
    assert read_frame_index(scaled) == index


def test_out_of_range_index_and_tiny_frame_are_refused() -> None:
    with pytest.raises(ValueError, match="16 bits"):
        draw_frame_index(1 << 16, (64, 64))
    with pytest.raises(ValueError, match="too small"):
        draw_frame_index(1, (16, 16))


@pytest.mark.parametrize(("codec", "suffix"), [("libx264", ".mp4"), ("mpeg4", ".avi"), ("mjpeg", ".mkv")])
def test_every_encoded_frame_reads_back_its_index(tmp_path: Path, codec: str, suffix: str) -> None:
    pix = "yuvj420p" if codec == "mjpeg" else "yuv420p"
    path = make_synthetic_video(tmp_path / f"v{suffix}", 37, 24.0, (96, 64), codec=codec, pix_fmt=pix)
    with av.open(str(path)) as c:
        got = [read_frame_index(f.to_ndarray(format="rgb24")) for f in c.decode(video=0)]
    assert got == list(range(37))


def test_vfr_timestamps_and_rotation_metadata(tmp_path: Path) -> None:
    times = [0.0, 0.04, 0.5, 0.54, 2.0]
    path = make_synthetic_video(tmp_path / "vfr.mp4", 5, 25.0, (64, 48), timestamps=times, rotation=90)
    with av.open(str(path)) as c:
        frames = list(c.decode(video=0))
    assert [round(float(f.time), 3) for f in frames] == times
    assert frames[0].rotation == 90
    assert not list(tmp_path.glob("*.norot*"))


def test_synthetic_image(tmp_path: Path) -> None:
    path = make_synthetic_image(tmp_path / "img.png", (80, 60), index=321)
    with Image.open(path) as img:
        assert img.size == (80, 60)
        assert read_frame_index(np.asarray(img.convert("RGB"))) == 321


def test_the_same_clip_has_the_same_bytes_every_time(tmp_path: Path) -> None:
    """Two test sessions (or two users' quickstarts) that generate "the same" clip must cache the same pixels: x264's
    assembly made up to one clip in six differ once other work had run in the process (`evr1_cache.encode`)."""
    digests = set()
    for i in range(40):  # as testenv/family_data.py writes its media: one clip, then another of another shape
        make_synthetic_video(tmp_path / str(i) / "v0.mp4", n_frames=24, fps=8.0, size=(96, 64))
        clip = make_synthetic_video(tmp_path / str(i) / "v1.mp4", n_frames=30, fps=10.0, size=(64, 96))
        digests.add(clip.read_bytes())
    assert len(digests) == 1


def test_write_video_refuses_a_bad_call_and_leaves_nothing(tmp_path: Path) -> None:
    frame = np.zeros((32, 32, 3), np.uint8)
    with pytest.raises(ValueError, match="no frames"):
        write_video(tmp_path / "none.mp4", iter([]), 10.0)
    with pytest.raises(ValueError, match="2 timestamps for more frames"):
        write_video(tmp_path / "more.mp4", [frame] * 3, 10.0, timestamps=[0.0, 0.1])
    with pytest.raises(ValueError, match="3 timestamps for 2 frames"):
        write_video(tmp_path / "fewer.mp4", [frame] * 2, 10.0, timestamps=[0.0, 0.1, 0.2])
    assert list(tmp_path.iterdir()) == []
