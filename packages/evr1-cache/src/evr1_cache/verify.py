"""`verify`: every entry of a cache directory is readable, well-formed and self-consistent; nothing else is there.

Checks per entry: the safetensors header (bounded, any crafted content refused by name), the data length, uint8
`[T, H, W, 3]`, the metadata parses (an unknown spec version included) and agrees with the frames (frame count ==
len(frames_indices), frame size == resized size), the file sits at the path its kind, spec key and key imply.
Anything else under `videos/` and `images/` is reported too: a directory or a pipe where an entry should be, stray
files, and every temp leftover of an interrupted write (ours and safetensors'), also in the cache root and `index/`.
One bad file never stops the walk: each is reported with its reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evr1_cache.atomic import is_temp
from evr1_cache.errors import CorruptEntry
from evr1_cache.store import ENTRY_NAME, key_for, remove_entry

KINDS = ("videos", "images")


@dataclass(frozen=True, slots=True)
class VerifyReport:
    entries: int
    videos: int
    images: int
    bytes: int
    corrupt: tuple[tuple[str, str], ...]  #: (path in the cache, reason) of everything that is not a good entry
    temp_files: tuple[str, ...] = field(default=())  #: leftovers of interrupted writes (removed with delete=True)
    deleted: int = 0  #: items removed (delete=True)

    @property
    def ok(self) -> bool:
        """No bad entries, and no temp leftovers remain."""
        return not self.corrupt and (not self.temp_files or self.deleted >= len(self.temp_files))


def walk(root: Path) -> Iterator[Path]:
    """Every item under the entry folders that is not a folder of the layout (`<kind>s/<spec>/<ab>/`): files,
    links, pipes, and directories where entries belong, in a stable order; links are never followed."""
    for kind in KINDS:
        base = root / kind
        if not base.is_dir():
            continue
        for dirpath, dirs, files in os.walk(base):
            depth = len(Path(dirpath).relative_to(base).parts)
            if depth >= 2:  # <kind>s/<spec>/<ab>/: nothing below this level is a folder of ours
                yield from (Path(dirpath, d) for d in sorted(dirs))
                dirs.clear()
            else:
                dirs.sort()
            yield from (Path(dirpath, name) for name in sorted(files))


def check_entry(path: Path, root: Path) -> tuple[str, int]:
    """(kind, bytes) of a good entry; raises CorruptEntry naming what is wrong."""
    from evr1_cache.reader import read_checked

    rel = path.relative_to(root).as_posix()
    parts = rel.split("/")
    if path.is_symlink() or not path.is_file():
        what = "a directory" if path.is_dir() else "a link" if path.is_symlink() else "not a regular file"
        raise CorruptEntry(f"{rel}: {what} where a cache entry should be")
    if len(parts) != 4 or not ENTRY_NAME.match(parts[3]) or parts[2] != parts[3][:2]:
        raise CorruptEntry(f"{rel}: not a cache entry (entries are <kind>s/<spec key>/<ab>/<ab...32 hex>.safetensors)")
    entry = read_checked(path, mmap=True)
    if parts[0] != f"{entry.kind}s" or parts[1] != entry.spec_key:
        raise CorruptEntry(f"{rel}: path does not match its kind/spec key ({entry.kind}, {entry.spec_key})")
    if parts[3] != f"{key_for(entry.kind, entry.source.identity, entry.spec_key)}.safetensors":
        raise CorruptEntry(f"{rel}: file name does not match the source identity and spec key in its header")
    return entry.kind, path.stat().st_size


def verify_cache(root: str | os.PathLike[str], *, delete: bool = False) -> VerifyReport:
    """Check everything under `root`; `delete=True` removes bad entries and temp leftovers (run it while no build
    writes to `root`: a running build's temp files are leftovers too)."""
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"cache directory {base} does not exist")
    counts = {"video": 0, "image": 0}
    total = deleted = 0
    corrupt: list[tuple[str, str]] = []
    temps: list[str] = []
    loose = [p for folder in (base, base / "index") if folder.is_dir() for p in sorted(folder.iterdir())]
    for path in [p for p in loose if is_temp(p)] + list(walk(base)):
        rel = path.relative_to(base).as_posix()
        if is_temp(path):
            temps.append(rel)
        else:
            try:
                kind, size = check_entry(path, base)
            except CorruptEntry as exc:
                corrupt.append((rel, str(exc).replace(f"{path}: ", "", 1)))
            except Exception as exc:  # a crafted file must never stop the walk
                corrupt.append((rel, f"unreadable ({type(exc).__name__}: {exc})"))
            else:
                counts[kind] += 1
                total += size
                continue
        if delete:  # a temp leftover or a bad entry
            remove_entry(path)
            deleted += 1
    return VerifyReport(
        entries=counts["video"] + counts["image"],
        videos=counts["video"],
        images=counts["image"],
        bytes=total,
        corrupt=tuple(corrupt),
        temp_files=tuple(temps),
        deleted=deleted,
    )
