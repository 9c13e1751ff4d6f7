"""MVBench (arXiv 2311.17005): 20 tasks x 200 MC questions; the official metric is the mean accuracy.

Official protocol (reference: lmms-eval 0.7.3 `tasks/mvbench/utils.py`): the prompt "Question:<q>\\nOption:\\n(A) …\\n…
Only give the best option.\\n"; `mcq_acc` on the response after lmms-eval's default reasoning-tag stripping: "X. text"
gives X, otherwise punctuation is processed (the reference's `re.sub(…, re.UNICODE)` passes 32 as the *count*, so only
the first 32 periods go), the text is lower-cased and the first standalone a-e is the answer (the article "a" reads
as option A); the ground-truth letter goes through the same processing. Aggregation (`mvbench_aggregate_results`,
run per task): accuracy over rows whose response is not empty (`accuracy`, and `task/<name>` per task); `task_mean`
is the mean over tasks (the MVBench average); `accuracy_strict` counts every row. EasyVideoR1's file has no task
labels (breakdown by source dataset = the video's first folder) and is a 3,586-item subset without nturgbd/tvqa.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.adapters import official_mc
from evr1_eval.api.aggregation import Result, answered, breakdown, by_group, pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import ScanEnd, capped
from evr1_eval.api.loading import LETTERS, RowView, first_folder
from evr1_eval.api.references import lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import doc_of
from evr1_eval.types import Outcome, Sample, ScoredSample

_PUNCT = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!")
_COMMA_BETWEEN_DIGITS = re.compile(r"(\d)(\,)(\d)")
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")  # sic: "(?!<=" is a look-ahead, so every "." not before a digit
_LETTER_DOT = re.compile(r"^([A-E])\.\s*(.+)$", re.IGNORECASE)
_LETTER = re.compile(r"\b([A-E])\b", re.IGNORECASE)

#: A response over `MAX_SCAN` is cut to its head: `mcq_acc` takes the first standalone letter.
ANSWER_END: ScanEnd = "head"


def official_doc(view: RowView) -> dict[str, Any]:
    texts = [text for _, text in view.options]
    answer = texts[[k for k, _ in view.options].index(view.truth)]
    return {"question": view.question, "candidates": texts, "answer": answer}


def official_prompt(doc: Mapping[str, Any]) -> str:
    options = "".join(f"({LETTERS[i]}) {c}\n" for i, c in enumerate(doc["candidates"]))
    return f"Question:{doc['question']}\nOption:\n{options}Only give the best option.\n"


def _punctuation(text: str) -> str:
    out = text
    digits_comma = _COMMA_BETWEEN_DIGITS.search(text) is not None
    for p in _PUNCT:  # dropped when spaced or when digits are comma-grouped, else replaced by a space
        out = out.replace(p, "" if p + " " in text or " " + p in text or digits_comma else " ")
    return _PERIOD.sub("", out, count=32)


def mcq_process(answer: str) -> str:
    """`mcq_acc`'s inner `process`: an option letter when one is found, else the processed text."""
    m = _LETTER_DOT.match(answer.strip())
    if m:
        return m.group(1).upper()
    text = answer.replace("\n", " ").replace("\t", " ").strip()
    text = _punctuation(text).strip("'").strip('"').strip(")").strip("(").strip().lower()
    m = _LETTER.search(text)
    return m.group(1).upper() if m else text


def rule(sample: Sample, response: str) -> Outcome:
    doc = doc_of(sample)
    pred = capped(response, ANSWER_END)  # mcq_acc takes the first standalone letter
    gt = next(LETTERS[i] for i, c in enumerate(doc["candidates"]) if c == doc["answer"])
    extracted = mcq_process(pred)
    return Outcome(
        score=float(extracted == mcq_process(gt)),
        extracted=extracted[:200],
        details={"scorer": "mvbench-mcq_acc", "answered": pred != ""},
    )


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    kept = [r for r in rows if answered(r)]
    metrics = {"accuracy": pct(r.score for r in kept), "accuracy_strict": pct(r.score for r in rows)}
    tasks = {t: pct(r.score for r in m if answered(r)) for t, m in by_group(rows, "task").items()}
    metrics.update({f"task/{t}": v for t, v in tasks.items()})
    if tasks:
        metrics["task_mean"] = sum(tasks.values()) / len(tasks)
    breakdown(bench, kept, metrics)
    notes = ["accuracy leaves out empty responses (lmms-eval's aggregate); accuracy_strict counts them as wrong"]
    return ("task_mean" if tasks else "accuracy"), metrics, notes


BENCHMARK = register(
    Benchmark(
        name="mvbench",
        title="MVBench",
        problem_types=("multiple_choice",),
        group_fields={"task": ("task_type", "task")},
        derived_groups={"source": first_folder},
        adapter=official_mc,
        reference=lmms_eval("mvbench"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=rule,
        reasoning_blocks="strip",
        answer_end=ANSWER_END,
        aggregator=aggregate,
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
        notes=("EasyVideoR1's mvbench.json is a 3,586-item subset of the official 4,000",),
    )
)
