"""LongVideoBench val (arXiv 2407.15754): 1,337 MC questions with 4-5 options; accuracy by duration group and category.

Official protocol (reference: lmms-eval 0.7.3 `tasks/longvideobench/utils.py`): the prompt "<question>\\nA. …\\n…\\n
Answer with the option's letter from the given choices directly.\\n"; `parse_multi_choice_response` on the response
after reasoning-tag stripping: answer prefixes deleted, then the FIRST of A-E anywhere — always A-E, also on
4-option rows, so "Answer: D" reads as A and an "E" inside a word counts; no letter -> a random option of the row
(here seeded by the sample id). Overall accuracy = the instance-level mean, rounded to 5 decimals (of a fraction);
the same per `duration_group` and `question_category`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from typing import Any

from evr1_eval.api.adapters import official_mc
from evr1_eval.api.aggregation import micro, rounded_pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import ScanEnd, capped, first_letter_after_prefixes, random_choice
from evr1_eval.api.loading import LETTERS, RowView
from evr1_eval.api.references import lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import doc_of
from evr1_eval.types import Outcome, Sample

PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option is",
    "The correct option is",
    "Best answer:",
    "Best option:",
)

#: A response over `MAX_SCAN` is cut to its head: the rule takes the first letter after the prefixes.
ANSWER_END: ScanEnd = "head"


def official_doc(view: RowView) -> dict[str, Any]:
    texts = [t for _, t in view.options][:5]
    doc: dict[str, Any] = {f"option{i}": (texts[i] if i < len(texts) else "N/A") for i in range(5)}
    doc.update(
        question=view.question,
        correct_choice=[k for k, _ in view.options].index(view.truth),
        duration_group=view.groups.get("duration_group"),
        question_category=view.groups.get("category"),
    )
    return doc


def official_prompt(doc: Mapping[str, Any]) -> str:
    candidates = [doc[f"option{i}"] for i in range(5) if doc[f"option{i}"] != "N/A"]
    lines = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(candidates))
    return f"{doc['question']}\n{lines}\nAnswer with the option's letter from the given choices directly.\n"


def choices_of(doc: Mapping[str, Any]) -> list[str]:
    return [LETTERS[i] for i in itertools.takewhile(lambda i: doc[f"option{i}"] != "N/A", range(5))]


def rule(sample: Sample, response: str) -> Outcome:
    doc = doc_of(sample)
    letter = first_letter_after_prefixes(capped(response, ANSWER_END), PREFIXES, "ABCDE")
    drawn = letter is None
    pred = random_choice(sample.id, choices_of(doc)) if drawn else letter
    return Outcome(
        score=float(pred == LETTERS[int(doc["correct_choice"])]),
        extracted=pred,
        details={"scorer": "longvideobench-parse_multi_choice_response", "random_fallback": drawn},
    )


BENCHMARK = register(
    Benchmark(
        name="longvideobench",
        title="LongVideoBench (val)",
        problem_types=("multiple_choice",),
        group_fields={
            "duration_group": ("duration_group",),
            "category": ("question_category", "original_question_type"),
        },
        adapter=official_mc,
        reference=lmms_eval("longvideobench"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=rule,
        reasoning_blocks="strip",
        answer_end=ANSWER_END,
        aggregator=functools.partial(micro, measure=rounded_pct),  # `evaluate_longvideobench`: overall and per group
    )
)
