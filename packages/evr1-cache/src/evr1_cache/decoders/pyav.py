"""PyAV decoder: in-process, sequential, converts only the kept frames to RGB."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from evr1_cache.budget import decode_threads
from evr1_cache.decoders.base import FrameSink, register, rotate
from evr1_cache.errors import DecodeMismatch
from evr1_cache.paths import open_container

if TYPE_CHECKING:
    import numpy as np

    from evr1_cache.probing import VideoInfo


@register("pyav")
class PyAVDecoder:
    name = "pyav"

    def available(self) -> bool:
        try:
            import av  # noqa: F401
        except ImportError:
            return False
        return True

    def version(self) -> str:
        try:
            import av
        except ImportError:
            return "PyAV not installed (pip install av)"
        return f"pyav {av.__version__}"

    def decode(
        self, info: VideoInfo, positions: Sequence[int], *, threads: int = 0, sink: FrameSink | None = None
    ) -> list[np.ndarray]:
        from av.codec.context import Flags
        from av.video.reformatter import VideoReformatter

        wanted = sorted(set(positions))
        kept: dict[int, np.ndarray] = {}
        n = 0
        # one converter for every kept frame (a frame's own `to_ndarray(format=)` sets up a new swscale context and
        # its threads each time); one slice thread: the conversion runs beside the decoder's own threads
        rgb = VideoReformatter()
        with open_container(info.path) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            stream.codec_context.thread_count = decode_threads(threads, info.width, info.height)
            stream.codec_context.flags |= Flags.bitexact  # as the ffmpeg CLI decoder: one IDCT whatever the build
            cursor = 0
            for frame in container.decode(stream):
                if cursor < len(wanted) and wanted[cursor] == n:
                    pixels = rotate(rgb.reformat(frame, format="rgb24", threads=1).to_ndarray(), info.rotation)
                    if sink is None:
                        kept[n] = pixels
                    else:
                        sink(pixels)
                    cursor += 1
                n += 1
        expected = len(info.frame_times)
        if n != expected or cursor != len(wanted):
            raise DecodeMismatch(n, expected)
        return [kept[p] for p in positions] if sink is None else []
