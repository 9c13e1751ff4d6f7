"""The exceptions of evr1-cache: one per kind of trouble, each printable as one report line (file, reason, fix)."""

from __future__ import annotations


class MediaError(Exception):
    """A video or image that cannot be cached; `str()` is the one-line report entry."""

    def __init__(self, path: str, reason: str, fix: str = "") -> None:
        self.path = str(path)
        self.reason = reason
        self.fix = fix
        super().__init__(f"{self.path}: {reason}" + (f" (fix: {fix})" if fix else ""))


class DecodeMismatch(Exception):
    """The decoder saw a different number of frames than the probe counted (a lying or damaged stream)."""

    def __init__(self, decoded: int, expected: int) -> None:
        self.decoded = decoded
        self.expected = expected
        super().__init__(f"decoded {decoded} frames, probe counted {expected}")


class CacheMiss(KeyError):
    """No usable entry for this (file, spec) in the cache: absent, built for another spec, or damaged."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class CorruptEntry(CacheMiss):
    """An entry file that is not a complete, well-formed evr1-cache entry (never served; `verify` names it)."""
