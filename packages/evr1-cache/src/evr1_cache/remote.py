"""Remote media, read only when the user asks for it: an allowed URL is downloaded once, then read as a local file.

Why: dataset rows are untrusted, so a row's URL is refused unless the user passed `--allow-remote-media SCHEMES`
(config: `data.evr1.allow_remote_media`), naming schemes from a fixed allow-list (`REMOTE_SCHEMES`). Letting FFmpeg
open the URL itself would turn on its network protocols (and the redirects, playlists and nested URLs they follow);
here the stdlib downloads the file instead:

- once, into a content-addressed folder (`<folder>/<sha256 of the URL>.<ext>`, written atomically): later runs and
  the frame cache see one stable local file (its source identity), and FFmpeg keeps its `file`-only protocol list;
- with a size cap (`MAX_REMOTE_BYTES`, checked against Content-Length and while reading) and a timeout;
- following redirects only to a scheme the user allowed (never `file:`, `ftp:` or `data:`), and through an opener
  that holds no handler for any other scheme.
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from email.message import Message
from http.client import HTTPMessage
from pathlib import Path
from typing import IO

from evr1_cache.atomic import atomic_path
from evr1_cache.errors import MediaError

#: The flag that opts in; named in every refusal of a URL.
ALLOW_REMOTE_FLAG = "--allow-remote-media"
#: The only schemes a user may allow.
REMOTE_SCHEMES: tuple[str, ...] = ("http", "https")
#: Largest remote file downloaded (bytes); larger ones are refused.
MAX_REMOTE_BYTES = 2 << 30
#: Seconds one connection or read may wait.
REMOTE_TIMEOUT_S = 60.0

_CHUNK = 1 << 20
_EXT = re.compile(r"\.([A-Za-z0-9]{1,8})$")


def parse_remote_schemes(value: str | Iterable[str] | None) -> frozenset[str]:
    """The schemes of `--allow-remote-media` (a comma list, or a list from a config); ValueError naming the allowed
    ones for anything outside `REMOTE_SCHEMES`."""
    if value is None:
        return frozenset()
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    schemes = frozenset(s.strip().lower() for s in items if s.strip())
    bad = sorted(schemes - set(REMOTE_SCHEMES))
    if bad:
        raise ValueError(f"remote media scheme(s) {bad} not allowed; choose from {','.join(REMOTE_SCHEMES)}")
    return schemes


def default_folder() -> Path:
    """Where downloads go unless a command names a folder: the user's cache folder (`$XDG_CACHE_HOME` or
    `~/.cache`), shared by every command so a URL is downloaded once per user."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "evr1" / "remote-media"


def scheme_of(url: str) -> str:
    """The lower-case scheme of `url` (the text before `://`)."""
    return url.split("://", 1)[0].lower()


@dataclass(frozen=True)
class RemoteMedia:
    """Which URL schemes a run may download (`schemes`), where to (`folder`), and how much (`max_bytes`)."""

    schemes: frozenset[str]
    folder: Path = field(default_factory=default_folder)
    max_bytes: int = MAX_REMOTE_BYTES
    timeout_s: float = REMOTE_TIMEOUT_S

    def target(self, url: str) -> Path:
        """The local file `url` is downloaded to: named by the URL's sha256 and its extension (FFmpeg probes content,
        the extension only helps a person)."""
        name = hashlib.sha256(url.encode("utf-8")).hexdigest()
        match = _EXT.search(urllib.parse.urlsplit(url).path)
        return self.folder / (name + (f".{match.group(1).lower()}" if match else ".bin"))

    def holds(self, path: str) -> bool:
        """Whether `path` is one of this folder's downloads (read without the media-folder confinement)."""
        folder = os.path.realpath(self.folder)
        return os.path.commonpath([folder, os.path.realpath(path)]) == folder

    def fetch(self, url: str) -> str:
        """The local path of `url`, downloaded now unless an earlier run already did; MediaError naming the URL when
        its scheme is not allowed, it is too large, a redirect leaves the allowed schemes, or the download fails."""
        scheme = scheme_of(url)
        if scheme not in self.schemes:
            raise MediaError(
                url,
                f"{scheme}: media are not downloaded in this run (allowed: {','.join(sorted(self.schemes))})",
                f"pass {ALLOW_REMOTE_FLAG} {scheme} if this scheme is wanted",
            )
        target = self.target(url)
        if target.is_file():
            return str(target)
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            with self._opener().open(url, timeout=self.timeout_s) as response:
                self._check_length(url, response.headers)
                with atomic_path(target) as tmp, open(tmp, "wb") as out:
                    self._copy(url, response, out)
        except MediaError:
            raise
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise MediaError(url, f"download failed: {exc}", "check the URL, or download the file yourself") from exc
        return str(target)

    def _opener(self) -> urllib.request.OpenerDirector:
        """An opener with handlers for the allowed schemes only (no file:, ftp:, data:), redirects checked."""
        opener = urllib.request.OpenerDirector()
        handlers: list[urllib.request.BaseHandler] = [
            urllib.request.ProxyHandler(),
            urllib.request.HTTPHandler(),
            urllib.request.HTTPSHandler(),
            _AllowedRedirects(self.schemes),
            urllib.request.HTTPDefaultErrorHandler(),
            urllib.request.HTTPErrorProcessor(),
        ]
        for handler in handlers:
            opener.add_handler(handler)
        return opener

    def _check_length(self, url: str, headers: Message) -> None:
        length = headers.get("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_bytes:
            raise MediaError(url, f"the file is {int(length)} bytes, over the {self.max_bytes}-byte cap for remote media",
                             "download it yourself and name it by its path")  # fmt: skip

    def _copy(self, url: str, response: IO[bytes], out: IO[bytes]) -> None:
        total = 0
        while chunk := response.read(_CHUNK):
            total += len(chunk)
            if total > self.max_bytes:
                raise MediaError(url, f"the file is over the {self.max_bytes}-byte cap for remote media",
                                 "download it yourself and name it by its path")  # fmt: skip
            out.write(chunk)


class _AllowedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to a scheme the user allowed (the stdlib's own handler would follow one to ftp:)."""

    def __init__(self, schemes: Collection[str]) -> None:
        self.schemes = frozenset(schemes)

    def http_error_302(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: HTTPMessage
    ) -> IO[bytes] | None:
        # checked before the stdlib's own test (which lets ftp: through and names no allowed scheme)
        target = headers.get("Location") or headers.get("URI")
        if target is not None:
            self._check(req, urllib.parse.urljoin(req.full_url, target))
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: HTTPMessage, newurl: str
    ) -> urllib.request.Request | None:
        self._check(req, newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)

    def _check(self, req: urllib.request.Request, newurl: str) -> None:
        scheme = urllib.parse.urlsplit(newurl).scheme.lower()
        if scheme not in self.schemes:
            raise MediaError(
                req.full_url,
                f"redirects to {newurl!r}, a {scheme or 'schemeless'} URL outside the allowed schemes "
                f"({','.join(sorted(self.schemes))}); not followed",
                "name the final URL in the row",
            )
