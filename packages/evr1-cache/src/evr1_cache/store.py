"""The on-disk entry: one safetensors file per (source, spec), uint8 `frames [T, H, W, 3]`, metadata in the header.

Why this shape: safetensors is pickle-free and its header carries string metadata, so the `VideoMeta` travels with
the frames; the file size is the raw uint8 frame bytes plus a small header. Entries are content-addressed
(`entry_key`: a hash of the source's identity and the spec key), so changing any sampling setting or the video's
content gives a different file and a stale entry is never served. Writes go to a temp file in the same folder that is
renamed into place, so a killed build never leaves a half-file at a final path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import struct
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_cache.spec import ImageSpec, SamplingSpec, VideoMeta

if TYPE_CHECKING:
    import numpy as np

FORMAT = "evr1-cache/1"
#: bytes hashed at the start, middle and end of a source file for its identity
IDENTITY_CHUNK = 1 << 20
_MAX_HEADER = 100 << 20
_identity_memo: dict[tuple[str, int, int, int], str] = {}


class CorruptEntry(Exception):
    """An entry file that is not a complete, well-formed evr1-cache entry."""


def source_identity(path: str | os.PathLike[str]) -> str:
    """Content identity of a media file: its size and a BLAKE2b of its first, middle and last MiB.

    Content rather than path, so a cache survives moving the dataset; sampled rather than a full hash, so a look-up
    costs a few reads even for a multi-GB video. Memoised on (path, size, mtime, inode).
    """
    p = os.fspath(path)
    st = os.stat(p)
    memo_key = (os.path.abspath(p), st.st_size, st.st_mtime_ns, st.st_ino)
    cached = _identity_memo.get(memo_key)
    if cached is not None:
        return cached
    h = hashlib.blake2b(digest_size=16)
    h.update(struct.pack("<Q", st.st_size))
    with open(p, "rb") as fh:
        if st.st_size <= 3 * IDENTITY_CHUNK:
            h.update(fh.read())
        else:
            for offset in (0, st.st_size // 2, st.st_size - IDENTITY_CHUNK):
                fh.seek(offset)
                h.update(fh.read(IDENTITY_CHUNK))
    ident = f"{st.st_size}-{h.hexdigest()}"
    _identity_memo[memo_key] = ident
    return ident


def spec_key(spec: SamplingSpec | ImageSpec) -> str:
    """The spec's own `key()`; a canonical-JSON hash for a spec class without one."""
    key = getattr(spec, "key", None)
    if callable(key):
        return str(key())
    canon = json.dumps({"type": type(spec).__name__, **dataclasses.asdict(spec)}, sort_keys=True)
    return hashlib.blake2b(canon.encode(), digest_size=8).hexdigest()


def entry_key(identity: str, spec: SamplingSpec | ImageSpec) -> str:
    kind = "image" if isinstance(spec, ImageSpec) else "video"
    return hashlib.blake2b(f"{kind}|{identity}|{spec_key(spec)}".encode(), digest_size=16).hexdigest()


def entry_relpath(spec: SamplingSpec | ImageSpec, key: str) -> str:
    """Entries are grouped per spec (easy to delete one setting) and fanned out by key prefix."""
    kind = "images" if isinstance(spec, ImageSpec) else "videos"
    return f"{kind}/{spec_key(spec)}/{key[:2]}/{key}.safetensors"


def spec_json(spec: SamplingSpec | ImageSpec) -> str:
    return json.dumps({"type": type(spec).__name__, **dataclasses.asdict(spec)}, sort_keys=True)


def meta_to_json(meta: VideoMeta) -> str:
    return meta.to_json()


def meta_from_json(text: str) -> VideoMeta:
    """Parse and validate (an unknown spec version or field is a ValueError)."""
    return VideoMeta.from_json(text)


def temp_path(final: Path) -> Path:
    """A temp name beside `final`, unique per host, process and thread, recognisable by `is_temp`."""
    return final.with_name(f".{final.stem}.{socket.gethostname()}.{os.getpid()}.{threading.get_ident()}.tmp")


def is_temp(path: Path) -> bool:
    return path.name.startswith(".") and path.name.endswith(".tmp")


def write_entry(final: Path, frames: np.ndarray, header: dict[str, str]) -> int:
    """Write uint8 `frames` and string `header` to `final` atomically; returns the file size."""
    import numpy as np
    from safetensors.numpy import save_file

    if frames.dtype != np.uint8 or frames.ndim not in (3, 4) or frames.shape[-1] != 3:
        raise ValueError(f"entries hold uint8 [T, H, W, 3] or [H, W, 3] frames, got {frames.dtype} {frames.shape}")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(final)
    try:
        save_file({"frames": np.ascontiguousarray(frames)}, str(tmp), metadata={"format": FORMAT, **header})
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()
    return final.stat().st_size


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """(parsed safetensors header, byte offset of the data); raises CorruptEntry on anything malformed."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) != 8:
                raise CorruptEntry(f"{path}: shorter than a safetensors header")
            (n,) = struct.unpack("<Q", raw)
            if n > _MAX_HEADER:
                raise CorruptEntry(f"{path}: header length {n} is implausible")
            text = fh.read(n)
    except OSError as exc:
        raise CorruptEntry(f"{path}: cannot be read ({exc})") from exc
    if len(text) != n:
        raise CorruptEntry(f"{path}: truncated header")
    try:
        header = json.loads(text)
    except ValueError as exc:
        raise CorruptEntry(f"{path}: header is not JSON ({exc})") from exc
    if not isinstance(header, dict) or header.get("__metadata__", {}).get("format") != FORMAT:
        raise CorruptEntry(f"{path}: not an {FORMAT} entry")
    return header, 8 + n


def read_entry(path: Path, *, mmap: bool = False) -> tuple[np.ndarray, dict[str, str]]:
    """(frames, string metadata) of an entry, fully validated against the file size.

    The default reads the frames into a fresh array with one `readinto` (the fastest materialised load); `mmap=True`
    maps the file read-only instead (lazy, shares the page cache).
    """
    import numpy as np

    header, start = read_header(path)
    info = header.get("frames")
    if not isinstance(info, dict) or info.get("dtype") != "U8":
        raise CorruptEntry(f"{path}: no uint8 'frames' tensor")
    shape = tuple(int(d) for d in info["shape"])
    begin, end = (int(x) for x in info["data_offsets"])
    nbytes = int(np.prod(shape)) if shape else 1
    size = os.path.getsize(path)
    if end - begin != nbytes or start + end != size:
        raise CorruptEntry(f"{path}: data is {size - start} bytes, header says {nbytes} (truncated?)")
    frames: np.ndarray
    if mmap:
        frames = np.memmap(path, dtype=np.uint8, mode="r", offset=start + begin, shape=shape)
    else:
        frames = np.empty(shape, np.uint8)
        with open(path, "rb") as fh:
            fh.seek(start + begin)
            got = fh.readinto(frames.data.cast("B"))
        if got != nbytes:
            raise CorruptEntry(f"{path}: read {got} of {nbytes} frame bytes")
    return frames, dict(header["__metadata__"])
