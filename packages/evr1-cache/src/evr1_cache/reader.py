"""Serve cached frames to training and evaluation: `CacheReader(dir).entry(path, spec) -> CacheEntry`.

Every entry is validated inside the reader (header, sizes, uint8 `[T, H, W, 3]`, shape == metadata, kind and spec
key == the spec asked for, and with a source path the source's content identity), so a stale, foreign or damaged entry
is a `CacheMiss` (`CorruptEntry` for a damaged one), never data. `ensure` writes through: it builds a missing entry
exactly as `evr1-cache build` would and returns it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_cache.entry import CacheEntry, ImageMeta, Source
from evr1_cache.errors import CacheMiss, CorruptEntry, MediaError
from evr1_cache.sources import source_identity
from evr1_cache.spec import ImageSpec, SamplingSpec, VideoMeta
from evr1_cache.store import entry_key, entry_relpath, kind_of, read_entry, read_header

if TYPE_CHECKING:
    import numpy as np
    import torch

#: A reference written into the output dataset by `evr1-cache build` (`video_cache[i]`), or its `file` field alone.
Ref = Mapping[str, Any] | str

__all__ = ["CacheMiss", "CacheReader", "CorruptEntry", "Ref"]


class CacheReader:
    """Look entries up by the media file and the spec they were built with, or by a dataset reference.

    Thread-safe; keeps no open files. `ensure` is the only method that writes.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"cache directory {self.root} does not exist; build it with `evr1-cache build`")

    # -- locating -------------------------------------------------------------------------------------------------
    def path_for(self, media_path: str | os.PathLike[str], spec: SamplingSpec | ImageSpec) -> Path:
        """Where the entry for `media_path` under `spec` lives (whether or not it exists); MediaError when the source
        cannot be read (its identity names the entry)."""
        return self.root / entry_relpath(spec, entry_key(source_identity(media_path), spec))

    def contains(self, media_path: str | os.PathLike[str], spec: SamplingSpec | ImageSpec) -> bool:
        """Whether an entry file exists for `media_path` under `spec` (not whether it is intact: `entry` checks)."""
        try:
            return self.path_for(media_path, spec).is_file()
        except MediaError:
            return False

    def contains_ref(self, ref: Ref, spec: SamplingSpec | ImageSpec) -> bool:
        """Whether `ref` names an entry here built for `spec` (reads the header only)."""
        try:
            header, _ = read_header(self.ref_path(ref))
        except CacheMiss:
            return False
        meta = header["__metadata__"]
        return bool(meta.get("kind") == kind_of(spec) and meta.get("spec_key") == spec.key())

    # -- reading --------------------------------------------------------------------------------------------------
    def entry(
        self, media_path: str | os.PathLike[str], spec: SamplingSpec | ImageSpec, *, mmap: bool = False
    ) -> CacheEntry:
        """The validated entry of `media_path` under `spec`; CacheMiss if it was not built (or is damaged)."""
        try:
            path = self.path_for(media_path, spec)
        except MediaError as exc:
            raise CacheMiss(f"{media_path}: its cache entry cannot be located ({exc.reason})") from exc
        if not path.is_file():
            raise CacheMiss(
                f"{media_path}: not in cache {self.root} for spec {spec.key()}; "
                "build it with `evr1-cache build` or decode on the fly with `evr1_cache.decode_video`"
            )
        return self._checked(path, spec, mmap=mmap)

    def entry_at(
        self,
        ref: Ref,
        spec: SamplingSpec | ImageSpec,
        *,
        source: str | os.PathLike[str] | None = None,
        mmap: bool = False,
    ) -> CacheEntry:
        """The validated entry a dataset reference points at, served only if it was built for `spec`, and, when
        `source` is given and exists, from the same content (a source changed since the build is a CacheMiss;
        without the source, e.g. a cache shipped alone, the reference is trusted)."""
        entry = self._checked(self.ref_path(ref), spec, mmap=mmap)
        if source is not None and os.path.exists(source):
            try:
                identity = source_identity(source)
            except MediaError as exc:
                raise CacheMiss(f"{source}: cannot check the entry's source ({exc.reason})") from exc
            if identity != entry.source.identity:
                raise CacheMiss(
                    f"cache entry {entry.file.name} was built from another version of {source} (the file changed "
                    "after `evr1-cache build`); re-run the build to refresh it"
                )
        return entry

    def ensure(
        self, source: str | os.PathLike[str], spec: SamplingSpec | ImageSpec, *, decoder: str = "auto", threads: int = 0
    ) -> CacheEntry:
        """Write-through: the entry of `source` under `spec`, built now (as `evr1-cache build` would) if it is missing
        or damaged. Raises MediaError for media that cannot be cached."""
        from evr1_cache.writer import make_entry

        try:
            return self.entry(source, spec)
        except CacheMiss:
            pass  # missing, or damaged: built below (atomically replacing a damaged file)
        final = self.path_for(source, spec)  # MediaError for a source that is not a readable regular file
        make_entry(source, spec, final, decoder=decoder, threads=threads)
        return self._checked(final, spec)

    # -- conveniences -----------------------------------------------------------------------------------------------
    def load(
        self, video_path: str | os.PathLike[str], spec: SamplingSpec, *, mmap: bool = False
    ) -> tuple[np.ndarray, VideoMeta]:
        """`(entry.frames, entry.meta)` of `entry(video_path, spec)`: uint8 `[T, H, W, 3]` and the VideoMeta."""
        entry = self.entry(video_path, spec, mmap=mmap)
        return entry.frames, entry.video_meta

    def load_image(self, image_path: str | os.PathLike[str], image_spec: ImageSpec) -> np.ndarray:
        """uint8 `[H, W, 3]` of `entry(image_path, image_spec)`."""
        return self.entry(image_path, image_spec).frames

    def load_torch(self, video_path: str | os.PathLike[str], spec: SamplingSpec) -> tuple[torch.Tensor, VideoMeta]:
        """Like `load`, as a torch uint8 `[T, H, W, 3]` tensor sharing the loaded buffer (no copy). Needs torch."""
        entry = self.entry(video_path, spec)
        return entry.torch(), entry.video_meta

    # -- internals --------------------------------------------------------------------------------------------------
    def ref_path(self, ref: Ref) -> Path:
        """The entry file a dataset reference names, confined to the cache; CacheMiss for anything else."""
        given: object = ref  # a dataset value: any JSON may be there
        rel = given if isinstance(given, str) else given.get("file") if isinstance(given, Mapping) else None
        if not isinstance(rel, str) or not rel or "\0" in rel:
            raise CacheMiss(f"not a cache reference: {str(ref)[:80]!r} (expected {{'file': ...}} or a relative path)")
        path = (self.root / rel).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise CacheMiss(f"cache reference {rel!r} points outside the cache {self.root}")
        if not path.is_file():
            raise CacheMiss(f"cache entry {rel} not found under {self.root}")
        return path

    def _checked(self, path: Path, spec: SamplingSpec | ImageSpec, *, mmap: bool = False) -> CacheEntry:
        entry = read_checked(path, mmap=mmap)
        if entry.kind != kind_of(spec) or entry.spec_key != spec.key():
            raise CacheMiss(
                f"cache entry {path.name} was built for spec {entry.spec_key} ({entry.kind}), not for the requested "
                f"{kind_of(spec)} spec {spec.key()} (the sampling settings differ from the `evr1-cache build` ones)"
            )
        return entry


def read_checked(path: Path, *, mmap: bool = False) -> CacheEntry:
    """The `CacheEntry` stored at `path`, validated (CorruptEntry naming the file and the defect otherwise)."""
    frames, md = read_entry(path, mmap=mmap)
    kind = md.get("kind")
    if kind not in ("video", "image"):
        raise CorruptEntry(f"{path}: unknown entry kind {kind!r}")
    missing = [k for k in ("meta", "spec_key", "source") if k not in md]
    if missing:
        raise CorruptEntry(f"{path}: header lacks {', '.join(missing)}")
    try:
        meta: VideoMeta | ImageMeta = (
            VideoMeta.from_json(md["meta"]) if kind == "video" else ImageMeta.from_json(md["meta"])
        )
        return CacheEntry(frames, meta, md["spec_key"], Source.from_json(md["source"]), path)
    except (ValueError, TypeError) as exc:
        raise CorruptEntry(f"{path}: {exc}") from None
