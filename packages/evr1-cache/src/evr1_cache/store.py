"""The on-disk entry: one safetensors file per (source, spec), uint8 `frames [T, H, W, 3]`, metadata in the header.

Why this shape: safetensors is pickle-free and its header carries string metadata, so the `VideoMeta` travels with
the frames; the file size is the raw uint8 frame bytes plus a small header. Entries are content-addressed
(`entry_key`: a hash of the source's identity and the spec key), so changing any sampling setting or the video's
content gives a different file and a stale entry is never served.

The file is written and parsed here, not by the safetensors library: the format is an 8-byte header length, a JSON
header and the raw bytes, and owning both sides means (a) one atomic write of our own (the library writes its own
`.tmpXXXXXX` file beside the target, which a killed build left behind), and (b) a parser that treats every header as
hostile: a bounded length, any JSON failure (deep nesting included), wrong types, negative or overflowing shapes and
inconsistent offsets are each a `CorruptEntry` naming the file, never another exception. Files stay readable by
`safetensors.numpy.load_file` (tested).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_cache.atomic import atomic_open
from evr1_cache.errors import CorruptEntry as CorruptEntry  # re-exported: it lived here before errors.py
from evr1_cache.spec import ImageSpec, SamplingSpec

if TYPE_CHECKING:
    import numpy as np

FORMAT = "evr1-cache/1"
#: Our headers are a few KB (a VideoMeta with 768 frame indices); anything longer is not ours.
MAX_HEADER = 1 << 20
#: `<kind>s/<spec key: 16 hex>/<key[:2]>/<key: 32 hex>.safetensors`
ENTRY_NAME = re.compile(r"^[0-9a-f]{32}\.safetensors$")
_MAX_SIDE = 1 << 31


def kind_of(spec: SamplingSpec | ImageSpec) -> str:
    return "image" if isinstance(spec, ImageSpec) else "video"


def entry_key(identity: str, spec: SamplingSpec | ImageSpec) -> str:
    return key_for(kind_of(spec), identity, spec.key())


def key_for(kind: str, identity: str, spec_key: str) -> str:
    """The entry key (file name) of a source's content under a spec: what `verify` recomputes from a header."""
    return hashlib.blake2b(f"{kind}|{identity}|{spec_key}".encode(), digest_size=16).hexdigest()


def entry_relpath(spec: SamplingSpec | ImageSpec, key: str) -> str:
    """Entries are grouped per spec (easy to delete one setting) and fanned out by key prefix."""
    return f"{kind_of(spec)}s/{spec.key()}/{key[:2]}/{key}.safetensors"


def spec_json(spec: SamplingSpec | ImageSpec) -> str:
    return json.dumps({"type": type(spec).__name__, **spec.to_dict()}, sort_keys=True)


def write_entry(final: Path, frames: np.ndarray, header: dict[str, str]) -> int:
    """Write uint8 `frames` and string `header` to `final` atomically (safetensors layout); returns the file size."""
    import numpy as np

    if frames.dtype != np.uint8 or frames.ndim not in (3, 4) or frames.shape[-1] != 3:
        raise ValueError(f"entries hold uint8 [T, H, W, 3] or [H, W, 3] frames, got {frames.dtype} {frames.shape}")
    if not all(isinstance(v, str) for v in header.values()):
        raise ValueError("entry metadata values must be strings (safetensors __metadata__)")
    data = np.ascontiguousarray(frames)
    head = {
        "__metadata__": {"format": FORMAT, **header},
        "frames": {"dtype": "U8", "shape": list(data.shape), "data_offsets": [0, data.nbytes]},
    }
    text = json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # safetensors aligns the data to 8 bytes with trailing spaces
    with atomic_open(final, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)))
        fh.write(text)
        fh.write(data.data)
    return final.stat().st_size


def remove_entry(path: Path) -> None:
    """Remove whatever lies at an entry's path: a file, a link, or a directory where an entry should be."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _open_entry(path: Path) -> Any:
    try:
        if not path.is_file():
            what = "a directory" if path.is_dir() else "not a regular file"
            raise CorruptEntry(f"{path}: {what} where a cache entry should be")
        return open(path, "rb")
    except OSError as exc:
        raise CorruptEntry(f"{path}: cannot be read ({exc.strerror or exc})") from None


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """(parsed header, byte offset of the data); CorruptEntry for anything but a well-formed evr1-cache header."""
    with _open_entry(path) as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise CorruptEntry(f"{path}: shorter than a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n > MAX_HEADER:
            raise CorruptEntry(f"{path}: header length {n} exceeds {MAX_HEADER} bytes (not an evr1-cache entry)")
        text = fh.read(n)
    if len(text) != n:
        raise CorruptEntry(f"{path}: truncated header ({len(text)} of {n} bytes)")
    try:
        header = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: deeply nested JSON
        raise CorruptEntry(f"{path}: header is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise CorruptEntry(f"{path}: header is a JSON {type(header).__name__}, not an object")
    meta = header.get("__metadata__")
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise CorruptEntry(f"{path}: __metadata__ is not a string-to-string object")
    if meta.get("format") != FORMAT:
        raise CorruptEntry(f"{path}: not an {FORMAT} entry (format {meta.get('format')!r})")
    return header, 8 + n


def frames_layout(header: dict[str, Any], start: int, size: int, path: Path) -> tuple[tuple[int, ...], int]:
    """(shape, absolute data offset) of the `frames` tensor, checked against the file size; CorruptEntry otherwise."""
    extra = sorted(set(header) - {"__metadata__", "frames"})
    if extra:
        raise CorruptEntry(f"{path}: unexpected tensors {extra[:3]} (an entry holds only 'frames')")
    info = header.get("frames")
    if not isinstance(info, dict) or info.get("dtype") != "U8":
        raise CorruptEntry(f"{path}: no uint8 'frames' tensor")
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not isinstance(shape, list) or len(shape) not in (3, 4) or not all(_is_int(d, 1, _MAX_SIDE) for d in shape):
        raise CorruptEntry(f"{path}: frames shape {str(shape)[:60]} is not 3 or 4 sizes in 1..2**31")
    if shape[-1] != 3:
        raise CorruptEntry(f"{path}: frames shape {shape} does not end in 3 channels")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o, 0, size) for o in offsets):
        raise CorruptEntry(f"{path}: data_offsets {str(offsets)[:60]} are not two offsets within the file")
    begin, end = offsets
    nbytes = math.prod(shape)
    if end - begin != nbytes or start + end != size:
        raise CorruptEntry(f"{path}: data is {size - start} bytes, header says {nbytes} (truncated?)")
    return tuple(shape), start + begin


def _is_int(value: object, lo: int, hi: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def read_entry(path: Path, *, mmap: bool = False) -> tuple[np.ndarray, dict[str, str]]:
    """(frames, string metadata) of an entry, fully validated against the file size.

    The default reads the frames into a fresh array with one `readinto` (the fastest materialised load); `mmap=True`
    maps the file read-only instead (lazy, shares the page cache).
    """
    import numpy as np

    header, start = read_header(path)
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise CorruptEntry(f"{path}: cannot be read ({exc.strerror or exc})") from None
    shape, offset = frames_layout(header, start, size, path)
    nbytes = math.prod(shape)
    frames: np.ndarray
    if mmap:
        frames = np.memmap(path, dtype=np.uint8, mode="r", offset=offset, shape=shape)
    else:
        frames = np.empty(shape, np.uint8)
        with _open_entry(path) as fh:
            fh.seek(offset)
            got = fh.readinto(frames.data.cast("B")) if nbytes else 0
        if got != nbytes:
            raise CorruptEntry(f"{path}: read {got} of {nbytes} frame bytes")
    return frames, dict(header["__metadata__"])
