"""Store and reader: content addressing, atomic writes, validation, and exact round trips."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from evr1_cache import CacheReader, decode_video, load_image
from evr1_cache.reader import CacheMiss
from evr1_cache.spec import ImageSpec, SamplingSpec, VideoMeta
from evr1_cache.store import CorruptEntry, entry_key, read_entry, source_identity, temp_path, write_entry
from evr1_cache.testing import make_synthetic_image, make_synthetic_video, read_frame_index


def build_entry(root: Path, video: Path, spec: SamplingSpec) -> Path:
    from evr1_cache.build import build_one

    reader_path = CacheReader.__new__(CacheReader)
    reader_path.root = root
    final = reader_path.path_for(video, spec)
    result = build_one("video", str(video), final.stem, str(final), spec, ImageSpec(), "auto", 0)
    assert result["status"] == "ok", result
    return final


def test_load_returns_exactly_what_decode_gives(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    final = build_entry(tmp_path, clip, spec)
    reader = CacheReader(tmp_path)
    assert reader.contains(clip, spec)
    frames, meta = reader.load(clip, spec)
    ref, ref_meta = decode_video(clip, spec)
    assert isinstance(meta, VideoMeta)
    assert meta == ref_meta
    assert frames.dtype == np.uint8
    assert frames.flags.writeable
    assert np.array_equal(frames, ref)
    assert [read_frame_index(f) for f in frames] == list(meta.frames_indices)
    # the file is the raw uint8 bytes plus a small header: no float32, no pickle
    assert frames.nbytes < final.stat().st_size < frames.nbytes + 4096
    lazy, _ = reader.load(clip, spec, mmap=True)
    assert np.array_equal(lazy, frames)
    assert not list(final.parent.glob(".*.tmp"))


def test_a_different_spec_or_content_never_hits(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    build_entry(tmp_path, clip, spec)
    reader = CacheReader(tmp_path)
    other = SamplingSpec(fps=1.0, max_frames=16, min_pixels=spec.min_pixels, max_pixels=spec.max_pixels)
    assert not reader.contains(clip, other)
    with pytest.raises(CacheMiss, match="not in cache"):
        reader.load(clip, other)
    # same bytes at another path: same entry (content addressed); touched mtime: still the same content
    moved = tmp_path / "elsewhere" / "renamed clip.mp4"
    moved.parent.mkdir()
    shutil.copyfile(clip, moved)
    assert reader.contains(moved, spec)
    # different content: a different key
    changed = make_synthetic_video(tmp_path / "changed.mp4", 75, 25.0, (160, 120), gop=13)
    assert source_identity(changed) != source_identity(clip)
    assert not reader.contains(changed, spec)


def test_identity_samples_large_files_and_sees_changes(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    data = bytearray(os.urandom(5 << 20))
    big.write_bytes(bytes(data))
    first = source_identity(big)
    data[len(data) // 2 + 10] ^= 0xFF  # a byte inside the hashed middle MiB
    big.write_bytes(bytes(data))
    os.utime(big, ns=(1, 1))
    assert source_identity(big) != first
    assert entry_key(first, SamplingSpec()) != entry_key(first, SamplingSpec(fps=1.0))
    assert entry_key(first, SamplingSpec()) != entry_key(first, ImageSpec())


def test_write_is_atomic_and_validated(tmp_path: Path) -> None:
    final = tmp_path / "videos" / "k" / "ab" / "abc.safetensors"
    with pytest.raises(ValueError, match="uint8"):
        write_entry(final, np.zeros((2, 4, 4, 3), np.float32), {})
    assert not final.exists()
    assert not list(final.parent.glob("*"))
    size = write_entry(final, np.ones((2, 4, 4, 3), np.uint8), {"kind": "video"})
    assert final.stat().st_size == size
    assert temp_path(final).name.startswith(".")
    assert temp_path(final).parent == final.parent


@pytest.mark.parametrize("damage", ["truncate", "garbage", "header", "empty"])
def test_corrupt_entries_are_detected_never_served(tmp_path: Path, clip: Path, spec: SamplingSpec, damage: str) -> None:
    final = build_entry(tmp_path, clip, spec)
    data = final.read_bytes()
    final.write_bytes(
        {
            "truncate": data[: len(data) - 100],
            "garbage": os.urandom(len(data)),
            "header": data[:8] + b"#" + data[9:],
            "empty": b"",
        }[damage]
    )
    with pytest.raises(CorruptEntry):
        read_entry(final)
    with pytest.raises(CacheMiss, match="corrupt"):
        CacheReader(tmp_path).load(clip, spec)


def test_unknown_spec_version_is_refused(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    final = build_entry(tmp_path, clip, spec)
    frames, header = read_entry(final)
    meta = json.loads(header["meta"])
    meta["spec_version"] = 999
    write_entry(final, frames, {**header, "meta": json.dumps(meta)})
    with pytest.raises(ValueError, match="spec_version"):
        CacheReader(tmp_path).load(clip, spec)


def test_images_have_their_own_budget(tmp_path: Path, image_spec: ImageSpec) -> None:
    from evr1_cache.build import build_one

    img = make_synthetic_image(tmp_path / "ümlaut image.png", (300, 200), index=77)
    reader = CacheReader.__new__(CacheReader)
    reader.root = tmp_path
    final = reader.path_for(img, image_spec)
    assert build_one("image", str(img), final.stem, str(final), SamplingSpec(), image_spec, "auto", 0)["status"] == "ok"
    got = CacheReader(tmp_path).load_image(img, image_spec)
    direct = load_image(img, image_spec)
    assert np.array_equal(got, direct)
    assert got.shape[0] % 28 == 0
    assert got.shape[1] % 28 == 0
    assert got.shape[0] * got.shape[1] <= image_spec.max_pixels
    assert read_frame_index(got) == 77
    with pytest.raises(CacheMiss):
        CacheReader(tmp_path).load_image(img, ImageSpec(max_pixels=32 * 28 * 28, min_pixels=4 * 28 * 28))


def test_rgba_image_is_composited_on_white(tmp_path: Path) -> None:
    from PIL import Image

    rgba = np.zeros((56, 56, 4), np.uint8)  # fully transparent black
    Image.fromarray(rgba, "RGBA").save(tmp_path / "t.png")
    out = load_image(tmp_path / "t.png", ImageSpec(min_pixels=4 * 28 * 28, max_pixels=16 * 28 * 28))
    assert out.shape == (56, 56, 3)
    assert int(out.min()) == 255


def test_load_torch_is_zero_copy(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    torch = pytest.importorskip("torch", reason="torch is an optional extra of evr1-cache")
    build_entry(tmp_path, clip, spec)
    reader = CacheReader(tmp_path)
    tensor, meta = reader.load_torch(clip, spec)
    frames, _ = reader.load(clip, spec)
    assert tensor.dtype == torch.uint8
    assert tuple(tensor.shape) == frames.shape
    assert np.array_equal(tensor.numpy(), frames)
    assert meta.frames_indices
    loaded: list[np.ndarray] = []
    original = reader.load

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        loaded.append(out[0])
        return out

    reader.load = spy  # type: ignore[method-assign]
    tensor, _ = reader.load_torch(clip, spec)
    assert np.shares_memory(tensor.numpy(), loaded[0])  # the tensor is a view of the loaded buffer


def test_reader_requires_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="evr1-cache build"):
        CacheReader(tmp_path / "nope")


def test_threaded_resize_equals_serial() -> None:
    from evr1_cache.resize import resize_frames

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (9, 50, 70, 3), dtype=np.uint8)
    serial = resize_frames(frames, 56, 84, threads=1)
    assert serial.shape == (9, 56, 84, 3)
    assert np.array_equal(serial, resize_frames(frames, 56, 84, threads=0))
    assert np.array_equal(serial, resize_frames(frames, 56, 84, threads=3))
    assert resize_frames(frames, 50, 70) is not None
    assert np.array_equal(resize_frames(frames, 50, 70), frames)
