"""One exception type for every bad input, so a build can turn any failure into one report line (file, reason, fix)."""

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
