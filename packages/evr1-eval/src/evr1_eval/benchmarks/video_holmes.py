"""Video-Holmes (arXiv 2505.21374): 1,837 MC-6 questions on 270 films, 7 question types; accuracy overall and per type.

Official protocol (reference: lmms-eval 0.7.3 `tasks/video_holmes/utils.py`): the prompt "Question: <q>\\nA. …\\n…\\nSelect
the best answer to the following multiple-choice question based on the video. Respond with only the letter (A, B, C,
D, E, or F) of the correct option."; MMMU's `parse_multi_choice_response` on the response after reasoning-tag
stripping: "(X)", else "X " — a letter followed by a space, nothing required before it, so "答案是C " reads C — else
"X.", else (answers over 5 words) an option's text; several candidates -> the last marker (ties: the first); none ->
a random option (here seeded by the sample id). The `qwen3_vl` variant is the task's `qwen3_vl` prompt ("Question:
<q>\\n<options>\\nAnswer with the option letter only."). The reference reports 0.0 for a question type without rows;
here such a type is left out of the breakdown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import capped, mmmu_parse_multi_choice
from evr1_eval.api.loading import RowView
from evr1_eval.api.references import lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import doc_of, letter_rule
from evr1_eval.types import Sample

_INSTRUCTION = (
    "Select the best answer to the following multiple-choice question based on the video. "
    "Respond with only the letter (A, B, C, D, E, or F) of the correct option."
)


def official_doc(view: RowView) -> dict[str, Any]:
    doc: dict[str, Any] = {"Question": view.question, "Options": dict(view.options), "Answer": view.truth}
    if view.groups.get("type") is not None:
        doc["Question Type"] = view.groups["type"]
    return doc


def _options(doc: Mapping[str, Any]) -> str:
    return "\n".join(f"{k}. {doc['Options'][k]}" for k in sorted(doc["Options"]))


def official_prompt(doc: Mapping[str, Any]) -> str:
    return f"Question: {doc['Question']}\n{_options(doc)}\n{_INSTRUCTION}"


def qwen3_vl_prompt(doc: Mapping[str, Any]) -> str:
    return f"Question: {doc['Question']}\n{_options(doc)}\nAnswer with the option letter only."


def extract(sample: Sample, response: str) -> str:
    options: Mapping[str, str] = doc_of(sample)["Options"]
    return mmmu_parse_multi_choice(capped(response), sorted(options), options, sample.id).upper()


BENCHMARK = register(
    Benchmark(
        name="video_holmes",
        title="Video-Holmes",
        problem_types=("multiple_choice",),
        group_fields={"type": ("question_type", "Question Type", "type", "task")},
        reference=lmms_eval("video_holmes"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        prompt_variants={"qwen3_vl": qwen3_vl_prompt},
        scorer=letter_rule(extract, "mmmu-parse_multi_choice_response"),
        reasoning_blocks="strip",
        aliases=("holmes",),
    )
)
