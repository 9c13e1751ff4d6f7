"""Boolean: yes/no/true/false as whole words in the extracted answer; the last declaration wins.

Whole words only: "I KNOW" is not "NO", "notably" is not "no". "yes or no" / "yes/no" names no answer. Chinese 是/否/对/错 count when they are the whole answer.
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
from evr1_rewards.vocabulary import BOOLEAN

_WORDS = re.compile(r"(?<![a-z0-9_])(yes|no|true|false)(?![a-z0-9_])")
_MAP = {"yes": "yes", "true": "yes", "no": "no", "false": "no"}
_ZH = {
    "是": "yes",
    "是的": "yes",
    "对": "yes",
    "正确": "yes",
    "否": "no",
    "不是": "no",
    "错": "no",
    "错误": "no",
    "不": "no",
}


_HEDGE = re.compile(
    r"\W{0,4}(?:either\s{1,3})?(yes|no|true|false)[\s,;/|&.?!]{0,4}(?:(?:or|and|maybe|perhaps|possibly)[\s,.?!]{1,4}){0,2}"
    r"(?:maybe\s{1,3}|perhaps\s{1,3})?(yes|no|true|false)\W{0,4}"
)
_ZH_HEDGE = frozenset({"是或否", "是否", "是或不是", "对或错", "是/否", "是不是"})


def is_hedge(text: str) -> bool:
    """Both answers at once with nothing between them: "yes or no", "yes/no", "true, false", "是或否"."""
    return _cleaned_is_hedge(clean_payload(tail(text, 4096)).strip().strip("。.!！*"))


def _cleaned_is_hedge(s: str) -> bool:
    if s in _ZH_HEDGE:
        return True
    m = _HEDGE.fullmatch(ascii_lower(s)) if len(s) <= 40 else None
    return m is not None and _MAP[m.group(1)] != _MAP[m.group(2)]


_TOKENS = {
    "yes": re.compile(r"(?<![a-z0-9_])(?:yes|true)(?![a-z0-9_])"),
    "no": re.compile(r"(?<![a-z0-9_])(?:no|false)(?![a-z0-9_])"),
}


def rejects_answer(text: str, value: object) -> bool:
    """The answer negates the verdict it names: "not yes", "I can't say yes", "yes is wrong" (0, not that verdict)."""
    return rejected(text, _TOKENS[str(value)])


def parse_yes_no(text: str) -> str | None:
    """'yes' / 'no' from an answer, or None (also for a hedge, see `is_hedge`)."""
    s = clean_payload(tail(text, 4096)).strip().strip("。.!！*")
    if s in _ZH:
        return _ZH[s]
    if _cleaned_is_hedge(s):
        return None
    words = _WORDS.findall(ascii_lower(s))
    return _MAP[words[-1]] if words else None


@register(BOOLEAN, answer_format="Yes or No")
class Boolean:
    """Yes/no match on whole words (last one wins)."""

    name = "boolean"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> str:
        text = truth_text(ground_truth)
        stripped = text.strip().lower()
        if stripped in ("1", "0"):
            return "yes" if stripped == "1" else "no"
        gold = parse_yes_no(text)
        if gold is None:
            raise GroundTruthError(f"boolean ground truth {text[:80]!r} is not yes/no/true/false")
        return gold

    def format_truth(self, truth: str) -> str:
        return truth

    def score(self, response: Response, truth: str, ctx: Context) -> Outcome:
        pred, source, parsed = first_parsed(response, parse_yes_no, is_hedge, rejects_answer)
        return Outcome(1.0 if pred == truth else 0.0, parsed, {"pred": pred or "", "source": source})
