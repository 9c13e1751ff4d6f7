"""Atomic file writes: a temp file in the target's folder, fsynced, renamed into place; a killed writer leaves only a
temp file, never a half-written final file.

One helper for every file evr1-cache writes (cache entries, error reports, output datasets, fetched test media), so
every leftover has the same recognisable name: `.<name>.<host>.<pid>.<thread>.tmp` (`is_temp`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

TEMP_SUFFIX = ".tmp"


def temp_path(final: Path) -> Path:
    """A temp name beside `final`, unique per host, process and thread."""
    host = socket.gethostname().replace(".", "-")
    return final.with_name(f".{final.name}.{host}.{os.getpid()}.{threading.get_ident()}{TEMP_SUFFIX}")


def is_temp(path: Path) -> bool:
    """A leftover of an interrupted write: ours (`.<name>.<host>.<pid>.<thread>.tmp`) or one of the `.tmpXXXXXX`
    files that safetensors >= 0.5 writes beside its target (evr1-cache < 0.2 wrote entries through it)."""
    name = path.name
    return name.startswith(".") and (name.endswith(TEMP_SUFFIX) or name.startswith(".tmp"))


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", *, fsync: bool = True) -> Iterator[IO[Any]]:
    """`with atomic_open(path, "w" | "wb") as fh: ...`: the file appears at `path` complete, or not at all."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', got {mode!r}")
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(final)
    try:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path, "w") as fh:
        fh.write(text)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(data)
