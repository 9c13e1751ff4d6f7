"""Fixtures shared by the cross-package flows: a small EasyVideoR1-style dataset of generated videos and a counter of
real decodes. Only evr1-cache is imported here: the `train` session runs one file of this folder without evr1-eval.

Each generated clip shows its frame index in its pixels (`evr1_cache.testing`), so a test can tell *which* source
frames a consumer received, not only that two consumers received the same bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from evr1_cache.testing import make_synthetic_video

#: (file name, frames, native fps, (width, height), codec): different lengths, rates, sizes and containers, so the
#: sampled indices and resized sizes differ per clip.
CLIPS = (
    ("clip0.mp4", 36, 12.0, (96, 64), "libx264"),
    ("clip1.mkv", 50, 25.0, (128, 72), "mpeg4"),
    ("sub/clip2.mp4", 23, 10.0, (80, 80), "libx264"),
)
OPTIONS = ["A. a pattern of blocks", "B. a cat", "C. a car", "D. nothing"]


@dataclass(frozen=True)
class Dataset:
    """`root/media/<clips>`, a training file `root/train.jsonl` (EasyVideoR1 `videos` lists, paths relative to the
    file) and an evaluation annotation `root/ann/<benchmark>.json` (EasyVideoR1 `path`, relative to `media`)."""

    root: Path
    media: Path
    train_file: Path
    ann_dir: Path
    benchmark: str
    videos: tuple[Path, ...]  # absolute, one per clip

    def copy_to(self, dest: Path) -> Dataset:
        """A private copy (tests that delete or rewrite files must not touch the shared one)."""
        shutil.copytree(self.root, dest, dirs_exist_ok=True)
        return Dataset(
            dest, dest / "media", dest / "train.jsonl", dest / "ann", self.benchmark,
            tuple(dest / "media" / v.relative_to(self.media) for v in self.videos),
        )  # fmt: skip


BENCHMARK = "mvbench"


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    root = tmp_path_factory.mktemp("evr1-flow")
    media = root / "media"
    videos = tuple(
        make_synthetic_video(media / name, n_frames=n, fps=fps, size=size, codec=codec)
        for name, n, fps, size, codec in CLIPS
    )
    rels = [name for name, *_ in CLIPS]
    train_rows = [
        {
            "problem_id": f"t{i}",
            "problem": "<video>What does the video show?",
            "answer": "<answer>A</answer>",
            "problem_type": "multiple choice",
            "options": OPTIONS,
            "data_type": "video",
            "videos": [f"media/{rel}"],
        }
        for i, rel in enumerate(rels)
    ]
    train_file = root / "train.jsonl"
    train_file.write_text("".join(json.dumps(r) + "\n" for r in train_rows), encoding="utf-8")
    # Four questions over three clips: clip0 is asked twice (one cache entry, served to both questions).
    eval_rows = [
        {
            "problem_id": f"q{i}",
            "problem": f"Question {i}: what does the video show?",
            "options": OPTIONS,
            "solution": "<answer>A</answer>",
            "problem_type": "multiple choice",
            "path": rel,
            "data_type": "video",
        }
        for i, rel in enumerate([*rels, rels[0]])
    ]
    ann = root / "ann"
    ann.mkdir()
    (ann / f"{BENCHMARK}.json").write_text(json.dumps(eval_rows), encoding="utf-8")
    return Dataset(root, media, train_file, ann, BENCHMARK, videos)


@pytest.fixture
def decode_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of a registered evr1-cache decoder's `decode` in this process, as the decoded path.

    Counting at the decoder protocol catches every way into a decode (on-the-fly `decode_video`, `build_one` for
    `--write-cache`, `build_cache` for `precompute`), whichever backend `auto` picks.
    """
    from evr1_cache import decoders

    decoders.get_decoder("auto")  # loads the built-in decoders into the registry
    calls: list[str] = []
    for factory in decoders.DECODERS.values():
        if not isinstance(factory, type) or not hasattr(factory, "decode"):
            continue
        original = factory.decode

        def counted(self: object, info: object, *args: object, _original: object = original, **kw: object) -> object:
            calls.append(str(getattr(info, "path", info)))
            return _original(self, info, *args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(factory, "decode", counted)
    return calls


def console_script(name: str) -> str:
    """The console script installed next to this interpreter (the venv under test), else one on PATH."""
    here = Path(sys.executable).parent / name
    if here.is_file():
        return str(here)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"console script {name!r} is not installed in {sys.prefix}; install the package under test")
    return found


def _cache_build(data: Path, out: Path, *flags: str, console: bool = False) -> str:
    argv = ["build", str(data), "--out", str(out), "--no-progress", *flags]
    if not console:
        from evr1_cache.cli import main

        assert main(argv) == 0, f"evr1-cache {' '.join(argv)} failed"
        return ""
    proc = subprocess.run(
        [console_script("evr1-cache"), *argv], capture_output=True, text=True, env=dict(os.environ), timeout=120
    )
    assert proc.returncode == 0, f"evr1-cache build failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="session")
def cache_build() -> Callable[..., str]:
    """`cache_build(DATA, OUT, *FLAGS, console=False)`: `evr1-cache build DATA --out OUT FLAGS...` through the CLI's
    `main` (or, with `console=True`, the installed console script in a separate process, exactly as a user runs it);
    fails the test unless it exits 0. Returns the console output (empty in-process)."""
    return _cache_build


@pytest.fixture(scope="session")
def cache_entries() -> Callable[[Path], set[Path]]:
    """`cache_entries(DIR)`: every finished video entry file under an evr1-cache folder."""

    def entries(cache_dir: Path) -> set[Path]:
        return set((cache_dir / "videos").rglob("*.safetensors")) if (cache_dir / "videos").is_dir() else set()

    return entries


@pytest.fixture(scope="session")
def console() -> Callable[[str], str]:
    """`console(NAME)`: the installed console script NAME of the venv under test (`console_script`)."""
    return console_script
