"""Media sources: only regular files are read as media, every read is bounded, and each source has a content identity.

Why this much care: dataset rows are untrusted input. A row naming `/dev/zero` (or a symlink to it) made an unbounded
read until `MemoryError`, a named pipe blocked the build forever, and a NUL byte in a path aborted every row. Here
every such path becomes one `MediaError` row (what the path is, and the fix), and nothing is read from anything but
a regular file, opened without blocking, re-checked on the open descriptor, and read no further than its size.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import threading
from pathlib import Path

from evr1_cache.errors import MediaError

#: bytes hashed at the start, middle and end of a source file for its identity
IDENTITY_CHUNK = 1 << 20
_identity_memo: dict[tuple[str, int, int, int], str] = {}
_memo_lock = threading.Lock()


def _describe(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory, not a media file"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO), not a media file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a media file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a media file"
    return "not a regular file"


def _open_regular(path: str) -> tuple[int, os.stat_result]:
    """An O_RDONLY descriptor of the regular file `path` (never blocks on a FIFO) and its stat; MediaError otherwise."""
    if "\0" in path:
        raise MediaError(repr(path), "the path contains a NUL byte", "fix the media path in the dataset row")
    try:
        st = os.stat(path)  # follows symlinks: a link to /dev/zero is a device
    except FileNotFoundError:
        raise MediaError(path, "file not found", "check the path and --media-root") from None
    except (NotADirectoryError, ValueError, OSError) as exc:
        raise MediaError(path, f"cannot be read ({getattr(exc, 'strerror', None) or exc})", "check the path") from None
    what = _describe(st.st_mode)
    if what is not None:
        raise MediaError(path, what, "point the dataset at a regular video or image file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise MediaError(path, f"cannot be opened ({exc.strerror or exc})", "fix the file permissions") from None
    st = os.fstat(fd)
    what = _describe(st.st_mode)  # the path may have been swapped between stat and open
    if what is not None:
        os.close(fd)
        raise MediaError(path, what, "point the dataset at a regular video or image file")
    return fd, st


def _read_exact(fd: int, offset: int, n: int) -> bytes:
    """At most `n` bytes at `offset`: bounded whatever the file claims."""
    out = bytearray()
    while len(out) < n:
        chunk = os.pread(fd, min(n - len(out), IDENTITY_CHUNK), offset + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def media_file(path: str | os.PathLike[str]) -> Path:
    """`path` if it is a readable, non-empty regular file; else a MediaError saying what it is and what to do."""
    p = os.fspath(path)
    fd, st = _open_regular(p)
    try:
        if st.st_size == 0:
            raise MediaError(p, "file is empty (0 bytes)", "re-download or re-encode the file")
        try:
            os.pread(fd, 1, 0)
        except OSError as exc:
            raise MediaError(p, f"cannot be read ({exc.strerror or exc})", "fix the file permissions") from None
    finally:
        os.close(fd)
    return Path(p)


def source_identity(path: str | os.PathLike[str]) -> str:
    """Content identity of a media file: its size and a BLAKE2b of its first, middle and last MiB.

    Content rather than path, so a cache survives moving the dataset; sampled rather than a full hash, so a look-up
    costs a few reads even for a multi-GB video. Memoised on (path, size, mtime, inode). MediaError for anything that
    is not a regular file.
    """
    p = os.fspath(path)
    fd, st = _open_regular(p)
    try:
        memo_key = (os.path.abspath(p), st.st_size, st.st_mtime_ns, st.st_ino)
        with _memo_lock:
            cached = _identity_memo.get(memo_key)
        if cached is not None:
            return cached
        h = hashlib.blake2b(digest_size=16)
        h.update(struct.pack("<Q", st.st_size))
        if st.st_size <= 3 * IDENTITY_CHUNK:
            h.update(_read_exact(fd, 0, st.st_size))
        else:
            for offset in (0, st.st_size // 2, st.st_size - IDENTITY_CHUNK):
                h.update(_read_exact(fd, offset, IDENTITY_CHUNK))
    except OSError as exc:
        raise MediaError(p, f"cannot be read ({exc.strerror or exc})", "fix the file permissions") from None
    finally:
        os.close(fd)
    ident = f"{st.st_size}-{h.hexdigest()}"
    with _memo_lock:
        _identity_memo[memo_key] = ident
    return ident


def clear_identity_memo() -> None:
    """Forget memoised identities (benchmarks measuring a cold look-up)."""
    with _memo_lock:
        _identity_memo.clear()
