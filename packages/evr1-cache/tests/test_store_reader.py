"""Store and reader: content addressing, atomic writes, the validated `CacheEntry`, write-through `ensure`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from evr1_cache import CacheEntry, CacheMiss, CacheReader, CorruptEntry, ImageMeta, Source, decode_video, load_image
from evr1_cache.atomic import temp_path
from evr1_cache.sources import source_identity
from evr1_cache.spec import ImageSpec, SamplingSpec, VideoMeta
from evr1_cache.store import entry_key, read_entry, write_entry
from evr1_cache.testing import make_synthetic_image, make_synthetic_video, read_frame_index


def test_ensure_writes_through_and_entry_returns_exactly_what_decode_gives(
    tmp_path: Path, clip: Path, spec: SamplingSpec
) -> None:
    reader = CacheReader(tmp_path)
    assert not reader.contains(clip, spec)
    built = reader.ensure(clip, spec)
    assert reader.contains(clip, spec)
    entry = reader.entry(clip, spec)
    ref, ref_meta = decode_video(clip, spec)
    assert isinstance(entry, CacheEntry)
    assert entry.kind == "video"
    assert isinstance(entry.meta, VideoMeta)
    assert entry.meta == ref_meta == built.meta
    assert entry.spec_key == spec.key()
    assert entry.source == Source(str(clip), source_identity(clip))
    assert entry.frames.dtype == np.uint8
    assert entry.frames.flags.writeable
    assert np.array_equal(entry.frames, ref)
    assert [read_frame_index(f) for f in entry.frames] == list(entry.meta.frames_indices)
    assert entry.to_hf()["frames_indices"] == list(ref_meta.frames_indices)
    # the file is the raw uint8 bytes plus a small header: no float32, no pickle
    assert entry.frames.nbytes < entry.file.stat().st_size < entry.frames.nbytes + 4096
    lazy = reader.entry(clip, spec, mmap=True)
    assert np.array_equal(lazy.frames, entry.frames)
    assert not lazy.frames.flags.writeable
    assert not [p for p in entry.file.parent.iterdir() if p.name.startswith(".")]
    frames, meta = reader.load(clip, spec)  # the tuple shortcut
    assert np.array_equal(frames, ref)
    assert meta == ref_meta


def test_ensure_serves_an_existing_entry_and_rebuilds_a_damaged_one(
    tmp_path: Path, clip: Path, spec: SamplingSpec
) -> None:
    reader = CacheReader(tmp_path)
    first = reader.ensure(clip, spec)
    mtime = first.file.stat().st_mtime_ns
    assert reader.ensure(clip, spec).file.stat().st_mtime_ns == mtime  # not rebuilt
    first.file.write_bytes(os.urandom(first.file.stat().st_size))
    with pytest.raises(CorruptEntry):
        reader.entry(clip, spec)
    again = reader.ensure(clip, spec)
    assert np.array_equal(again.frames, first.frames)


def test_entries_are_readable_by_the_real_safetensors_library(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    from safetensors import safe_open
    from safetensors.numpy import load_file

    entry = CacheReader(tmp_path).ensure(clip, spec)
    loaded = load_file(str(entry.file))
    assert list(loaded) == ["frames"]
    assert np.array_equal(loaded["frames"], entry.frames)
    with safe_open(str(entry.file), "np") as fh:
        meta = fh.metadata()
    assert VideoMeta.from_json(meta["meta"]) == entry.meta
    assert meta["kind"] == "video"
    assert meta["spec_key"] == spec.key()


def test_a_different_spec_or_content_never_hits(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    reader = CacheReader(tmp_path)
    reader.ensure(clip, spec)
    other = SamplingSpec(fps=1.0, max_frames=16, min_pixels=spec.min_pixels, max_pixels=spec.max_pixels)
    assert not reader.contains(clip, other)
    with pytest.raises(CacheMiss, match="not in cache"):
        reader.entry(clip, other)
    # same bytes at another path: same entry (content addressed); touched mtime: still the same content
    moved = tmp_path / "elsewhere" / "renamed clip.mp4"
    moved.parent.mkdir()
    shutil.copyfile(clip, moved)
    assert reader.contains(moved, spec)
    # different content: a different key
    changed = make_synthetic_video(tmp_path / "changed.mp4", 75, 25.0, (160, 120), gop=13)
    assert source_identity(changed) != source_identity(clip)
    assert not reader.contains(changed, spec)


def test_entry_at_checks_spec_kind_and_source(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    reader = CacheReader(tmp_path)
    entry = reader.ensure(clip, spec)
    rel = entry.file.relative_to(tmp_path).as_posix()
    for ref in (rel, {"file": rel, "key": "ignored"}):
        assert np.array_equal(reader.entry_at(ref, spec, source=clip).frames, entry.frames)
        assert reader.contains_ref(ref, spec)
    other = SamplingSpec(fps=1.0, max_frames=16, min_pixels=spec.min_pixels, max_pixels=spec.max_pixels)
    assert not reader.contains_ref(rel, other)
    with pytest.raises(CacheMiss, match=r"built for spec \w+ \(video\)"):
        reader.entry_at(rel, other)
    with pytest.raises(CacheMiss, match="image spec"):
        reader.entry_at(rel, ImageSpec())
    # the source changed after the build: refused; without the source (a cache shipped alone) the ref is trusted
    changed = tmp_path / "changed.mp4"
    make_synthetic_video(changed, 75, 25.0, (160, 120), gop=5)
    with pytest.raises(CacheMiss, match="another version"):
        reader.entry_at(rel, spec, source=changed)
    assert reader.entry_at(rel, spec, source=tmp_path / "gone.mp4").spec_key == spec.key()
    for bad in ("../outside.safetensors", {"file": None}, "nope/x.safetensors", "a\0b"):
        with pytest.raises(CacheMiss):
            reader.entry_at(bad, spec)  # type: ignore[arg-type]


def test_cache_entry_refuses_wrong_rank_dtype_and_shape(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    good = CacheReader(tmp_path).ensure(clip, spec)
    meta, src, key = good.meta, good.source, good.spec_key
    bad_cases = {
        "uint8 array": (good.frames.astype(np.float32), meta, key),
        "shape": (np.zeros((8,), np.uint8), meta, key),
        "metadata says": (good.frames[:-1], meta, key),
        "16 hex": (good.frames, meta, "nothex"),
        "VideoMeta.spec_key": (good.frames, meta, "0" * 16),
    }
    for match, (frames, m, k) in bad_cases.items():
        with pytest.raises(ValueError, match=match):
            CacheEntry(frames, m, k, src, good.file)
    with pytest.raises(ValueError, match="metadata says"):
        CacheEntry(np.zeros((4, 5, 3), np.uint8), ImageMeta(4, 6), key, src, good.file)
    with pytest.raises(TypeError, match="image"):
        CacheEntry(np.zeros((4, 6, 3), np.uint8), ImageMeta(4, 6), key, src, good.file).video_meta


def test_the_reader_refuses_a_vector_stored_as_a_video(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    """A well-formed safetensors file whose tensor is `(8,)`: refused by the reader, never served as frames."""
    from safetensors.numpy import save_file

    entry = CacheReader(tmp_path).ensure(clip, spec)
    _, header = read_entry(entry.file)
    save_file({"frames": np.zeros((8,), np.uint8)}, str(entry.file), metadata=header)
    with pytest.raises(CorruptEntry, match="frames shape"):
        CacheReader(tmp_path).entry(clip, spec)
    frames = np.zeros((2, 4, 4, 3), np.uint8)
    write_entry(entry.file, frames, header)  # a well-formed entry whose frames disagree with its VideoMeta
    with pytest.raises(CorruptEntry, match="metadata says"):
        CacheReader(tmp_path).entry(clip, spec)


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
    size = write_entry(final, np.ones((2, 4, 4, 3), np.uint8), {"kind": "video"})
    assert final.stat().st_size == size
    assert list(final.parent.iterdir()) == [final]  # no temp file left
    assert temp_path(final).name.startswith(".")
    assert temp_path(final).parent == final.parent


@pytest.mark.parametrize("damage", ["truncate", "garbage", "header", "empty"])
def test_corrupt_entries_are_detected_never_served(tmp_path: Path, clip: Path, spec: SamplingSpec, damage: str) -> None:
    final = CacheReader(tmp_path).ensure(clip, spec).file
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
    with pytest.raises(CacheMiss):
        CacheReader(tmp_path).entry(clip, spec)


def test_unknown_spec_version_is_refused(tmp_path: Path, clip: Path, spec: SamplingSpec) -> None:
    final = CacheReader(tmp_path).ensure(clip, spec).file
    frames, header = read_entry(final)
    meta = json.loads(header["meta"])
    meta["spec_version"] = 999
    write_entry(final, frames, {**header, "meta": json.dumps(meta)})
    with pytest.raises(CorruptEntry, match="spec_version"):
        CacheReader(tmp_path).entry(clip, spec)


def test_images_have_their_own_budget(tmp_path: Path, image_spec: ImageSpec) -> None:
    img = make_synthetic_image(tmp_path / "ümlaut image.png", (300, 200), index=77)
    entry = CacheReader(tmp_path).ensure(img, image_spec)
    assert entry.kind == "image"
    assert entry.meta == ImageMeta(*entry.frames.shape[:2])
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
    reader = CacheReader(tmp_path)
    entry = reader.ensure(clip, spec)
    tensor, meta = reader.load_torch(clip, spec)
    assert tensor.dtype == torch.uint8
    assert tuple(tensor.shape) == entry.frames.shape
    assert np.array_equal(tensor.numpy(), entry.frames)
    assert meta == entry.meta
    assert np.shares_memory(entry.torch().numpy(), entry.frames)  # a view of the entry's buffer


def test_reader_requires_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="evr1-cache build"):
        CacheReader(tmp_path / "nope")
