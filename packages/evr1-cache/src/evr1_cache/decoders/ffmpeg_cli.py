"""ffmpeg CLI decoder (through ffmpeg-python): a `select` filter keeps the wanted frames, rawvideo RGB over a pipe.

Frames are read off the pipe as ffmpeg writes them, so a sink can resize them while ffmpeg goes on. Autorotation is
switched off and the rotation applied in numpy, exactly as the PyAV decoder does, so both backends
return identical frames; `-fps_mode passthrough` stops ffmpeg from dropping or duplicating frames; the number of
frames decoded is read from ffmpeg's verbose statistics and checked against the probe. Both decoders ask for
bit-exact decoding (`-flags +bitexact`): the Debian ffmpeg and PyAV's bundled FFmpeg otherwise pick different IDCTs
for MPEG-4 ASP-family codecs (OpenCV's MS-MPEG-4 `vtest.avi` differed by 1 in most P-frames).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evr1_cache.budget import codec_options, decode_threads
from evr1_cache.decoders.base import FrameSink, register, rotate
from evr1_cache.errors import DecodeMismatch
from evr1_cache.paths import FFMPEG_PROTOCOLS, ffmpeg_input

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
        stream = ffmpeg.input(
            ffmpeg_input(info.path),
            noautorotate=None,
            threads=decode_threads(threads, info.width, info.height),
            **codec_options(),
            flags="+bitexact",
            protocol_whitelist=FFMPEG_PROTOCOLS,
        )
        stream = stream.video.filter("select", expr)
        cmd = stream.output("pipe:", format="rawvideo", pix_fmt="rgb24", fps_mode="passthrough").compile()
        cmd = [cmd[0], "-nostdin", "-hide_banner", "-v", "verbose", *cmd[1:]]
        frame_bytes = cw * ch * 3
        kept: list[np.ndarray] = []
        got, tail = 0, 0
        # frames are read off the pipe as ffmpeg writes them (a sink resizes them meanwhile); stderr (verbose, it can
        # be long) goes to a file, so that neither pipe can fill up and stall the other
        with tempfile.TemporaryFile() as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log)
            assert proc.stdout is not None
            with proc.stdout:
                while chunk := proc.stdout.read(frame_bytes):
                    if len(chunk) < frame_bytes:
                        tail = len(chunk)
                        break
                    got += 1
                    if got <= len(wanted):
                        frame = rotate(np.frombuffer(chunk, np.uint8).reshape(ch, cw, 3), info.rotation)
                        if sink is None:
                            kept.append(frame)
                        else:
                            sink(frame)
            returncode = proc.wait()
            log.seek(0)
            err = log.read().decode("utf-8", "replace")
        if returncode != 0:
            raise RuntimeError(f"ffmpeg failed: {err.strip().splitlines()[-1] if err.strip() else returncode}")
        m = _DECODED.search(err)
        decoded = int(m.group(1)) if m else -1
        expected = len(info.frame_times)
        if decoded != expected or got != len(wanted) or tail:
            raise DecodeMismatch(decoded, expected)
        if sink is not None:
            return []
        at = {p: i for i, p in enumerate(wanted)}
        return [kept[at[p]] for p in positions]
