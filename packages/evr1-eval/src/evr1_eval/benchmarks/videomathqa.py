"""VideoMathQA (arXiv 2506.05349): 420 MC-5 questions, plus multi-binary (MBin) pairs marked by `mbinary_id`.

Official protocol (reference: lmms-eval 0.7.3 `tasks/videomathqa/utils.py` + `videomathqa_mcq.yaml` /
`videomathqa_mbin.yaml`): the prompt "Select the best answer … Respond with the letter (A, B, C, D or E) of the
correct option.\\n<question>\\n<options>\\n\\nAnswer with the option's letter (A, B, C, D or E) from the given choices
directly." ("(A or B)" for the 2-option pairs); Video-MME's old `extract_characters_regex` over A-E — always A-E, also
on the 2-option pairs — on the response after reasoning-tag stripping; an unparsable answer counts wrong. MCQ
accuracy over the single questions; MBin accuracy: a question counts only if ALL its binary pairs are right. Both per
video length and category. EasyVideoR1 mixes both in one file and averages items (neither number;
`item_micro_unofficial` here). In EasyVideoR1's file each question's 4 pairs reuse the question's `problem_id` and
carry a unique `mbinary_id`: pair ids become `<problem_id>#<mbinary_id>` and pairs are grouped by `problem_id`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.aggregation import Result, by_group, pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import ScanEnd, capped, first_letter_after_prefixes
from evr1_eval.api.loading import RowView
from evr1_eval.api.references import lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import letter_rule
from evr1_eval.benchmarks.videomme import PREFIXES_4E7566D
from evr1_eval.types import Sample, ScoredSample

#: The old Video-MME prefix list, missing commas included ("The best option isThe correct option is").
PREFIXES = PREFIXES_4E7566D

#: A response over `MAX_SCAN` is cut to its head: the rule takes the first letter after the prefixes.
ANSWER_END: ScanEnd = "head"


def official_doc(view: RowView) -> dict[str, Any]:
    return {
        "question": view.question,
        "options": [f"{k}. {t}" for k, t in view.options],
        "answer": view.truth,
        "binary": "mbin" in view.groups,
    }


def official_prompt(doc: Mapping[str, Any]) -> str:
    two = len(doc["options"]) == 2
    letters = "A or B" if two else "A, B, C, D or E"
    instruction = (
        "Select the best answer to the following multiple-choice question based on the video. "
        f"Respond with the letter ({letters}) of the correct option."
    )
    post = "(A or B)" if doc.get("binary") else "(A, B, C, D or E)"
    question = doc["question"] + "\n" + "\n".join(doc["options"])
    return f"{instruction}\n{question}\n\nAnswer with the option's letter {post} from the given choices directly."


def extract(sample: Sample, response: str) -> str:
    return first_letter_after_prefixes(capped(response, ANSWER_END), PREFIXES, "ABCDE") or ""


def mbin_question(mbinary_id: str) -> str:
    """Fallback when a pair has no question id: its `mbinary_id` minus a trailing `_k`/`-k` pair index."""
    return re.sub(r"[_-]\d$", "", mbinary_id)


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    """MCQ accuracy over single questions; MBin accuracy = a question is correct only if ALL its binary pairs are."""
    mcq = [r for r in rows if "mbin" not in r.groups]
    mbin: dict[str, list[ScoredSample]] = defaultdict(list)
    for r in rows:
        if "mbin" in r.groups:
            mbin[r.groups.get("question") or mbin_question(r.groups["mbin"])].append(r)
    metrics = {
        "mcq_accuracy": pct(r.score for r in mcq),
        "mbin_accuracy": pct(float(all(r.score >= 1.0 for r in m)) for m in mbin.values()),
        "item_micro_unofficial": pct(r.score for r in rows),
    }
    for name in ("category", "length"):
        for value, members in by_group(mcq, name).items():
            metrics[f"{name}/{value}"] = pct(r.score for r in members)
        per_value: dict[str, list[float]] = defaultdict(list)
        for pairs in mbin.values():  # a question's breakdown values are its first pair's (as the reference reads)
            if name in pairs[0].groups:
                per_value[pairs[0].groups[name]].append(float(all(r.score >= 1.0 for r in pairs)))
        for value, flags in sorted(per_value.items()):
            metrics[f"mbin/{name}/{value}"] = pct(flags)
    notes = [f"{len(mcq)} MCQ rows, {len(mbin)} multi-binary questions"]
    return ("mcq_accuracy" if mcq or not mbin else "mbin_accuracy"), metrics, notes


BENCHMARK = register(
    Benchmark(
        name="videomathqa",
        title="VideoMathQA",
        problem_types=("multiple_choice",),
        id_suffix_field="mbinary_id",
        group_fields={
            "mbin": ("mbinary_id",),
            "question": ("problem_id", "question_id"),
            "category": ("category",),
            "length": ("length",),
        },
        reference=lmms_eval("videomathqa"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=letter_rule(extract, "videomathqa-extract_characters_regex"),
        reasoning_blocks="strip",
        answer_end=ANSWER_END,
        aggregator=aggregate,
    )
)
