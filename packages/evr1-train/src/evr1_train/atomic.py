"""Atomic writes: a file or a whole folder appears complete under its final name, or not at all.

Why one module: checkpoints, run records, the quickstart's data and model, merged models and metric logs are all
written by processes that may be killed mid-write; a reader must never find half of one (and a rerun resumes).

Names (stable): atomic_text(path, text), atomic_json(path, data), atomic_folder(target) (context manager)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def atomic_text(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` next to `path` under a temporary name and rename it into place."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would make the output private, unlike any other file
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_json(path: str | os.PathLike[str], data: Any) -> None:
    atomic_text(path, json.dumps(data, indent=1))


@contextlib.contextmanager
def atomic_folder(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary folder beside `target`; on success it replaces `target` (an old one is removed), on any
    error it is deleted and `target` is left as it was."""
    final = Path(target)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
