"""Helpers shared by scorers: the candidate search over a response's answer candidates; all-or-nothing parsing."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from evr1_rewards.extract import Response

T = TypeVar("T")


STATED_SOURCES = frozenset({"answer_tag", "boxed", "statement"})


def first_parsed(
    resp: Response,
    parse: Callable[[str], T | None],
    hedge: Callable[[str], bool] | None = None,
    rejects: Callable[[str, object], bool] | None = None,
) -> tuple[T | None, str, bool]:
    """Try the answer candidates in priority order: (value, source, parsed_from_primary_candidate). A stated answer
    (tag, box, "the answer is …") that `hedge`s — offers several answers — ends the search with no value: the text
    around it must not supply the choice it refused to make. So does an answer that `rejects` the value it names
    ("not yes", "Response 2 is worse"; see `evr1_rewards.extract.rejected`). Any other candidate that hedges is
    skipped, so `parse` need not test `hedge` again."""
    for i, cand in enumerate(resp.candidates()):
        if hedge is not None and hedge(cand.text):
            if cand.source in STATED_SOURCES:
                return None, cand.source, False
            continue
        value = parse(cand.text)
        if value is not None:
            if rejects is not None and rejects(cand.text, value):
                return None, cand.source, False
            return value, cand.source, i == 0
    return None, "none", False


def every(parsed: list[T | None]) -> list[T] | None:
    """All of `parsed`, or None when one of them did not parse."""
    return None if any(v is None for v in parsed) else cast("list[T]", parsed)
