"""The one media loader: its modes, the cache / decode equality it keeps, `frames` for tools, `resolve`, images."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from evr1_cache import (
    CacheReader,
    ImageSpec,
    MediaLoader,
    MediaMissError,
    SamplingSpec,
    decode_video,
    load_image,
    media_key,
    media_mode,
)
from evr1_cache.testing import make_synthetic_image, read_frame_index


def test_media_mode_accepts_both_spellings_and_names_the_choices() -> None:
    assert media_mode("cache_only") == media_mode("cache-only") == "cache-only"
    assert media_mode("prefer_cache") == "prefer-cache"
    assert media_mode("decode") == "decode"
    with pytest.raises(ValueError, match="cache-only, prefer-cache, decode"):
        media_mode("cached")


def test_modes_need_what_they_read(tmp_path: Path) -> None:
    assert MediaLoader().mode == "decode"
    assert MediaLoader(tmp_path).mode == "prefer-cache"
    with pytest.raises(ValueError, match="cache-only media mode needs a cache directory"):
        MediaLoader(mode="cache-only")
    with pytest.raises(ValueError, match="write_cache needs a cache directory"):
        MediaLoader(write_cache=True)


def test_cache_only_names_row_file_spec_and_fix(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    loader = MediaLoader(tmp_path, mode="cache-only", video_spec=spec, miss_fix="build it first")
    with pytest.raises(MediaMissError, match=rf"row r7: video .*clip\.mp4.* for spec {spec.key()} .*build it first"):
        loader.video(clip, row="r7")
    CacheReader(tmp_path).ensure(clip, spec)
    served = loader.video(clip, row="r7")
    assert served.cached
    assert loader.misses == 0


def test_prefer_cache_decodes_a_miss_and_serves_the_same_frames_as_the_cache(
    tmp_path: Path, clip: Path, spec: SamplingSpec
) -> None:
    loader = MediaLoader(tmp_path, video_spec=spec)
    missed = loader.video(clip)
    assert not missed.cached
    assert loader.misses == 1
    CacheReader(tmp_path).ensure(clip, spec)
    hit = loader.video(clip)
    assert hit.cached
    assert loader.misses == 1
    ref, meta = decode_video(clip, spec)
    for served in (missed, hit):
        assert np.array_equal(served.frames, ref)
        assert served.meta == meta
        assert served.key == media_key(str(clip), spec)
    assert MediaLoader(tmp_path, mode="decode").video(clip, spec).cached is False


def test_write_cache_builds_on_the_first_miss_and_serves_the_entry_after(
    tmp_path: Path, clip: Path, spec: SamplingSpec
) -> None:
    loader = MediaLoader(tmp_path / "cache", video_spec=spec, write_cache=True)
    assert not loader.cached(clip, spec)
    first = loader.video(clip)
    assert not first.cached
    assert loader.cached(clip, spec)
    assert loader.video(clip).cached


def test_a_reference_of_another_spec_is_never_served(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    entry = CacheReader(tmp_path).ensure(clip, spec)
    ref = {"file": os.fspath(entry.file.relative_to(tmp_path))}
    loader = MediaLoader(tmp_path, mode="cache-only", video_spec=spec)
    assert loader.cached(clip, spec, ref)
    assert loader.video(clip, ref=ref).cached
    other = dataclasses.replace(spec, max_frames=4)
    assert not loader.cached(clip, other, ref)
    with pytest.raises(MediaMissError, match="built for spec"):
        loader.video(clip, other, ref=ref)


def test_frames_for_tools_are_computed_once_then_served_from_the_cache(
    tmp_path: Path, clip: Path, spec: SamplingSpec
) -> None:
    loader = MediaLoader(tmp_path, mode="cache-only", video_spec=spec)
    slow = dataclasses.replace(spec, fps=1.0)
    first = loader.frames(clip, slow)
    again = loader.frames(clip, slow)
    assert (first.cached, again.cached) == (False, True)
    assert np.array_equal(first.frames, again.frames)
    assert [read_frame_index(f) for f in again.frames] == list(again.meta.frames_indices)
    assert again.timestamps == tuple(i / 25.0 for i in again.meta.frames_indices)
    assert len(again.timestamps) < len(decode_video(clip, spec)[1].frames_indices)  # 1 fps: fewer frames than 2 fps
    assert MediaLoader().frames(clip, slow).cached is False  # no cache directory: decoded each time


def test_resolve_is_the_one_place_a_path_becomes_a_file(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    loader = MediaLoader(media_root=clip.parent, video_spec=spec)
    assert loader.resolve(clip.name) == str(clip)
    assert loader.resolve(f"file://{clip}") == str(clip)
    assert loader.resolve("sub/../" + clip.name) == str(clip)
    assert loader.video(clip.name).key == media_key(str(clip), spec)
    with pytest.raises(MediaMissError, match=r"row x: cannot decode video .*nothing\.mp4"):
        loader.video("nothing.mp4", row="x")


def test_images_from_a_file_the_cache_bytes_and_pil_are_the_same_pixels(tmp_path: Path) -> None:
    from PIL import Image

    image_spec = ImageSpec(min_pixels=16 * 28 * 28, max_pixels=64 * 28 * 28)
    still = make_synthetic_image(tmp_path / "still.png", (100, 70))
    want = load_image(still, image_spec)
    loader = MediaLoader(tmp_path / "cache", image_spec=image_spec, write_cache=True)
    from_file = loader.image(still)
    assert not from_file.cached
    assert loader.image(still).cached
    assert np.array_equal(from_file.pixels, want)
    assert np.array_equal(loader.image(still.read_bytes()).pixels, want)
    with Image.open(still) as img:
        assert np.array_equal(loader.image(img).pixels, want)
    with pytest.raises(MediaMissError, match=r"row q: cannot read image .*gone\.png"):
        MediaLoader(image_spec=image_spec).image(tmp_path / "gone.png", row="q")


def test_entry_file_names_the_serving_entry_inside_the_cache_only(
    tmp_path: Path, clip: Path, spec: SamplingSpec
) -> None:
    loader = MediaLoader(tmp_path, video_spec=spec)
    assert loader.entry_file(clip, spec) is None  # not built yet
    entry = CacheReader(tmp_path).ensure(clip, spec)
    rel = os.fspath(entry.file.relative_to(tmp_path))
    assert loader.entry_file(clip, spec) == rel  # by content and spec
    assert loader.entry_file(clip, spec, {"file": rel}) == rel  # by the row's reference
    assert loader.entry_file(clip, spec, "../../etc/passwd") == rel  # a reference outside the cache is not followed
    assert MediaLoader(video_spec=spec).entry_file(clip, spec) is None  # no cache
