"""VSI-Bench (arXiv 2412.14171): 5,130 questions on 288 indoor scans, 8 tasks (4 numeric, 4 MC).

Official protocol (reference: vision-x-nyu/thinking-in-space `lmms_eval/tasks/vsibench/utils.py`@51e089c): the prompt
"These are frames of a video.\\n<question>\\nPlease answer the question using a single word or phrase." (numeric) or
"These are frames of a video.\\n<question>\\nOptions:\\n<options>\\nAnswer with the option's letter from the given
choices directly." (MC); the raw response's first space-separated token, trailing "." removed (`fuzzy_matching`);
MC by case-insensitive equality; numeric by MRA: the token as a float ("3 tables" -> 3, "three" -> unparsable -> 0),
and the mean over the thresholds `np.linspace(0.5, 0.95, 10)` of `|pred - gt| / gt <= 1 - threshold` (float64; the
ground truth is divided by as it is, so a negative one passes every threshold). Aggregation: per task mean, the three
object_rel_direction levels averaged into one task, overall = the unweighted mean over tasks x 100. A ground truth of
0 makes the reference raise ZeroDivisionError; here such a row is scored by exact equality and flagged. lmms-eval
0.7.3's copy reads numbers differently (`extract_number`: the first number or number word anywhere) — not the
reference. EasyVideoR1 reports MC and MRA micro means separately (kept as `mca_micro` / `mra_micro`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.adapters import vsibench_official
from evr1_eval.api.aggregation import Result, by_group, pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import ScanEnd, capped
from evr1_eval.api.loading import RowView
from evr1_eval.api.references import VSIBENCH
from evr1_eval.api.registry import register
from evr1_eval.types import Outcome, Sample, ScoredSample


def linspace(start: float, stop: float, num: int) -> tuple[float, ...]:
    """`numpy.linspace(start, stop, num)` in float64, operation for operation: `i * step + start` with
    `step = (stop - start) / (num - 1)`, the last point set to `stop` (numpy's endpoint rule)."""
    if num < 2:
        return (float(start),) if num == 1 else ()
    step = (stop - start) / (num - 1)
    return (*(float(i) * step + start for i in range(num - 1)), float(stop))


#: The reference's `np.linspace(.5, .95, int((.95 - .5) / .05 + 2))`: (0.95 - 0.5) / 0.05 + 2 = 10.999999999999998.
THRESHOLDS = linspace(0.5, 0.95, int((0.95 - 0.5) / 0.05 + 2))
DIRECTION = ("object_rel_direction_easy", "object_rel_direction_medium", "object_rel_direction_hard")


def mean_relative_accuracy(pred: float, target: float) -> float:
    """`mean_relative_accuracy(pred, target, .5, .95, .05)`: the share of thresholds with |p - t| / t <= 1 - θ."""
    rel = abs(pred - target) / target
    return sum(rel <= 1 - theta for theta in THRESHOLDS) / len(THRESHOLDS)


def fuzzy_matching(pred: str) -> str:
    return pred.split(" ")[0].rstrip(".").strip()


def to_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def official_doc(view: RowView) -> dict[str, Any]:
    mc = view.problem_type == "multiple_choice"
    return {
        "question": view.question,
        "options": [f"{k}. {t}" for k, t in view.options] if mc else None,
        "ground_truth": str(view.truth),
        "mc": mc,
    }


def official_prompt(doc: Mapping[str, Any]) -> str:
    pre = "These are frames of a video."
    if not doc["mc"]:
        return f"{pre}\n{doc['question']}\nPlease answer the question using a single word or phrase."
    options = "Options:\n" + "\n".join(doc["options"])
    return "\n".join(
        [pre, doc["question"], options, "Answer with the option's letter from the given choices directly."]
    )


#: A response over `MAX_SCAN` is cut to its head: the rule reads the first token.
ANSWER_END: ScanEnd = "head"


def rule(sample: Sample, response: str) -> Outcome:
    token = fuzzy_matching(capped(response, ANSWER_END))  # the first token
    truth = str(sample.ground_truth)
    if sample.problem_type == "multiple_choice":
        return Outcome(score=float(token.lower() == truth.lower()), extracted=token, details={"scorer": "vsibench-mca"})
    pred, target = to_float(token), to_float(truth)
    details: dict[str, Any] = {"scorer": "vsibench-mra", "parsed": pred is not None}
    if pred is None or target is None:
        return Outcome(score=0.0, extracted=token, details=details)
    if target == 0:
        details["gt_zero"] = "the reference raises ZeroDivisionError; scored by equality"
        return Outcome(score=float(pred == target), extracted=token, details=details)
    return Outcome(score=mean_relative_accuracy(pred, target), extracted=token, details=details)


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    tasks = {name: pct(r.score for r in members) for name, members in by_group(rows, "task").items()}
    levels = [tasks.pop(t) for t in DIRECTION if t in tasks]
    notes = []
    if levels:
        tasks["object_rel_direction"] = sum(levels) / len(levels)
        if len(levels) != len(DIRECTION):
            notes.append(
                "not all three object_rel_direction levels present (the reference fails): mean of those present"
            )
    metrics = {"overall": sum(tasks.values()) / len(tasks) if tasks else float("nan")}
    metrics.update({f"task/{k}": v for k, v in sorted(tasks.items())})
    metrics["mca_micro"] = pct(r.score for r in rows if r.problem_type == "multiple_choice")
    metrics["mra_micro"] = pct(r.score for r in rows if r.problem_type != "multiple_choice")
    notes.append(f"overall = mean of {len(tasks)} task scores (official: 8)")
    if len(tasks) != 8:
        notes.append("task count differs from the official 8: not comparable to published VSI-Bench overall")
    if any(r.details.get("gt_zero") for r in rows):
        notes.append("rows with a ground truth of 0 are scored by equality (the reference divides by it and fails)")
    return "overall", metrics, notes


BENCHMARK = register(
    Benchmark(
        name="vsibench",
        title="VSI-Bench",
        problem_types=("multiple_choice", "regression"),
        group_fields={"task": ("question_type", "original_question_type")},
        adapter=vsibench_official,
        reference=VSIBENCH,
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=rule,
        answer_end=ANSWER_END,
        aggregator=aggregate,
    )
)
