"""Media paths are paths: one rule to resolve a dataset row's media path, keep it inside the dataset, and open it.

Why: dataset rows are untrusted input. A row's `file:/elsewhere/secret.mp4` or `http:/host/x.mp4` was checked as a
local file (a decoy of that name passed) and then parsed by FFmpeg as a URL: an outside file was decoded or an HTTP
request sent. Absolute paths, `../` and symlinks read anything on the machine. Here:

- `MediaPaths.resolve` turns a row's string into an absolute path: relative paths join the dataset's folder (or
  `--media-root`); `file://` URIs are read as the path they name; any other `scheme://` is remote media, refused
  unless the user allowed its scheme (`--allow-remote-media http,https`): then it is downloaded once
  (`evr1_cache.remote`) and read as that local file.
- Confinement is on by default: the path must resolve, after symlinks, inside the confinement folder (the dataset's
  folder or `--media-root`); `--allow-outside-media` opts out. Every refusal names the row, the path and the flag.
- `open_container` / `ffmpeg_input` hand FFmpeg an absolute `file:` URL with the protocol allow-list `file`, and
  refuse demuxers that open other files or URLs themselves (playlists, concat lists), so nothing but the named regular
  file is read (`sources.media_file` checks it is one: no FIFOs, devices, directories).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evr1_cache.errors import MediaError
from evr1_cache.remote import ALLOW_REMOTE_FLAG, REMOTE_SCHEMES, RemoteMedia, parse_remote_schemes, scheme_of

if TYPE_CHECKING:
    from av.container import InputContainer

#: The flag (and config key) that turns confinement off; named in every refusal.
ALLOW_OUTSIDE_FLAG = "--allow-outside-media"
#: The only protocol FFmpeg may use to read media.
FFMPEG_PROTOCOLS = "file"
#: Demuxers that read further files or URLs named inside the media file: never opened.
INDIRECT_FORMATS = frozenset({"hls", "applehttp", "concat", "dash", "imf", "ffmetadata", "tee", "mpd"})

#: Streams of one file whose probing decode is bounded by the decode budget (files hold a handful).
_PROBED_STREAMS = 64
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(text: str) -> bool:
    """Whether a row's media string is a URL (`scheme://...`; `file://` included)."""
    return bool(_URL.match(text.strip()))


class MediaPathError(MediaError):
    """A media path refused before anything is read: remote, outside the confinement folder, or not a path."""


@dataclass(frozen=True)
class MediaPaths:
    """How one dataset's media paths are read: `base` is what relative paths join; `root` the folder they must stay
    in after symlinks (None: not confined, the user passed `--allow-outside-media`); `remote` the URL schemes the
    user allowed (None: every URL refused)."""

    base: Path
    root: Path | None
    #: how the user opts out, named in each refusal (a config key where the dataset is read from a config)
    opt_out: str = ALLOW_OUTSIDE_FLAG
    remote: RemoteMedia | None = None
    #: how the user opts in to remote media, named when a URL is refused
    remote_opt_in: str = ALLOW_REMOTE_FLAG

    @classmethod
    def for_dataset(
        cls,
        data_file: str | os.PathLike[str],
        media_root: str | os.PathLike[str] | None,
        *,
        allow_outside: bool,
        allow_remote: str | Iterable[str] | None = None,
    ) -> MediaPaths:
        """Relative to `media_root` (else the data file's folder), confined to the same folder unless `allow_outside`;
        URLs of the `allow_remote` schemes downloaded (`evr1_cache.remote`)."""
        return cls.for_folder(media_root if media_root is not None else Path(os.path.abspath(data_file)).parent,
                              allow_outside=allow_outside, allow_remote=allow_remote)  # fmt: skip

    @classmethod
    def for_folder(
        cls,
        folder: str | os.PathLike[str],
        *,
        allow_outside: bool,
        opt_out: str = ALLOW_OUTSIDE_FLAG,
        allow_remote: str | Iterable[str] | None = None,
        remote_opt_in: str = ALLOW_REMOTE_FLAG,
    ) -> MediaPaths:
        """Relative to `folder` and confined to it unless `allow_outside`; URLs of the `allow_remote` schemes (a comma
        list or a list, checked against `REMOTE_SCHEMES`) downloaded into the user's download folder."""
        base = Path(os.path.abspath(folder))
        schemes = parse_remote_schemes(allow_remote)
        remote = RemoteMedia(schemes) if schemes else None
        return cls(base, None if allow_outside else base, opt_out, remote, remote_opt_in)

    def resolve(self, media: object, where: str = "") -> str:
        """The absolute path of a row's media string; MediaPathError (naming `where`, the path and the flag) if it is
        remote, outside the confinement folder or not a path."""
        prefix = f"{where}: " if where else ""
        if not isinstance(media, str) or not media.strip():
            raise MediaPathError(f"{prefix}{str(media)[:80]!r}", "media path must be a non-empty string", "fix the row")
        if "\0" in media:
            raise MediaPathError(f"{prefix}{media!r}", "the path contains a NUL byte", "fix the media path in the row")
        text = media.strip()
        if _URL.match(text) and not text.startswith("file://"):
            return self._remote(text, prefix)
        path = os.path.abspath(self.base / Path(text.removeprefix("file://")).expanduser())  # an absolute one as it is
        if self.root is not None and not (self.remote is not None and self.remote.holds(path)):
            root = os.path.realpath(self.root)
            real = os.path.realpath(path)
            if os.path.commonpath([root, real]) != root:
                raise MediaPathError(
                    f"{prefix}{path}",
                    f"resolves to {real}, outside the media folder {root}",
                    f"fix the row, choose the media root, or pass {self.opt_out} to read media anywhere",
                )
        return path

    def _remote(self, url: str, prefix: str) -> str:
        """The downloaded copy of `url` when the user allowed its scheme; MediaPathError naming the flag otherwise."""
        scheme = scheme_of(url)
        if self.remote is None or scheme not in self.remote.schemes:
            allowed = ",".join(sorted(self.remote.schemes)) if self.remote is not None else "none"
            raise MediaPathError(
                f"{prefix}{url}",
                f"remote media (a {scheme}: URL) is not read unless asked for (remote schemes allowed: {allowed})",
                f"pass {self.remote_opt_in} with {scheme} (from {','.join(REMOTE_SCHEMES)}) to download it once, "
                "or download the file into the dataset's folder and name it by its path"
                if scheme in REMOTE_SCHEMES
                else f"download the file into the dataset's folder and name it by its path ({scheme}: cannot be "
                f"allowed; {self.remote_opt_in} takes {','.join(REMOTE_SCHEMES)})",
            )
        try:
            return self.remote.fetch(url)
        except MediaPathError:
            raise
        except MediaError as exc:
            raise MediaPathError(f"{prefix}{exc.path}", exc.reason, exc.fix) from exc


def add_media_path_args(parser: argparse.ArgumentParser) -> None:
    """The `--allow-outside-media` and `--allow-remote-media` flags, the same in every command that reads a dataset's
    media."""
    parser.add_argument(
        ALLOW_OUTSIDE_FLAG,
        dest="allow_outside_media",
        action="store_true",
        help="read media paths that resolve outside the dataset's folder / --media-root (absolute paths, ../, "
        "symlinks out of it); refused by default",
    )
    parser.add_argument(
        ALLOW_REMOTE_FLAG,
        dest="allow_remote_media",
        metavar="SCHEMES",
        type=_schemes_arg,
        default=frozenset(),
        help=f"download media URLs of these schemes (comma list from {','.join(REMOTE_SCHEMES)}) once into the "
        "user's cache folder (~/.cache/evr1/remote-media) and read them as local files; URLs are refused by default",
    )
    # `--confine` was the opt-in before confinement became the default: still accepted, changes nothing
    parser.add_argument("--confine", action="store_true", help=argparse.SUPPRESS)


def _schemes_arg(text: str) -> frozenset[str]:
    try:
        return parse_remote_schemes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def ffmpeg_input(path: str | os.PathLike[str]) -> str:
    """The input FFmpeg is given for a local file: an absolute `file:` URL (never parsed as another protocol)."""
    return "file:" + os.path.abspath(os.fspath(path))


def open_container(path: str | os.PathLike[str]) -> InputContainer:
    """`av.open` of a local media file, restricted to the `file` protocol and to self-contained formats."""
    import av

    from evr1_cache.budget import codec_options

    # the decoder options go to the stream probing too: FFmpeg decodes a first frame there to learn the stream's
    # parameters, and would allocate a frame of any size (`_PROBED_STREAMS`: streams of a file that get them);
    # formats that expose no stream before probing (MPEG program streams) refuse per-stream options: opened without
    # them, their probing decode is bounded by the codec's own size limits, and `check_frame` follows at once
    url, options = ffmpeg_input(path), {"protocol_whitelist": FFMPEG_PROTOCOLS}
    try:
        container = av.open(url, options=options, stream_options=[codec_options()] * _PROBED_STREAMS)  # type: ignore[list-item]  # PyAV's av.open stub says list[str]: it takes dicts
    except ValueError as exc:
        if "stream_options" not in str(exc):
            raise
        container = av.open(url, options=options)
    for stream in container.streams.video:  # the decode budget, enforced by the decoder itself (evr1_cache.budget)
        stream.codec_context.options = codec_options()
    names = set(str(container.format.name).split(","))
    if names & INDIRECT_FORMATS:
        container.close()
        raise MediaError(
            str(path),
            f"a {container.format.name} file reads other files or URLs named inside it; it is not read",
            "point the row at the video file itself",
        )
    return container
