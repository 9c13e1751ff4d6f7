"""The synthetic fixtures themselves: the drawn index must survive encoding, scaling and every codec we test with."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

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
