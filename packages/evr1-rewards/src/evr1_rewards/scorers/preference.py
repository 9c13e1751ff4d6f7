"""Preference (LLaVA-Critic style): "Response 1" / "Response 2" / "Tie" label match.

An answer that names both responses is read by its verdict ("Response 2 is better than Response 1" → 2), never by
substring order (EasyVideoR1 reads that sentence as 1).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response, ascii_lower, clean_payload, rejected, tail
from evr1_rewards.registry import register
from evr1_rewards.scorers._common import first_parsed
from evr1_rewards.truth import truth_text
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import PREFERENCE

_LABELS = {
    "1": "1", "response 1": "1", "response1": "1", "response a": "1", "a": "1", "first": "1", "the first": "1",
    "first response": "1", "2": "2", "response 2": "2", "response2": "2", "response b": "2", "b": "2",
    "second": "2", "the second": "2", "second response": "2", "tie": "tie", "0": "tie", "equal": "tie",
    "both": "tie", "equally good": "tie", "same": "tie", "draw": "tie",
}  # fmt: skip
_MENTION = re.compile(
    r"(?<![a-z0-9])(?:response|answer|output)[ \t]{0,2}(?:#[ \t]?)?([12ab])(?![a-z0-9])|(?<![a-z])(tie)(?![a-z])"
)
_VERDICT = re.compile(
    r"(?<![a-z0-9])(?:response|answer|output)[ \t]{0,2}(?:#[ \t]?)?([12ab])(?![a-z0-9])[ \t]{0,3}(?:is|was|seems|appears)"
    r"[ \t]{0,3}(?:clearly[ \t]{0,3}|much[ \t]{0,3}|slightly[ \t]{0,3}|the[ \t]{0,3})?(?:better|superior|preferred|preferable|stronger|more)"
    r"|(?:prefer|choose|pick|select|favou?r)[ \t]{0,3}(?:the[ \t]{0,3})?(?:response|answer|output)[ \t]{0,2}(?:#[ \t]?)?([12ab])(?![a-z0-9])"
)
_NORM = {"a": "1", "b": "2", "1": "1", "2": "2", "tie": "tie"}


def parse_label(text: str) -> str | None:
    """'1', '2' or 'tie' from an answer, or None when it names no single verdict."""
    s = ascii_lower(clean_payload(tail(text, 4096))).strip().strip(".!*。 ")
    if s in _LABELS:
        return _LABELS[s]
    verdicts = _VERDICT.findall(s)  # the last verdict wins
    if verdicts:
        return _NORM[verdicts[-1][0] or verdicts[-1][1]]
    seen = {_NORM[m.group(1) or m.group(2)] for m in _MENTION.finditer(s)}
    return seen.pop() if len(seen) == 1 else None


_TEXT = {"1": "Response 1", "2": "Response 2", "tie": "Tie"}
_TOKENS = {
    v: re.compile(
        rf"(?:response|answer|output)[ \t]{{0,2}}(?:#[ \t]?)?(?:{v}|{ab})(?![a-z0-9])|(?<![a-z]){nth}(?![a-z])"
    )
    for v, ab, nth in (("1", "a", "first"), ("2", "b", "second"))
} | {"tie": re.compile(r"(?<![a-z])(?:tie|equal|same|both|draw)(?![a-z])")}


def rejects_answer(text: str, label: object) -> bool:
    """The answer rejects the response it names: "Response 2 is worse", "not Response 1" (0, not that label)."""
    return rejected(text, _TOKENS[str(label)])


@register(PREFERENCE, answer_format='"Response 1", "Response 2" or "Tie"')
class Preference:
    """Label match: Response 1 / Response 2 / Tie."""

    name = "preference"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> str:
        text = truth_text(ground_truth)
        label = parse_label(text)
        if label is None:
            raise GroundTruthError(f"preference ground truth {text[:80]!r} is not 'Response 1', 'Response 2' or 'Tie'")
        return label

    def format_truth(self, truth: str) -> str:
        return _TEXT[truth]

    def score(self, response: Response, truth: str, ctx: Context) -> Outcome:
        pred, source, parsed = first_parsed(response, parse_label, rejects=rejects_answer)
        return Outcome(1.0 if pred == truth else 0.0, parsed, {"pred": pred or "", "source": source})
