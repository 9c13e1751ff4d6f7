"""Aggregation shared by the benchmarks. Every metric is a percentage (0-100), like published tables.

`summarize` applies the two row policies shared by all benchmarks before the benchmark's own (official) aggregator
runs: rows still waiting for an LLM judge are left out of every denominator and counted, and error rows count per the
benchmark's `error_policy` (by default as wrong answers, so a failed sample is never a free pass). It also computes the
evr1 protocol's metrics: the item mean of evr1-rewards' accuracy (how training scores the same answers), overall and
per group.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from evr1_eval.types import ANSWER_TAG_READ, REASONING_APPLIED, BenchmarkSummary, ScoredSample

if TYPE_CHECKING:
    from evr1_eval.api.base import Benchmark

Result = tuple[str, dict[str, float], list[str]]
#: The official aggregation over rows already filtered for errors and pending judgements.
Aggregator = Callable[["Benchmark", Sequence[ScoredSample]], Result]


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


def rounded_pct(rows: Sequence[ScoredSample]) -> float:
    """Accuracy as a percentage of the 5-decimal fraction the reference prints (LongVideoBench, Video-MMMU)."""
    return 100.0 * round(sum(r.score for r in rows) / len(rows), 5) if rows else float("nan")


def breakdown(
    bench: Benchmark,
    rows: Sequence[ScoredSample],
    metrics: dict[str, float],
    measure: Callable[[Sequence[ScoredSample]], float] | None = None,
) -> None:
    """Per-group accuracy (`measure`, default the item mean) for every declared grouping key, as `<group>/<value>`."""
    for name in group_names(bench):
        for value, members in by_group(rows, name).items():
            metrics[f"{name}/{value}"] = measure(members) if measure else pct(r.score for r in members)


def micro(
    bench: Benchmark, rows: Sequence[ScoredSample], measure: Callable[[Sequence[ScoredSample]], float] | None = None
) -> Result:
    """Accuracy over items (the official rule for most MC benchmarks; `measure`, default the item mean), plus
    per-group breakdowns."""
    metrics = {"accuracy": measure(rows) if measure else pct(r.score for r in rows)}
    breakdown(bench, rows, metrics, measure)
    return "accuracy", metrics, []


def answered(row: ScoredSample) -> bool:
    """Did the official extractor find an answer? Error rows are never 'unanswered': they stay in every denominator."""
    return row.error is not None or bool(row.details.get("answered", True))


def evr1_metrics(bench: Benchmark, rows: Sequence[ScoredSample]) -> dict[str, float]:
    """The evr1 protocol: evr1-rewards' accuracy averaged over items (errors count 0), overall and per group."""
    scored = [dataclasses.replace(r, score=float(r.evr1_score or 0.0)) for r in rows]
    _, metrics, _ = micro(bench, scored)
    return metrics


def _answer_tag_notes(rows: Sequence[ScoredSample]) -> list[str]:
    """What the summary says when the official rule read `<answer>` tags (`answer_tags="read"`: every row it scored
    carries `details["answer_tag_read"]`), and when rows scored both ways are mixed."""
    answered_rows = [r for r in rows if r.error is None]
    read = [r for r in answered_rows if ANSWER_TAG_READ in r.details]
    if not read:
        return []
    tagged = sum(1 for r in read if r.details[ANSWER_TAG_READ])
    notes = [
        f"answer tags read (--answer-tags read, not the official reading): the official rule read the final "
        f"<answer> tag of {tagged} of {len(read)} responses instead of the whole response, so these metrics are not "
        "the reference's own numbers"
    ]
    if len(read) < len(answered_rows):
        notes.append(
            f"{len(answered_rows) - len(read)} rows were scored with the official reading of <answer> tags and "
            f"{len(read)} with --answer-tags read: rows scored two ways are mixed"
        )
    return notes


def _reasoning_applied(rows: Sequence[ScoredSample]) -> dict[str, list[bool]]:
    """Answered rows scored with `--reasoning-tags strip|keep` (their `details["reasoning_tags"]`), by the treatment
    applied: whether each response had reasoning blocks its benchmark's official pipeline treats the other way."""
    out: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        info = r.details.get(REASONING_APPLIED)
        if r.error is None and isinstance(info, Mapping):
            out[str(info.get("applied"))].append(bool(info.get("differs")))
    return dict(out)


def _reasoning_notes(bench: Benchmark, rows: Sequence[ScoredSample]) -> list[str]:
    """What the summary says when reasoning blocks were treated by `--reasoning-tags` rather than by each benchmark's
    official pipeline (`Benchmark.reasoning_blocks`), and when rows treated several ways are mixed."""
    applied = _reasoning_applied(rows)
    notes: list[str] = []
    for mode, differs in sorted(applied.items()):
        done = "stripped" if mode == "strip" else "kept"
        if mode == bench.reasoning_blocks:
            notes.append(
                f"reasoning tags {done} (--reasoning-tags {mode}) on {len(differs)} responses, as this benchmark's "
                "official pipeline does: the official rule read what its reference reads"
            )
            continue
        own = "removes them" if bench.reasoning_blocks == "strip" else "keeps them"
        notes.append(
            f"reasoning tags {done} (--reasoning-tags {mode}, not this benchmark's official pipeline, which {own}): "
            f"{sum(differs)} of {len(differs)} responses had reasoning blocks, and on those the metrics are not the "
            "reference's own numbers"
        )
    answered_rows = sum(1 for r in rows if r.error is None)
    treated = sum(len(v) for v in applied.values())
    if applied and (len(applied) > 1 or treated < answered_rows):
        ways = [f"{len(v)} with --reasoning-tags {m}" for m, v in sorted(applied.items())]
        ways += [f"{answered_rows - treated} with the official pipeline"] if treated < answered_rows else []
        notes.append(f"reasoning tags: rows scored several ways are mixed ({', '.join(ways)})")
    return notes


def _notes(bench: Benchmark, rows: Sequence[ScoredSample], kept: Sequence[ScoredSample]) -> list[str]:
    notes: list[str] = _answer_tag_notes(rows) + _reasoning_notes(bench, rows)
    if bench.reference is None:
        notes.append(
            "no official scoring code could be read for this benchmark: its official-protocol number uses the "
            "VLMEvalKit-style prompt and the rule documented in docs/eval-benchmarks.md"
        )
    by_rule = sum(
        1
        for r in kept
        if r.error is None and r.problem_type in bench.judge_optional_types and r.details.get("scorer") != "llm-judge"
    )
    if by_rule:
        notes.append(f"{by_rule} rows scored by rule where the official protocol uses an LLM judge")
    pending = sum(1 for r in rows if r.needs_judge and r.error is None)
    if pending:
        notes.append(
            f"{pending} of {len(rows)} rows need an LLM judge (official protocol) and were not scored: "
            "metrics cover the other rows only; score them with a judge (openai backend) for the official number"
        )
    errors = sum(1 for r in rows if r.error is not None)
    if errors:
        how = "counted as wrong" if bench.error_policy == "wrong" else "excluded from denominators"
        notes.append(f"{errors} error rows {how}")
    return notes


def _finite(metrics: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in metrics.items() if not math.isnan(v)}


def _counts(bench: Benchmark, rows: Sequence[ScoredSample], kept: Sequence[ScoredSample]) -> dict[str, int]:
    errors = sum(1 for r in rows if r.error is not None)
    tags = [bool(r.details[ANSWER_TAG_READ]) for r in rows if r.error is None and ANSWER_TAG_READ in r.details]
    reasoning = [d for differs in _reasoning_applied(rows).values() for d in differs]
    return {
        "samples": len(rows),
        "scored": len(kept) - (errors if bench.error_policy == "wrong" else 0),
        "errors": errors,
        "judge_pending": sum(1 for r in rows if r.needs_judge and r.error is None),
        **({"answer_tag_read": sum(tags)} if tags else {}),
        **({"reasoning_tags_differ": sum(reasoning)} if reasoning else {}),
    }


def _judge_failed_as_wrong(bench: Benchmark, rows: Sequence[ScoredSample], kept: Sequence[ScoredSample],
                           primary: str) -> float | None:  # fmt: skip
    """The reference's number when its judge is unreachable (or disabled): a deferred answer counts wrong."""
    pending = [r for r in rows if r.needs_judge and r.error is None]
    if not pending or not bench.judge_fallback_types:
        return None
    as_wrong = [*kept, *(dataclasses.replace(r, score=0.0, needs_judge=False) for r in pending)]
    return (bench.aggregator or micro)(bench, as_wrong)[1].get(primary)


def summarize(bench: Benchmark, rows: Sequence[ScoredSample]) -> BenchmarkSummary:
    kept = [r for r in rows if not (r.needs_judge and r.error is None)]
    if bench.error_policy == "exclude":
        kept = [r for r in kept if r.error is None]
    aggregate: Aggregator = bench.aggregator or micro
    primary, metrics, extra = aggregate(bench, kept)  # empty input gives NaN metrics, dropped below
    as_wrong = _judge_failed_as_wrong(bench, rows, kept, primary)
    if as_wrong is not None:
        metrics[f"{primary}_judge_failed_as_wrong"] = as_wrong
    evr1_rows = [r for r in rows if r.error is None or bench.error_policy == "wrong"]
    return BenchmarkSummary(
        benchmark=bench.name,
        primary=primary,
        metrics=_finite(metrics),
        counts=_counts(bench, rows, kept),
        notes=(*bench.notes, *extra, *_notes(bench, rows, kept)),
        evr1_metrics=_finite(evr1_metrics(bench, evr1_rows)),
        reference=str(bench.reference) if bench.reference else "",
    )
