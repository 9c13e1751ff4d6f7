"""MotionBench (arXiv 2501.02955): fine-grained motion MC, 6 categories (MR, LM, CM, MO, AO, RC); accuracy.
EasyVideoR1's file has 4,018 rows (its report says 3,715).

Official protocol (reference: lmms-eval 0.7.3 `tasks/motionbench/utils.py`): the prompt "<question>\\nA. …\\n…\\nAnswer
with only the option letter (A, B, C, D, E, or F)." (whitespace in question and options collapsed, as the task's
document processing does); `_extract_choice_letter` on the response after reasoning-tag stripping: the text after the
last `</think>`, upper-cased, answer prefixes deleted, then three stages — a standalone A-F (`\\b`, so "答案是A" does
not match: 是 is a word character), else a letter followed by ".", ")" or ":", else the first A-F anywhere;
accuracy, answered rate and per question type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.aggregation import Result, answered, micro, pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import capped
from evr1_eval.api.loading import RowView
from evr1_eval.api.references import lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import letter_rule
from evr1_eval.types import Sample, ScoredSample

_PREFIXES = ("THE BEST ANSWER IS", "THE CORRECT ANSWER IS", "THE ANSWER IS", "BEST ANSWER:", "ANSWER:")
_STANDALONE = re.compile(r"\b([A-F])\b")
_MARKED = re.compile(r"([A-F])[.):]")
_ANY = re.compile(r"[A-F]")
_SPACES = re.compile(r"\s+")


def _ws(text: str) -> str:
    return _SPACES.sub(" ", (text or "").strip())


def official_doc(view: RowView) -> dict[str, Any]:
    return {
        "question": _ws(view.question),
        "options": [{"label": k, "text": _ws(t)} for k, t in view.options if _ws(t)],
        "answer": view.truth,
        "question_type": view.groups.get("category", "Unknown"),
    }


def official_prompt(doc: Mapping[str, Any]) -> str:
    block = "\n".join(f"{o['label']}. {o['text']}" for o in doc["options"] if o["label"] and o["text"])
    question = str(doc["question"]).strip()
    body = f"{question}\n{block}" if block else question
    return f"{body}\nAnswer with only the option letter (A, B, C, D, E, or F).".strip()


def extract_choice_letter(text: str) -> str:
    candidate = text.split("</think>")[-1].strip().upper()
    if not candidate:
        return ""
    for prefix in _PREFIXES:
        candidate = candidate.replace(prefix, "")
    for pattern in (_STANDALONE, _MARKED, _ANY):
        m = pattern.search(candidate)
        if m:
            return m.group(1) if m.groups() else m.group(0)
    return ""


def extract(sample: Sample, response: str) -> str:
    return extract_choice_letter(capped(response))


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    primary, metrics, notes = micro(bench, rows)
    metrics["answered_rate"] = pct(float(r.error is None and answered(r)) for r in rows)
    return primary, metrics, notes


BENCHMARK = register(
    Benchmark(
        name="motionbench",
        title="MotionBench (dev)",
        problem_types=("multiple_choice",),
        group_fields={"category": ("question_type", "original_question_type", "category")},
        reference=lmms_eval("motionbench"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=letter_rule(extract, "motionbench-lmms"),
        reasoning_blocks="strip",
        aggregator=aggregate,
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
    )
)
