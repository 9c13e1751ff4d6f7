"""Ground-truth parsing as a typed public API: one call turns a dataset's (problem type, ground truth, extras) into
the canonical type, the scorer's parsed truth and its canonical text — or a `GroundTruthError` naming what is wrong.

This is what evr1-eval's annotation loader and `evr1-rewards validate` call, and what the router does before every
score, so a row that loads is a row that scores. Wrappers (`<answer>…</answer>`, Charades-STA's `<think>{…}</think>`,
`<[PLHD…]>` placeholders) are removed first; extras whose value is `None` count as absent (see `evr1_rewards.truth`).

>>> from evr1_rewards import parse_ground_truth
>>> gt = parse_ground_truth("multiple choice", "<answer>(b)</answer>", {"options": ["A. red", "B. blue"]})
>>> gt.problem_type, gt.text
('multiple_choice', 'B')
>>> parse_ground_truth("numerical", "1,250").text
'1250'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from evr1_rewards.registry import get_scorer, normalize_problem_type
from evr1_rewards.truth import clean_extras, truth_text
from evr1_rewards.types import FormatsTruth

T = TypeVar("T")


@dataclass(frozen=True)
class GroundTruth(Generic[T]):
    """A parsed ground truth.

    Attributes:
        problem_type: the canonical type name (`evr1_rewards.vocabulary`).
        value: what the type's scorer compares answers against (its `parse_truth` result).
        text: the canonical text of the truth (`"B"`, `"1250"`, `'{"time": [1.0, 5.0]}'`); parsing it again gives
            the same `value`. For types without a canonical form (code tests, masks, free text), the unwrapped text.
        extras: the extras it was parsed with, `None` values removed.
    """

    problem_type: str
    value: T
    text: str
    extras: Mapping[str, object] = field(default_factory=dict)


def _fallback_text(ground_truth: object) -> str:
    if isinstance(ground_truth, (str, bytes, int, float)) and not isinstance(ground_truth, bool):
        return truth_text(ground_truth)
    try:
        return json.dumps(ground_truth, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(ground_truth)


def parse_ground_truth(
    problem_type: str,
    ground_truth: object,
    extras: Mapping[str, object] | None = None,
    *,
    aliases: Mapping[str, str] | None = None,
) -> GroundTruth[Any]:
    """Parse one ground truth for its problem type (aliases and spellings accepted, see `normalize_problem_type`).

    Raises:
        UnknownProblemTypeError: the type is not registered (AmbiguousProblemTypeError for names such as "rec").
        GroundTruthError: the ground truth (or an extras setting it depends on) cannot be read for that type.
    """
    key = normalize_problem_type(problem_type, aliases=aliases)
    scorer = get_scorer(key)
    ex = clean_extras(extras)
    value = scorer.parse_truth(ground_truth, ex)
    text = scorer.format_truth(value) if isinstance(scorer, FormatsTruth) else _fallback_text(ground_truth)
    return GroundTruth(problem_type=key, value=value, text=text, extras=ex)
