"""Helpers shared by scorers: the candidate search over a response's answer candidates."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from evr1_rewards.extract import Response

T = TypeVar("T")


def first_parsed(resp: Response, parse: Callable[[str], T | None]) -> tuple[T | None, str, bool]:
    """Try the answer candidates in priority order: (value, source, parsed_from_primary_candidate)."""
    for i, cand in enumerate(resp.candidates()):
        value = parse(cand.text)
        if value is not None:
            return value, cand.source, i == 0
    return None, "none", False
