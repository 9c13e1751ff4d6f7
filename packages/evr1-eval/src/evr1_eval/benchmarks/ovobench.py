"""OVO-Bench (arXiv 2501.05510): streaming video QA. Backward (EPM, ASI, HLD) and real-time (STU, OJR, ATR, ACR, OCR,
FPD) tasks are MC; forward tasks are REC (counting), SSR and CRR (yes/no), one row per test point in EasyVideoR1's file.

Official protocol (reference: JoeLeelyf/OVO-Bench `utils/OVOBenchScore.py`@c34093f, prompts from its `constant.py`;
lmms-eval 0.7.3 ships the same scorer): backward / real-time: 1 when the ground-truth letter occurs anywhere in the
response (case-sensitive substring: "A" inside "Answer" counts); REC: all digits of the response concatenated equal
the count ("3 or 4" reads "34"); SSR / CRR: the response is exactly "Y" / "N" (not stripped), else the case-sensitive
"Yes" / "No" occurs in it ("I KNOW" does not contain "No"; "Not sure" does). Aggregation: per-task accuracy -> the mean
per category (backward, realtime, forward) -> overall = the mean of the category means.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.aggregation import Result, by_group, pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import capped
from evr1_eval.api.loading import RowView
from evr1_eval.api.references import OVOBENCH
from evr1_eval.api.registry import register
from evr1_eval.types import Outcome, Sample, ScoredSample

_BR = (
    "\nQuestion: {}\nOptions:\n{}\n\nRespond only with the letter corresponding to your chosen option (e.g., A, B, C). "
    "\nDo not include any additional text or explanation in your response.\n"
)
_REC = (
    "\nYou're watching a video in which people may perform a certain type of action repetively. \n"
    "The person performing this kind of action are referred to as 'they' in the following statement.\n"
    "You're task is to count how many times have different people in the video perform this kind of action in total.\n"
    "One complete motion counts as one. \nNow, answer the following question: {}\n"
    "Provide your answer as a single number (e.g., 0, 1, 2, 3…) indicating the total count.\n"
    "Do not include any additional text or explanation in your response.\n"
)
_SSR = (
    "\nYou're watching a tutorial video which contain a sequential of steps. \n"
    "The following is one step from the whole procedures: \n{}\n"
    "Your task is to determine if the man or woman in the video is currently performing this step.\n"
    "Answer only with “Yes” or “No”.\nDo not include any additional text or explanation in your response.\n"
)
_CRR = (
    "\nYou're responsible of answering questions based on the video content. \n"
    "The following question are relevant to the latest frames, i.e. the end of the video.\n{}\n"
    "Decide whether existing visual content, especially latest frames, i.e. frames that near the end of the video, "
    "provide enough information for answering the question.\nAnswer only with “Yes” or “No”.\n"
    "Do not include any additional text or explanation in your response.\n"
)
_DIGITS = re.compile(r"\d+")


def official_doc(view: RowView) -> dict[str, Any]:
    return {
        "task": view.groups.get("task", ""),
        "question": view.question,
        "options": [t for _, t in view.options],
        "truth": str(view.truth),
    }


def official_prompt(doc: Mapping[str, Any]) -> str:
    if doc["options"]:
        options = "; ".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(doc["options"])) + ";"
        return _BR.format(doc["question"], options)
    template = {"REC": _REC, "SSR": _SSR, "CRR": _CRR}.get(str(doc["task"]), _CRR)
    return template.format(doc["question"])


def rule(sample: Sample, response: str) -> Outcome:
    text = capped(response)
    gt = str(sample.ground_truth)
    if sample.problem_type == "numerical":  # REC: repetition counting
        digits = "".join(_DIGITS.findall(text))
        return Outcome(score=float(digits == gt), extracted=digits, details={"scorer": "ovobench-rec"})
    if sample.problem_type == "boolean":  # SSR / CRR
        word = "Yes" if gt.lower() == "yes" else "No"
        if text in ("Y", "N"):
            return Outcome(
                score=float((text == "Y") == (word == "Yes")), extracted=text, details={"scorer": "ovobench-yn"}
            )
        hit = word in text
        return Outcome(score=float(hit), extracted=word if hit else None, details={"scorer": "ovobench-yn"})
    hit = gt in text
    return Outcome(score=float(hit), extracted=gt if hit else None, details={"scorer": "ovobench-substring"})


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    """Per-task accuracy -> mean per category (backward, realtime, forward) -> overall = mean of category means."""
    metrics: dict[str, float] = {}
    categories: dict[str, list[float]] = defaultdict(list)
    for task, members in by_group(rows, "task").items():
        acc = pct(r.score for r in members)
        metrics[f"task/{task}"] = acc
        categories[members[0].groups.get("category", "?")].append(acc)
    cat_means = {c: sum(v) / len(v) for c, v in sorted(categories.items())}
    metrics.update({f"category/{c}": v for c, v in cat_means.items()})
    metrics["overall"] = sum(cat_means.values()) / len(cat_means) if cat_means else float("nan")
    return "overall", metrics, [f"overall = mean of {len(cat_means)} category means (official: 3)"]


BENCHMARK = register(
    Benchmark(
        name="ovobench",
        title="OVO-Bench",
        problem_types=("multiple_choice", "numerical", "boolean"),
        # OVO-Bench's own names: REC = repetition counting (a count), SSR / CRR = yes / no questions.
        type_aliases={"REC": "repetition_counting", "SSR": "boolean", "CRR": "boolean"},
        group_fields={"task": ("ovo_task", "task"), "category": ("ovo_category", "category")},
        reference=OVOBENCH,
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=rule,
        # Forward rows hold a bare step / activity / question: say what is asked in the evr1 / generic prompts.
        question_templates={
            "SSR": 'This video shows a procedure. Is the person performing this step right now: "{question}"?',
            "CRR": 'Has the video shown enough so far to answer this question: "{question}"?',
            "REC": "{question} Count the repetitions seen so far.",
        },
        aggregator=aggregate,
    )
)
