"""Locate the extracted answer inside a response, so the page can highlight exactly what the scorer read."""

from __future__ import annotations

import re

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def answer_span(text: str, extracted: str | None) -> tuple[int, int] | None:
    """(start, end) of the answer in `text`, or None when it cannot be located.

    Order: the extracted string inside the last `<answer>...</answer>` block; else its last occurrence anywhere, as
    a whole word (an option letter "A" is never the article in "a digit"), exact case before any case; else the last
    answer block's content. Scorers read the last answer, so the last occurrence is the one that counted.
    """
    if not text:
        return None
    want = (extracted or "").strip()
    blocks = list(_ANSWER.finditer(text))
    if blocks:
        block = blocks[-1]
        inner = block.group(1)
        found = _last(inner, want) if want else None
        if found is not None:
            return block.start(1) + found[0], block.start(1) + found[1]
        anywhere = _last(text, want) if want else None
        if anywhere is not None:
            return anywhere
        if inner.strip():
            lead = len(inner) - len(inner.lstrip())
            return block.start(1) + lead, block.start(1) + len(inner.rstrip())
        return None
    return _last(text, want) if want else None


def _last(text: str, want: str) -> tuple[int, int] | None:
    """The last whole-word occurrence of `want` in `text`: exact case first, then ignoring case."""
    left = r"(?<![A-Za-z0-9])" if want[:1].isalnum() else ""
    right = r"(?![A-Za-z0-9])" if want[-1:].isalnum() else ""
    for flags in (0, re.IGNORECASE):
        hits = list(re.finditer(left + re.escape(want) + right, text, flags))
        if hits:
            return hits[-1].start(), hits[-1].end()
    return None


def split_answer(text: str | None, extracted: str | None) -> tuple[str, str, str]:
    """(before, answer, after): the template escapes each part and wraps the answer in <mark>."""
    if not text:
        return "", "", ""
    span = answer_span(text, extracted)
    if span is None:
        return text, "", ""
    a, b = span
    return text[:a], text[a:b], text[b:]


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, with a visible marker of what was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters not shown]"
