"""Official aggregations (research/benchmarks.md §1.2). Every metric is a percentage (0-100), like published tables.

`summarize` applies the two row policies shared by all benchmarks before the benchmark's own aggregator runs:
rows still waiting for an LLM judge are left out of every denominator and counted, and error rows count per the
benchmark's `error_policy` (by default as wrong answers, so a failed sample is never a free pass).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from evr1_eval.types import BenchmarkSummary, ScoredSample

if TYPE_CHECKING:
    from evr1_eval.benchmarks.base import Aggregator, Benchmark

Result = tuple[str, dict[str, float], list[str]]


def pct(values: Iterable[float]) -> float:
    vals = list(values)
    return 100.0 * math.fsum(vals) / len(vals) if vals else float("nan")


def by_group(rows: Sequence[ScoredSample], key: str) -> dict[str, list[ScoredSample]]:
    out: dict[str, list[ScoredSample]] = defaultdict(list)
    for row in rows:
        value = row.groups.get(key)
        if value is not None:
            out[value].append(row)
    return dict(sorted(out.items()))


def group_names(bench: Benchmark) -> list[str]:
    return [*bench.group_fields, *(g for g in bench.derived_groups if g not in bench.group_fields)]


def breakdown(bench: Benchmark, rows: Sequence[ScoredSample], metrics: dict[str, float]) -> None:
    """Per-group accuracy for every declared grouping key, as `<group>/<value>`."""
    for name in group_names(bench):
        for value, members in by_group(rows, name).items():
            metrics[f"{name}/{value}"] = pct(r.score for r in members)


def micro(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    """Accuracy over items (the official rule for most MC benchmarks), plus per-group breakdowns."""
    metrics = {"accuracy": pct(r.score for r in rows)}
    breakdown(bench, rows, metrics)
    return "accuracy", metrics, []


def macro(group: str, primary: str = "m_avg", *, fallback: str | None = None) -> Aggregator:
    """Mean of per-`group` accuracies (MLVU M-Avg); the item mean is reported beside it. With `fallback`, rows
    without any `group` label make the item mean the primary metric, with a note saying the official one is missing."""

    def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
        groups = by_group(rows, group)
        metrics = {"micro_accuracy": pct(r.score for r in rows)}
        if groups:
            metrics[primary] = pct(pct(r.score for r in m) / 100 for m in groups.values())
        breakdown(bench, rows, metrics)
        notes = []
        missing = sum(1 for r in rows if group not in r.groups)
        if missing and groups:
            notes.append(f"{missing} rows have no `{group}` and are outside {primary}")
        if rows and not groups and fallback is not None:
            notes.append(f"no row has a `{group}` label: {primary} (official) cannot be computed; reporting {fallback}")
            return fallback, metrics, notes
        return primary, metrics, notes

    return aggregate


def answered_only(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    """Video-MME official: accuracy over questions whose answer could be parsed (`accuracy`), and the strict
    accuracy over all questions (`accuracy_strict`). Error rows are never 'unanswered': they stay in both."""
    answered = [r for r in rows if r.error is not None or r.details.get("answered", True)]
    metrics = {
        "accuracy": pct(r.score for r in answered),
        "accuracy_strict": pct(r.score for r in rows),
        "answered_rate": 100.0 * len(answered) / len(rows) if rows else float("nan"),
    }
    for name in group_names(bench):
        for value, members in by_group(rows, name).items():
            kept = [r for r in members if r.error is not None or r.details.get("answered", True)]
            metrics[f"{name}/{value}"] = pct(r.score for r in kept)
            metrics[f"{name}/{value}/strict"] = pct(r.score for r in members)
    return (
        "accuracy",
        metrics,
        ["accuracy divides by answered questions only (official script); accuracy_strict by all"],
    )


def mvbench(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    """Item accuracy (official: 20 x 200, so it equals the task mean), the task mean when rows carry tasks, and the
    lmms-eval variant that leaves empty predictions out."""
    _, metrics, notes = micro(bench, rows)
    tasks = by_group(rows, "task")
    if tasks:
        metrics["task_mean"] = pct(pct(r.score for r in m) / 100 for m in tasks.values())
    answered = [r for r in rows if r.error is not None or r.details.get("answered", True)]
    metrics["accuracy_answered"] = pct(r.score for r in answered)
    notes.append("accuracy_answered excludes empty predictions like lmms-eval's aggregate")
    return "accuracy", metrics, notes


VSI_DIRECTION = ("object_rel_direction_easy", "object_rel_direction_medium", "object_rel_direction_hard")


def vsibench(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    """Per-task mean (MRA for numeric tasks, accuracy for MC), the three rel_direction levels averaged into one
    task, then the unweighted mean over tasks (8 on the full benchmark)."""
    tasks = {name: pct(r.score for r in m) for name, m in by_group(rows, "task").items()}
    levels = [tasks.pop(t) for t in VSI_DIRECTION if t in tasks]
    if levels:
        tasks["object_rel_direction"] = sum(levels) / len(levels)
    metrics = {"overall": sum(tasks.values()) / len(tasks) if tasks else float("nan")}
    metrics.update({f"task/{k}": v for k, v in sorted(tasks.items())})
    metrics["mca_micro"] = pct(r.score for r in rows if r.problem_type == "multiple choice")
    metrics["mra_micro"] = pct(r.score for r in rows if r.problem_type != "multiple choice")
    notes = [f"overall = mean of {len(tasks)} task scores (official: 8)"]
    if len(tasks) != 8:
        notes.append("task count differs from the official 8: not comparable to published VSI-Bench overall")
    return "overall", metrics, notes


def temporal_grounding(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    """Charades-STA: R@1 at IoU >= 0.3/0.5/0.7 and mIoU (per-sample score = tIoU; unparsable = 0)."""
    ious = [r.score for r in rows]
    metrics = {"miou": pct(ious)}
    for m in (0.3, 0.5, 0.7):
        metrics[f"r@{m}"] = pct(float(iou >= m) for iou in ious)
    return "miou", metrics, []


def stvg(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    """m_tIoU, m_vIoU, vIoU@0.3/0.5 (strict `>`); rows whose GT has no boxes are outside the vIoU metrics."""
    tious = [float(r.details.get("tiou") or 0.0) for r in rows]
    vrows = [r for r in rows if r.error is not None or r.details.get("viou") is not None]
    vious = [float(r.details.get("viou") or 0.0) for r in vrows]
    metrics = {"m_viou": pct(vious), "m_tiou": pct(tious)}
    for t in (0.3, 0.5):
        metrics[f"viou@{t}"] = pct(float(v > t) for v in vious)
    notes = [] if len(vrows) == len(rows) else [f"{len(rows) - len(vrows)} rows have no GT boxes: tIoU only"]
    return "m_viou", metrics, notes


def mbin_question(mbinary_id: str) -> str:
    """Fallback when a pair has no question id: its `mbinary_id` minus a trailing `_k`/`-k` pair index."""
    return re.sub(r"[_-]\d$", "", mbinary_id)


def videomathqa(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
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
    notes = [f"{len(mcq)} MCQ rows, {len(mbin)} multi-binary questions"]
    return "mcq_accuracy", metrics, notes


def ovobench(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
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


def summarize(bench: Benchmark, rows: Sequence[ScoredSample]) -> BenchmarkSummary:
    pending = [r for r in rows if r.needs_judge and r.error is None]
    errors = [r for r in rows if r.error is not None]
    kept = [r for r in rows if not (r.needs_judge and r.error is None)]
    if bench.error_policy == "exclude":
        kept = [r for r in kept if r.error is None]
    aggregate: Callable[[Benchmark, Sequence[ScoredSample]], Result] = bench.aggregator or micro
    notes: list[str] = list(bench.notes)
    primary, metrics, extra = aggregate(bench, kept)  # empty input gives NaN metrics, dropped below
    notes += extra
    if any("evr1" in r.details for r in kept):
        # Same rows, evr1-rewards' extraction instead of the official parser (not an official number).
        metrics["accuracy_evr1_extraction"] = pct(float(r.details.get("evr1") or 0.0) for r in kept)
    by_rule = sum(
        1
        for r in kept
        if r.error is None and r.problem_type in bench.judge_optional_types and r.details.get("scorer") != "llm-judge"
    )
    if by_rule:
        notes.append(f"{by_rule} rows scored by rule where the official protocol uses an LLM judge")
    if pending:
        notes.append(
            f"{len(pending)} of {len(rows)} rows need an LLM judge (official protocol) and were not scored: "
            "metrics cover the other rows only; score them with a judge (openai backend) for the official number"
        )
    if errors:
        how = "counted as wrong" if bench.error_policy == "wrong" else "excluded from denominators"
        notes.append(f"{len(errors)} error rows {how}")
    metrics = {k: round(v, 4) for k, v in metrics.items() if not math.isnan(v)}
    counts = {
        "samples": len(rows),
        "scored": len(kept) - (len(errors) if bench.error_policy == "wrong" else 0),
        "errors": len(errors),
        "judge_pending": len(pending),
    }
    return BenchmarkSummary(benchmark=bench.name, primary=primary, metrics=metrics, counts=counts, notes=tuple(notes))
