"""LVBench (arXiv 2406.08035): 1,549 MC-4 questions on 103 hour-long videos; accuracy.

Official protocol (reference: lmms-eval 0.7.3 `tasks/lvbench/utils.py` + `lvbench.yaml`): the prompt "<question>\\n(A) …
\\n…\\nAnswer the question with the option letter" (the yaml's post-prompt, without a final period); the shared
`extract_mcq_answer` over A-D on the response after reasoning-tag stripping, compared with the answer letter; the
mean over items. EasyVideoR1's file has 1,492 rows (4 videos missing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evr1_eval.api.adapters import official_mc
from evr1_eval.api.base import Benchmark
from evr1_eval.api.loading import LETTERS, RowView
from evr1_eval.api.references import lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import letter_rule
from evr1_eval.benchmarks.mlvu import extract  # the same rule: `extract_mcq_answer` over A-D


def official_doc(view: RowView) -> dict[str, Any]:
    return {"question": view.question, "options": [t for _, t in view.options], "answer": view.truth}


def official_prompt(doc: Mapping[str, Any]) -> str:
    options = "\n".join(f"({LETTERS[i]}) {opt}" for i, opt in enumerate(doc["options"]))
    question = str(doc["question"]) + ("\n" + options if doc["options"] else "")
    return question + "\nAnswer the question with the option letter"


BENCHMARK = register(
    Benchmark(
        name="lvbench",
        title="LVBench",
        problem_types=("multiple_choice",),
        id_fields=("uid", "question_id", "id"),
        group_fields={"question_type": ("question_type", "original_question_type")},
        adapter=official_mc,
        reference=lmms_eval("lvbench"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=letter_rule(extract, "lmms-extract_mcq_answer"),
        reasoning_blocks="strip",
    )
)
