"""`verify`: every entry of a cache directory is readable, well-formed and self-consistent.

Checks per entry: safetensors header and data length, uint8 `[T, H, W, 3]`, known format, the VideoMeta parses (which
refuses an unknown spec version), frame count == len(frames_indices), frame size == (resized_height, resized_width),
the file lives at the path its key and spec imply. Leftover temp files (from a killed build) are listed too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evr1_cache.store import CorruptEntry, is_temp, meta_from_json, read_entry


@dataclass(frozen=True, slots=True)
class VerifyReport:
    entries: int
    videos: int
    images: int
    bytes: int
    corrupt: tuple[tuple[str, str], ...]  #: (relative path, reason)
    temp_files: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.corrupt and not self.temp_files


def iter_entries(root: Path) -> Iterator[Path]:
    for kind in ("videos", "images"):
        base = root / kind
        if base.is_dir():
            for dirpath, _dirs, files in os.walk(base):
                for name in sorted(files):
                    yield Path(dirpath, name)


def check_entry(path: Path, root: Path) -> tuple[str, int]:
    """(kind, bytes) of a good entry; raises CorruptEntry naming what is wrong."""
    frames, header = read_entry(path, mmap=True)
    kind = header.get("kind")
    rel = path.relative_to(root).as_posix()
    parts = rel.split("/")
    if len(parts) != 4 or parts[0] != f"{kind}s" or parts[1] != header.get("spec_key") or parts[3] != path.name:
        raise CorruptEntry(f"{rel}: path does not match its kind/spec key ({kind}, {header.get('spec_key')})")
    if kind == "video":
        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise CorruptEntry(f"{rel}: video frames have shape {frames.shape}, expected [T, H, W, 3]")
        try:
            meta = meta_from_json(header["meta"])
        except (KeyError, ValueError, TypeError) as exc:
            raise CorruptEntry(f"{rel}: VideoMeta unreadable ({type(exc).__name__}: {exc})") from exc
        if len(meta.frames_indices) != frames.shape[0]:
            raise CorruptEntry(f"{rel}: {frames.shape[0]} frames but {len(meta.frames_indices)} frames_indices")
        if (meta.resized_height, meta.resized_width) != tuple(frames.shape[1:3]):
            raise CorruptEntry(
                f"{rel}: frames are {frames.shape[1:3]}, meta says {meta.resized_height}x{meta.resized_width}"
            )
        if any(not 0 <= i < meta.total_num_frames for i in meta.frames_indices):
            raise CorruptEntry(f"{rel}: frames_indices outside 0..{meta.total_num_frames - 1}")
    elif kind == "image":
        if frames.ndim != 3 or frames.shape[-1] != 3:
            raise CorruptEntry(f"{rel}: image has shape {frames.shape}, expected [H, W, 3]")
        try:
            dims = json.loads(header["meta"])
        except (KeyError, ValueError) as exc:
            raise CorruptEntry(f"{rel}: image metadata unreadable") from exc
        if (dims.get("height"), dims.get("width")) != tuple(frames.shape[:2]):
            raise CorruptEntry(f"{rel}: image is {frames.shape[:2]}, metadata says {dims}")
    else:
        raise CorruptEntry(f"{rel}: unknown entry kind {kind!r}")
    return kind, path.stat().st_size


def verify_cache(root: str | os.PathLike[str], *, delete: bool = False) -> VerifyReport:
    """Check every entry under `root`; `delete=True` removes corrupt entries and leftover temp files."""
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"cache directory {base} does not exist")
    counts = {"video": 0, "image": 0}
    total = 0
    corrupt: list[tuple[str, str]] = []
    temps: list[str] = []
    for path in iter_entries(base):
        rel = path.relative_to(base).as_posix()
        if is_temp(path):
            temps.append(rel)
            if delete:
                path.unlink(missing_ok=True)
            continue
        try:
            kind, size = check_entry(path, base)
        except CorruptEntry as exc:
            corrupt.append((rel, str(exc)))
            if delete:
                path.unlink(missing_ok=True)
            continue
        counts[kind] += 1
        total += size
    return VerifyReport(
        entries=counts["video"] + counts["image"],
        videos=counts["video"],
        images=counts["image"],
        bytes=total,
        corrupt=tuple(corrupt),
        temp_files=() if delete else tuple(temps),
    )
