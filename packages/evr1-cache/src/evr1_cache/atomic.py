"""Atomic writes for the whole workspace: a file or a folder appears complete under its final name, or not at all.

A temp file (or folder) in the target's folder, fsynced, renamed into place; a killed writer leaves only a temp, never
a half-written final file. The one helper for every file evr1-cache, evr1-eval and evr1-train write (cache entries,
reports, datasets, checkpoints, run records, merged models), so every leftover has the same recognisable name:
`.<name>.<host>.<pid>.<thread>.tmp` (`is_temp`). (evr1-rewards, a leaf that imports no other package, renames its
own one results file.)

Names (stable): atomic_open, atomic_path, atomic_text, atomic_bytes, atomic_json, atomic_folder, temp_path, is_temp.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

TEMP_SUFFIX = ".tmp"


def temp_path(final: Path, *, keep_suffix: bool = False) -> Path:
    """A temp name beside `final`, unique per host, process and thread (`keep_suffix`: ending in `final`'s suffix too,
    for writers that pick the format from the name, such as an mp4 muxer or `savefig`)."""
    host = socket.gethostname().replace(".", "-")
    tail = final.suffix if keep_suffix else ""
    return final.with_name(f".{final.name}.{host}.{os.getpid()}.{threading.get_ident()}{TEMP_SUFFIX}{tail}")


def is_temp(path: Path) -> bool:
    """A leftover of an interrupted write: ours (`.<name>.<host>.<pid>.<thread>.tmp[.suffix]`) or one of the
    `.tmpXXXXXX` files that safetensors >= 0.5 writes beside its target (evr1-cache < 0.2 wrote entries through it)."""
    name = path.name
    ours = name.endswith(TEMP_SUFFIX) or f"{TEMP_SUFFIX}{path.suffix}" == name[-len(TEMP_SUFFIX + path.suffix) :]
    return name.startswith(".") and (ours or name.startswith(".tmp"))


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, keep_suffix: bool = False, fsync: bool = True) -> Iterator[Path]:
    """`with atomic_path(out) as tmp: writer.save(tmp)`: for writers that need a file name; what they wrote to `tmp`
    appears at `path` once the block ends without error (fsynced first), and nothing appears otherwise."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(final, keep_suffix=keep_suffix)
    try:
        yield tmp
        if fsync:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", *, fsync: bool = True) -> Iterator[IO[Any]]:
    """`with atomic_open(path, "w" | "wb") as fh: ...`: the file appears at `path` complete, or not at all."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', got {mode!r}")
    with atomic_path(path, fsync=False) as tmp, open(tmp, mode, encoding=None if "b" in mode else "utf-8") as fh:
        yield fh
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())


def atomic_text(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_open(path, "w") as fh:
        fh.write(text)


def atomic_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` atomically."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def atomic_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = 1) -> None:
    """Write `data` as JSON to `path` atomically."""
    atomic_text(path, json.dumps(data, indent=indent))


@contextlib.contextmanager
def atomic_folder(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temp folder beside `target`; on success it replaces `target` (an old one is removed), on any error it
    is deleted and `target` is left as it was."""
    final = Path(target)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(final)
    tmp.mkdir()
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
