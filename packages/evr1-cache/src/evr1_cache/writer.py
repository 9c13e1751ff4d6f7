"""Make one cache entry from one media file: decode or load, resize by the spec's rule, write atomically.

The single place an entry is produced, used by `build_cache` (many entries, in worker processes) and by
`CacheReader.ensure` (one entry, write-through), so both write byte-identical files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from evr1_cache.entry import ImageMeta, Source
from evr1_cache.spec import ImageSpec, SamplingSpec
from evr1_cache.store import kind_of, spec_json, write_entry

if TYPE_CHECKING:
    from evr1_cache.probing import VideoInfo


def make_entry(
    source: str | os.PathLike[str],
    spec: SamplingSpec | ImageSpec,
    final: Path,
    *,
    decoder: str = "auto",
    threads: int = 0,
    info: VideoInfo | None = None,
) -> tuple[int, tuple[int, ...]]:
    """Build the entry of `source` under `spec` at `final`: (file size, frames shape). Raises MediaError for bad
    media (and RuntimeError/KeyError for a decoder that is unknown or unavailable). `info`: the video's probe, when
    the caller already has it (a build reports variable-rate videos from it)."""
    from evr1_cache.sources import source_identity

    path = os.fspath(source)
    identity = source_identity(path)  # first: refuses anything but a regular file, before any decoder opens it
    if isinstance(spec, SamplingSpec):
        from evr1_cache.decode import decode_video
        from evr1_cache.decoders import get_decoder

        frames, meta = decode_video(path, spec, decoder, threads=threads, info=info)
        header = {"meta": meta.to_json(), "decoder": get_decoder(decoder).version()}
    else:
        from evr1_cache.image import load_image

        frames = load_image(path, spec)
        header = {"meta": ImageMeta(int(frames.shape[0]), int(frames.shape[1])).to_json()}
    header.update(
        kind=kind_of(spec),
        spec_key=spec.key(),
        spec=spec_json(spec),
        source=Source(path, identity).to_json(),
    )
    return write_entry(final, frames, header), tuple(int(d) for d in frames.shape)
