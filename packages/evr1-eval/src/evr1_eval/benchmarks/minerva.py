"""MINERVA (arXiv 2505.00681): 1,515 MC-5 questions on 223 videos; accuracy (the LLM-judged MiRA reasoning score is
optional and not computed). EasyVideoR1's file is a 1,431-row subset.

Official protocol (reference: lmms-eval 0.7.3 `tasks/minerva/utils.py`): the prompt "<question>\\nA. …\\n…\\nE. …\\nAnswer
with the option's letter from the given choices directly." (always five choices); `_extract_choice_letter` on the
response after reasoning-tag stripping: the LAST "answer|option (is|:) X" (case-insensitive, X in A-E), else answer
prefixes deleted and the LAST capital A-E anywhere, else a random letter of A-E (here seeded by the sample id);
accuracy, also per question type, split and category.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import capped, random_choice
from evr1_eval.api.loading import LETTERS, RowView
from evr1_eval.api.references import lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import doc_of
from evr1_eval.types import Outcome, Sample

OPTIONS = ("A", "B", "C", "D", "E")
_EXPLICIT = re.compile(r"(?:answer|option)\s*(?:is|:)\s*([ABCDE])", re.IGNORECASE)
_PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "Answer:",
    "Option:",
    "Therefore, the final answer is:",
)


def official_doc(view: RowView) -> dict[str, Any]:
    doc: dict[str, Any] = {f"answer_choice_{i}": text for i, (_, text) in enumerate(view.options[:5])}
    doc.update(question=view.question, answer_id=[k for k, _ in view.options].index(view.truth))
    for key in ("question_type", "split", "category"):
        if view.groups.get(key) is not None:
            doc[key] = view.groups[key]
    return doc


def official_prompt(doc: Mapping[str, Any]) -> str:
    choices = [str(doc.get(f"answer_choice_{i}", "")).strip() for i in range(5)]
    lines = "\n".join(f"{OPTIONS[i]}. {c}" for i, c in enumerate(choices))
    question = str(doc.get("question", "")).strip()
    return f"{question}\n{lines}\nAnswer with the option's letter from the given choices directly."


def extract_choice_letter(text: str) -> str:
    cleaned = text.strip()
    explicit = _EXPLICIT.findall(cleaned)
    if explicit:
        return str(explicit[-1]).upper()
    for prefix in _PREFIXES:
        cleaned = cleaned.replace(prefix, "")
    found = [ch for ch in cleaned if ch in "ABCDE"]
    return found[-1] if found else ""


def rule(sample: Sample, response: str) -> Outcome:
    doc = doc_of(sample)
    letter = extract_choice_letter(capped(response))
    pred = letter or random_choice(sample.id, OPTIONS)
    gold = LETTERS[int(doc["answer_id"])] if 0 <= int(doc["answer_id"]) < 5 else ""
    return Outcome(
        score=float(pred == gold), extracted=pred, details={"scorer": "minerva-lmms", "random_fallback": not letter}
    )


BENCHMARK = register(
    Benchmark(
        name="minerva",
        title="MINERVA",
        problem_types=("multiple_choice",),
        group_fields={
            "question_type": ("question_type", "reasoning_type"),
            "split": ("split",),
            "category": ("category",),
        },
        reference=lmms_eval("minerva"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=rule,
        reasoning_blocks="strip",
        notes=("MiRA reasoning score (LLM-judged) not computed",),
    )
)
