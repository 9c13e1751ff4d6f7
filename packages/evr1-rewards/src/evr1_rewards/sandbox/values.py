"""Decoding the tagged values a probe run prints (see `sandbox._harness.encode`) into built-in values, bounded.

The text comes from the program's own process (it could forge it), so it is read with `ast.literal_eval` (no code
runs), size-capped, and any failure — too deep, malformed — is simply "no values": the test fails.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import Any

MAX_TEXT = 8 << 20


class Unserialisable:
    """A value the program returned that is not a built-in value (equal to nothing, not even itself)."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<unserialisable {self.type_name}>"


class ProbeError(Unserialisable):
    """The probe expression raised (its exception type name)."""


MAX_INT_DIGITS = 100_000
_COLLECTIONS: dict[str, Callable[[Iterable[Any]], Any]] = {"L": list, "T": tuple, "S": set, "FS": frozenset}


def decode(v: object, depth: int = 0) -> Any:
    """Built-in values from their tagged JSON form; malformed input becomes `Unserialisable`."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if depth > 100:
        return Unserialisable("too deep")
    if isinstance(v, dict) and len(v) == 1:
        tag, body = next(iter(v.items()))
        try:
            if tag in _COLLECTIONS:
                return _COLLECTIONS[tag](decode(x, depth + 1) for x in body)
            if tag == "D":
                return {decode(k, depth + 1): decode(x, depth + 1) for k, x in body}
            if tag == "I" and isinstance(body, str) and len(body) <= MAX_INT_DIGITS:
                return int(body)
            if tag == "F" and body in ("nan", "inf", "-inf"):
                return float(body)
            if tag == "C":
                return complex(float(body[0]), float(body[1]))
            if tag == "B" and isinstance(body, str):
                return bytes.fromhex(body)
            if tag == "E":
                return ProbeError(str(body)[:100])
            if tag == "X":
                return Unserialisable(str(body)[:100])
        except (TypeError, ValueError, LookupError, RecursionError):  # ({"C": []}: an IndexError)
            return Unserialisable("malformed")
    return Unserialisable("malformed")


def decode_steps(text: str | None, expected_steps: int) -> list[list[Any]] | None:
    """One list of values per probe step, or None when the run did not report (complete) values."""
    if text is None or len(text) > MAX_TEXT:
        return None
    try:
        data = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(data, list) or len(data) != expected_steps or not all(isinstance(s, list) for s in data):
        return None
    return [[decode(v) for v in step] for step in data]
