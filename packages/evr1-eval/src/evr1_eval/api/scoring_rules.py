"""Per-sample rules shared by several benchmarks: the evr1 protocol's rule (evr1-rewards in metric mode) and a
letter scorer built from an official extractor."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from evr1_eval.api.extractors import FEW_TAGS, LMMS_REASONING_TAGS, STRIP_SCAN, ScanEnd, capped, strip_reasoning
from evr1_eval.types import AnswerTags, Outcome, Sample
from evr1_rewards import Response, RewardResult, score

#: An official per-sample rule: (sample, response) -> Outcome (`Benchmark.scorer`).
Rule = Callable[[Sample, str], Outcome]


def jsonable(value: Any, depth: int = 0) -> Any:
    """A bounded, JSON-safe copy of scorer details (results rows must stay small and serialisable)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value if not isinstance(value, str) else value[:500]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth < 3 and isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in list(value.items())[:50]}
    if depth < 3 and isinstance(value, (list, tuple)):
        return [jsonable(v, depth + 1) for v in value[:50]]
    return repr(value)[:200]


def rewards_outcome(sample: Sample, response: str) -> Outcome:
    """The evr1 protocol: the scorer the trainer's reward uses, in metric mode, `.accuracy` as the score.
    Only the options are passed: annotation fields never become scorer settings (tolerances, conventions) by accident."""
    result = score(
        response,
        sample.ground_truth,
        sample.problem_type,
        options=list(sample.options) or None,
        mode="metric",
    )
    return reward_outcome(result, "evr1-rewards")


def reward_outcome(result: RewardResult, scorer: str) -> Outcome:
    """An evr1-rewards result as an Outcome: `.accuracy` the score, its details kept small and JSON-safe."""
    details = dict(result.details or {})
    extracted = details.get("pred", details.get("extracted"))
    return Outcome(
        score=float(result.accuracy),
        extracted=None if extracted is None else str(extracted)[:500],
        details={"scorer": scorer, "format": float(result.format), "rewards": jsonable(details)},
    )


def answer_tag_input(response: str, answer_tags: AnswerTags) -> str | None:
    """What the official rule reads instead of the whole response under `answer_tags="read"`: the final answer tag's
    content as evr1-rewards reads it (`evr1_rewards.Response.answer_tag`: the last complete, non-empty
    `<answer>…</answer>`, not one inside the reasoning when an answer follows `</think>`), the one definition training
    uses. None under "official", or when there is no such tag: the official extractor then reads the whole response."""
    if answer_tags != "read":
        return None
    return Response(capped(response)).answer_tag


def reasoning_scope(response: str, keep: ScanEnd = "tail") -> str:
    """The part of a response that reasoning-tag stripping reads: the whole response up to `MAX_SCAN`; beyond it, the
    end the rule reads (`keep`: "head" for rules that take the FIRST letter or token), or the tail when the response has
    an end tag (the answer follows the reasoning). Tag soup (over `STRIP_SCAN` characters with more than `FEW_TAGS`
    "<") is cut to its tail first: stripping is quadratic in the number of blocks."""
    has_end = any(end in response for _, end in LMMS_REASONING_TAGS)
    text = capped(response, "tail" if has_end else keep)
    if len(text) > STRIP_SCAN and text.count("<") > FEW_TAGS:
        text = capped(text, "tail", STRIP_SCAN)
    return text


def lmms_input(response: str, keep: ScanEnd = "tail") -> str:
    """What a task's `process_results` receives in lmms-eval's default pipeline: reasoning blocks removed, stripped
    (`reasoning_scope` says which part of a long response). `Benchmark.score` applies it before a rule whenever the
    reading strips reasoning blocks; rules never call it themselves."""
    return strip_reasoning(reasoning_scope(response, keep))


def has_reasoning_blocks(response: str, keep: ScanEnd = "tail") -> bool:
    """Whether lmms-eval's stripping changes `response` beyond its surrounding whitespace: a reasoning block to remove,
    or a bare end tag to cut at (the count `--reasoning-tags` reports)."""
    scope = reasoning_scope(response, keep)
    return strip_reasoning(scope) != scope.strip()


def doc_of(sample: Sample) -> Mapping[str, Any]:
    """The row in its official layout (`Benchmark.official_doc`, built at load time)."""
    doc = sample.extras.get("official_doc")
    if not isinstance(doc, Mapping):
        raise ValueError(f"sample {sample.id} has no official document (loaded by an older version?); load it again")
    return doc


def letter_rule(extract: Callable[[Sample, str], str], name: str) -> Rule:
    """A multiple-choice rule from an official extractor: 1 when the extracted letter equals the ground truth.
    `details["answered"]`: the extractor found a letter, for aggregations whose official denominator drops unanswered
    items. Non-MC rows of the same benchmark fall back to evr1-rewards."""

    def rule(sample: Sample, response: str) -> Outcome:
        if sample.problem_type != "multiple_choice":
            return rewards_outcome(sample, response)
        letter = extract(sample, response)
        return Outcome(
            score=float(bool(letter) and letter == sample.ground_truth),
            extracted=letter,
            details={"scorer": name, "answered": bool(letter)},
        )

    return rule
