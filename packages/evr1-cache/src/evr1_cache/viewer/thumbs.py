"""Thumbnails of exactly the cached frames a model saw: downscaled once per cache entry, reused by every page.

Layout: `<site>/thumbs/<entry key>/<position>.jpg`, plus `index.json` (frame indices, timestamps, size) written last,
so a folder with an index is complete; an interrupted run redoes only the entries without one. The entry key is the
cache file's content-addressed name (source identity + spec), so two runs that saw the same frames share thumbnails
and a rebuilt cache entry never reuses stale ones.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evr1_cache.atomic import atomic_json, atomic_open
from evr1_cache.spec import VideoMeta
from evr1_cache.store import CorruptEntry, read_entry, read_header
from evr1_cache.viewer.records import MediaRef

#: Longest side of a thumbnail in pixels (shown at about half that: sharp on high-density screens).
THUMB_MAX_SIDE = 160
JPEG_QUALITY = 82


@dataclass(frozen=True, slots=True)
class Strip:
    """The frames of one media item as the page shows them: thumbnail paths (relative to the site) + timestamps."""

    kind: str
    source: str
    #: One per frame the model saw; None where no thumbnail exists (entry missing or unreadable).
    images: tuple[str | None, ...]
    timestamps: tuple[float | None, ...]
    frame_indices: tuple[int, ...]
    note: str | None = None


def entry_frames(path: str | os.PathLike[str]) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """(frame indices, timestamps in seconds) of a video cache entry, read from its header only (no pixels).

    What a rollout dump records for each video; raises ValueError for a file that is not a valid video entry.
    """
    try:
        header, _ = read_header(Path(path))
        meta = VideoMeta.from_json(header["__metadata__"]["meta"])
    except (CorruptEntry, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a readable video cache entry ({exc})") from exc
    return tuple(meta.frames_indices), tuple(round(t, 4) for t in meta.timestamps)


class ThumbnailWriter:
    """Writes (or reuses) the thumbnails of cache entries under `site_dir/thumbs`; thread-safe."""

    def __init__(self, site_dir: str | os.PathLike[str], *, max_side: int = THUMB_MAX_SIDE) -> None:
        self.site_dir = Path(site_dir)
        self.root = self.site_dir / "thumbs"
        self.max_side = max_side
        self.written = 0
        self.reused = 0
        self._lock = threading.Lock()
        self._done: dict[str, dict[str, object] | str] = {}
        self._entry_locks: dict[str, threading.Lock] = {}

    def strip(self, ref: MediaRef) -> Strip:
        """The strip of one media reference; never raises (a problem becomes the strip's note)."""
        n = len(ref.positions) or len(ref.frame_indices) or (1 if ref.kind == "image" else 0)
        empty = Strip(ref.kind, ref.source, (None,) * n, tuple(ref.timestamps) or (None,) * n, ref.frame_indices)
        if not ref.cache_root or not ref.cache_file:
            return replace(empty, note=ref.note or "not in the frame cache: no thumbnails (timestamps as recorded)")
        root = Path(ref.cache_root).resolve()
        entry = (root / ref.cache_file).resolve()
        if root not in entry.parents or entry.suffix != ".safetensors":  # a record is data, not a path to follow
            return replace(empty, note=f"cache reference {ref.cache_file!r} is not an entry inside {root}: ignored")
        key = entry.name.removesuffix(".safetensors")
        info = self._entry(entry, key)
        if isinstance(info, str):
            return replace(empty, note=info)
        stored = tuple(int(i) for i in _list(info.get("frame_indices")))
        stamps: tuple[float | None, ...] = tuple(float(t) for t in _list(info.get("timestamps")))
        count = int(str(info.get("count", 0)))
        note = ref.note
        if ref.frame_indices and stored and tuple(ref.frame_indices) != stored:
            note = (
                f"the cache entry now holds frames {_short(stored)}, the run recorded {_short(ref.frame_indices)}: "
                "it was rebuilt with other settings after the run; thumbnails are of the current entry"
            )
        images = tuple(f"thumbs/{key}/{i:05d}.jpg" for i in range(count))
        if ref.positions:  # a tool's frames: those positions of the stream's entry, with the times the tool gave
            shown = [p for p in ref.positions if 0 <= p < count]
            if len(shown) != len(ref.positions):
                return replace(empty, note=f"the entry holds {count} frames; the recorded positions do not fit it")
            picked = tuple(stored[p] for p in shown) if stored else ()
            return Strip(ref.kind, ref.source, tuple(images[p] for p in shown), tuple(ref.timestamps), picked, note)
        return Strip(ref.kind, ref.source, images, stamps or (None,) * count, stored or ref.frame_indices, note)

    def _entry(self, entry: Path, key: str) -> dict[str, object] | str:
        with self._lock:
            lock = self._entry_locks.setdefault(key, threading.Lock())
        with lock:  # one writer per entry; other threads wait for it, then reuse its result
            if key not in self._done:
                self._done[key] = self._write(entry, key)
            return self._done[key]

    def _write(self, entry: Path, key: str) -> dict[str, object] | str:
        folder = self.root / key
        index = folder / "index.json"
        if index.is_file():
            try:
                info: dict[str, object] = json.loads(index.read_text(encoding="utf-8"))
                if info.get("max_side") == self.max_side:
                    with self._lock:
                        self.reused += 1
                    return info
            except (OSError, ValueError):
                pass  # unreadable index: write the thumbnails again
        if not entry.is_file():
            return f"cache entry {entry.name} not found under {entry.parent.parent.parent.parent}: no thumbnails"
        from PIL import Image

        try:
            frames, header = read_entry(entry, mmap=True)
        except CorruptEntry as exc:
            return f"cache entry unreadable ({exc}); run `evr1-cache verify --delete`"
        indices: list[int] = []
        stamps: list[float] = []
        if header.get("kind") == "video" and header.get("meta"):
            try:
                meta = VideoMeta.from_json(header["meta"])
                indices, stamps = list(meta.frames_indices), [round(t, 3) for t in meta.timestamps]
            except ValueError as exc:
                return f"cache entry metadata invalid ({exc})"
        stack = frames if frames.ndim == 4 else frames[None]
        folder.mkdir(parents=True, exist_ok=True)
        for i, frame in enumerate(stack):
            img = Image.fromarray(frame)
            img.thumbnail((self.max_side, self.max_side), Image.Resampling.LANCZOS)
            with atomic_open(folder / f"{i:05d}.jpg", "wb", fsync=False) as fh:
                img.save(fh, "JPEG", quality=JPEG_QUALITY)
        info = {
            "count": len(stack),
            "frame_indices": indices,
            "timestamps": stamps,
            "max_side": self.max_side,
            "entry": entry.name,
        }
        atomic_json(index, info, indent=None)
        with self._lock:
            self.written += 1
        return info


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _short(values: Sequence[int]) -> str:
    vals = list(values)
    return str(vals) if len(vals) <= 6 else f"[{', '.join(map(str, vals[:3]))}, ..., {vals[-1]}] ({len(vals)})"
