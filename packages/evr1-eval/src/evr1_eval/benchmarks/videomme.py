"""Video-MME (w/o subtitles; arXiv 2405.21075): 900 videos, 2,700 MC-4 questions, short/medium/long.

Official protocol (reference: thanku-all/parse_answer `eval_your_results.py`@afd52cf, the script Video-MME's README
links to): the README's prompt ("Select the best answer … Respond with only the letter (A, B, C, or D) of the correct
option.\\n<question>\\n<options>\\nThe best answer is:"); `extract_characters_regex` on the raw response (answer prefixes
deleted case-sensitively, two of them concatenated by missing commas; then the FIRST A-D anywhere, so "Answer: B"
reads as A); accuracy over *answered* questions only (an unparsable answer leaves the denominator), per duration,
domain, sub-category and task type. `accuracy_strict` counts every question. The `qwen3_vl` prompt variant is
Qwen3-VL's own Video-MME prompt (QwenLM/Qwen3-VL `evaluation/VideoMME/dataset_utils.py`@9658872).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.adapters import official_mc
from evr1_eval.api.aggregation import Result, answered, by_group, group_names, pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import first_letter_after_prefixes
from evr1_eval.api.loading import RowView
from evr1_eval.api.references import VIDEOMME
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import letter_rule
from evr1_eval.types import Sample, ScoredSample

#: `extract_characters_regex`'s prefix list as Video-MME first shipped it (evaluation/eval_your_results.py@4e7566d;
#: VideoMathQA's task file copies it). Two commas are missing in the reference, so "The best option is" + "The
#: correct option is" and "Best answer:" + "Best option:" are single prefixes.
PREFIXES_4E7566D = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option isThe correct option is",
    "Best answer:Best option:",
)
#: The list at afd52cf (the script the README links now), in order: four prefixes added.
PREFIXES = (*PREFIXES_4E7566D, "Answer:", "Option:", "The correct answer", "The correct option")
_INSTRUCTION = (
    "Select the best answer to the following multiple-choice question based on the video. "
    "Respond with only the letter (A, B, C, or D) of the correct option."
)


def official_doc(view: RowView) -> dict[str, Any]:
    return {"question": view.question, "options": [f"{k}. {t}" for k, t in view.options], "answer": view.truth}


def official_prompt(doc: Mapping[str, Any]) -> str:
    return f"{_INSTRUCTION}\n{doc['question']}\n" + "\n".join(doc["options"]) + "\nThe best answer is:"


def qwen3_vl_prompt(doc: Mapping[str, Any]) -> str:
    """QwenLM/Qwen3-VL evaluation/VideoMME/dataset_utils.py `build_videomme_prompt` (no subtitles)."""
    return f"{_INSTRUCTION}\nQuestion: {doc['question']}\n" + "\n".join(doc["options"]) + "\nThe best answer is:"


def extract(sample: Sample, response: str) -> str:
    """The official regex on the raw response; "" when no A-D occurs (the item is then unanswered). The WHOLE response
    is read, never a cut (the script takes the first letter, which a tail would lose): the scan is linear."""
    return first_letter_after_prefixes(response, PREFIXES, "ABCD") or ""


def answered_only(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    """Accuracy over questions whose answer could be parsed (`accuracy`), and over all questions (`accuracy_strict`).

    The error-row policy: a row whose generation or scoring failed stays in both denominators, counted wrong (a
    failure is never a free pass). The official script never sees such a row as an error: it reads the empty response
    a failed request leaves, finds no letter and drops the question from its denominator. So when error rows are
    present, `accuracy_errors_dropped` is that number (what the official script prints for the same run) and a note
    says how many rows make the difference."""
    kept = [r for r in rows if answered(r)]
    metrics = {
        "accuracy": pct(r.score for r in kept),
        "accuracy_strict": pct(r.score for r in rows),
        "answered_rate": 100.0 * len(kept) / len(rows) if rows else float("nan"),
    }
    for name in group_names(bench):
        for value, members in by_group(rows, name).items():
            metrics[f"{name}/{value}"] = pct(r.score for r in members if answered(r))
            metrics[f"{name}/{value}/strict"] = pct(r.score for r in members)
    notes = ["accuracy divides by answered questions only (official script); accuracy_strict by all"]
    errors = sum(r.error is not None for r in rows)
    if errors:
        metrics["accuracy_errors_dropped"] = pct(r.score for r in kept if r.error is None)
        notes.append(
            f"{errors} error row(s) count as wrong answers in accuracy (evr1-eval's policy: a failure is never a free "
            "pass); the official script, given their empty responses, leaves them out: accuracy_errors_dropped"
        )
    return "accuracy", metrics, notes


BENCHMARK = register(
    Benchmark(
        name="videomme",
        title="Video-MME",
        problem_types=("multiple_choice",),
        id_fields=("question_id", "qid", "id"),
        group_fields={
            "duration": ("duration",),
            "domain": ("domain",),
            "sub_category": ("sub_category",),
            "task_type": ("task_type",),
        },
        adapter=official_mc,
        reference=VIDEOMME,
        official_doc=official_doc,
        official_prompt=official_prompt,
        prompt_variants={"qwen3_vl": qwen3_vl_prompt},
        scorer=letter_rule(extract, "videomme-official"),
        answer_end="head",  # under --reasoning-tags strip: a response cut before stripping keeps its first letter
        aggregator=answered_only,
    )
)
