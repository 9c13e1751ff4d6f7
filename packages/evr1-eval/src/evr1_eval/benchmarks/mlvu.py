"""MLVU (arXiv 2406.04264), multiple-choice part (dev: 7 task types, 4 options; test: 9 task types, 6 options).

Official protocol (reference: lmms-eval 0.7.3 `tasks/mlvu/utils.py` + `mlvu_dev.yaml`/`mlvu_test.yaml`): the prompt
"<question>\\nOnly give the best option.\\nBest option: (" — the dataset's question text carries its options; rows
whose question does not are given them as "(A) …" lines (MLVU's own template); `extract_mcq_answer` over A-D only
(so E/F, the test split's 5th and 6th options, can never be read); M-Avg = the mean of per-task accuracies over the
split's FIXED task list (dev: anomaly_reco, count, ego, needle, order, plotQA, topic_reasoning; test adds needleQA,
sportsQA, tutorialQA and drops needle): a task with no rows counts 0. The split is the one whose task names the rows
use. `m_avg_tasks_present` divides by the tasks present instead — MLVU's own `choice_bench.py`
(JUNJIE99/MLVU@fd060c1) — and says so; both are reported when a task is missing. Rows without a task label are
outside M-Avg; EasyVideoR1's files carry none, so on them the summary reports the item mean and says why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.adapters import official_mc
from evr1_eval.api.aggregation import Result, breakdown, by_group, pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import capped, extract_mcq_answer
from evr1_eval.api.loading import RowView
from evr1_eval.api.references import MLVU_OWN, lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import letter_rule
from evr1_eval.types import Sample, ScoredSample

DEV_TASKS = ("anomaly_reco", "count", "ego", "needle", "order", "plotQA", "topic_reasoning")
TEST_TASKS = (
    "anomaly_reco",
    "count",
    "ego",
    "needleQA",
    "order",
    "plotQA",
    "sportsQA",
    "topic_reasoning",
    "tutorialQA",
)
_LETTERED_LINE = re.compile(r"\n\s*\(?[A-F][).]")


def official_doc(view: RowView) -> dict[str, Any]:
    question = view.question
    if view.options and not _LETTERED_LINE.search(question):
        question += "\n" + "\n".join(f"({k}) {t}" for k, t in view.options)
    return {"question": question, "answer": view.truth, "task_type": view.groups.get("task")}


def official_prompt(doc: Mapping[str, Any]) -> str:
    return f"{doc['question']}\nOnly give the best option.\nBest option: ("


def extract(sample: Sample, response: str) -> str:
    """`extract_mcq_answer` over A-D only (LVBench's rule too)."""
    return extract_mcq_answer(capped(response), ["A", "B", "C", "D"])


def split_tasks(present: set[str]) -> tuple[str, tuple[str, ...]]:
    """The split whose task list the rows use (test when any test-only task name occurs)."""
    test_only = set(TEST_TASKS) - set(DEV_TASKS)
    return ("test", TEST_TASKS) if present & test_only else ("dev", DEV_TASKS)


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    metrics = {"micro_accuracy": pct(r.score for r in rows)}
    breakdown(bench, rows, metrics)
    tasks = by_group(rows, "task")
    if not tasks:
        note = "no row has a task label: M-Avg (official) cannot be computed; reporting the item mean micro_accuracy"
        return "micro_accuracy", metrics, [note] if rows else []
    split, names = split_tasks(set(tasks))
    unknown = sorted(set(tasks) - set(names))
    per_task = {t: pct(r.score for r in tasks[t]) if t in tasks else 0.0 for t in names}
    metrics["m_avg"] = sum(per_task.values()) / len(names)
    present = [v for t, v in per_task.items() if t in tasks]
    metrics["m_avg_tasks_present"] = sum(present) / len(present) if present else float("nan")
    notes = [f"M-Avg over the {len(names)} tasks of MLVU {split} (lmms-eval)"]
    missing = [t for t in names if t not in tasks]
    if missing:
        notes.append(
            f"tasks without rows count 0 in m_avg (lmms-eval: {', '.join(missing)}); m_avg_tasks_present divides by "
            f"the {len(present)} tasks present, as MLVU's own script does ({MLVU_OWN})"
        )
    unlabelled = sum(1 for r in rows if "task" not in r.groups) + sum(len(tasks[t]) for t in unknown)
    if unlabelled:
        notes.append(
            f"{unlabelled} rows have no task of the {split} list {'(' + ', '.join(unknown) + ') ' if unknown else ''}and are outside M-Avg (the reference fails on them)"
        )
    return "m_avg", metrics, notes


BENCHMARK = register(
    Benchmark(
        name="mlvu",
        title="MLVU (MC)",
        problem_types=("multiple_choice",),
        group_fields={"task": ("question_type", "task_type", "task")},
        adapter=official_mc,
        reference=lmms_eval("mlvu"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=letter_rule(extract, "lmms-extract_mcq_answer"),
        reasoning_blocks="strip",
        aggregator=aggregate,
        aliases=("mlvu-test", "mlvu-dev"),
    )
)
