"""Locate the extracted answer inside a response, so the page can highlight exactly what the scorer read."""

from __future__ import annotations

import re

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def answer_span(text: str, extracted: str | None) -> tuple[int, int] | None:
    """(start, end) of the answer in `text`, or None when it cannot be located.

    Order: the extracted string inside the last `<answer>...</answer>` block; else that block's content; else the
    last occurrence of the extracted string (case-insensitive) anywhere. Scorers read the last answer, so the last
    occurrence is the one that counted.
    """
    if not text:
        return None
    want = (extracted or "").strip()
    blocks = list(_ANSWER.finditer(text))
    if blocks:
        block = blocks[-1]
        inner = block.group(1)
        if want:
            pos = inner.lower().rfind(want.lower())
            if pos >= 0:
                start = block.start(1) + pos
                return start, start + len(want)
        if inner.strip():
            lead = len(inner) - len(inner.lstrip())
            return block.start(1) + lead, block.start(1) + len(inner.rstrip())
    if want:
        pos = text.lower().rfind(want.lower())
        if pos >= 0:
            return pos, pos + len(want)
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
