"""ffmpeg CLI decoder (through ffmpeg-python): a `select` filter keeps the wanted frames, rawvideo RGB over a pipe.

Autorotation is switched off and the rotation applied in numpy, exactly as the PyAV decoder does, so both backends
return identical frames; `-fps_mode passthrough` stops ffmpeg from dropping or duplicating frames; the number of
frames decoded is read from ffmpeg's verbose statistics and checked against the probe. Both decoders ask for
bit-exact decoding (`-flags +bitexact`): the Debian ffmpeg and PyAV's bundled FFmpeg otherwise pick different IDCTs
for MPEG-4 ASP-family codecs (OpenCV's MS-MPEG-4 `vtest.avi` differed by 1 in most P-frames).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evr1_cache.decoders import FrameSink, register, rotate
from evr1_cache.errors import DecodeMismatch

if TYPE_CHECKING:
    import numpy as np

    from evr1_cache.probing import VideoInfo

_DECODED = re.compile(r"Input stream #0:\d+ \(video\): \d+ packets read \(\d+ bytes\); (\d+) frames decoded")


@register("ffmpeg")
class FFmpegCLIDecoder:
    name = "ffmpeg"

    def available(self) -> bool:
        try:
            import ffmpeg  # noqa: F401
        except ImportError:
            return False
        return shutil.which("ffmpeg") is not None

    def version(self) -> str:
        exe = shutil.which("ffmpeg")
        if exe is None:
            return "ffmpeg CLI not found (Debian: apt-get install -y ffmpeg)"
        out = subprocess.run([exe, "-version"], capture_output=True, text=True).stdout.split("\n", 1)[0]
        return out.replace(" Copyright", "").strip()

    def decode(
        self, info: VideoInfo, positions: Sequence[int], *, threads: int = 0, sink: FrameSink | None = None
    ) -> list[np.ndarray]:
        import ffmpeg
        import numpy as np

        wanted = sorted(set(positions))
        expr = "+".join(f"eq(n,{p})" for p in wanted)
        rot = info.rotation in (90, 270)
        cw, ch = (info.height, info.width) if rot else (info.width, info.height)
        stream = ffmpeg.input(info.path, noautorotate=None, threads=threads, flags="+bitexact")
        stream = stream.video.filter("select", expr)
        cmd = stream.output("pipe:", format="rawvideo", pix_fmt="rgb24", fps_mode="passthrough").compile()
        cmd = [cmd[0], "-nostdin", "-hide_banner", "-v", "verbose", *cmd[1:]]
        proc = subprocess.run(cmd, capture_output=True)
        err = proc.stderr.decode("utf-8", "replace")
        if proc.returncode != 0:
            raise RuntimeError(f"ffmpeg failed: {err.strip().splitlines()[-1] if err.strip() else proc.returncode}")
        m = _DECODED.search(err)
        decoded = int(m.group(1)) if m else -1
        expected = len(info.frame_times)
        frame_bytes = cw * ch * 3
        got = len(proc.stdout) // frame_bytes
        if decoded != expected or got != len(wanted) or len(proc.stdout) % frame_bytes:
            raise DecodeMismatch(decoded, expected)
        frames = np.frombuffer(proc.stdout, np.uint8).reshape(got, ch, cw, 3)
        if sink is not None:  # the whole output arrives at once: nothing to overlap with, but the same contract
            for frame in frames:
                sink(rotate(frame, info.rotation))
            return []
        at = {p: i for i, p in enumerate(wanted)}
        return [rotate(frames[at[p]], info.rotation) for p in positions]
