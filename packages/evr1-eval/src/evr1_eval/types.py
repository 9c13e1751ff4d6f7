"""The records that flow through an evaluation: a sample in, a scored row out.

They are the contract between benchmark modules (which load and score), backends (which generate) and the runner
(which schedules, resumes and aggregates), so each can change without the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One benchmark question, with everything a backend and a scorer need and nothing engine-specific."""

    #: Stable id: `problem_id` when present, else the benchmark's own id field, else the 0-based position in the file.
    id: str
    benchmark: str
    #: The user text sent to the model (the benchmark's prompt template already applied).
    prompt: str
    #: Ground truth as the scorer of `problem_type` expects it (letter, number, JSON string, text...).
    ground_truth: Any
    problem_type: str
    #: Media paths, already resolved against the media root.
    videos: tuple[str, ...] = ()
    images: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    #: Grouping keys used by the official aggregation (task, category, duration bucket, question group...).
    groups: Mapping[str, str] = field(default_factory=dict)
    #: Anything else a scorer may need (fps, image size, coordinate convention, tolerance...).
    extras: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Generation:
    """What a backend returns for one request."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoredSample:
    """One row of `results.jsonl`; `error` is set (and `score` is 0) when the sample could not be answered."""

    id: str
    benchmark: str
    problem_type: str
    response: str | None
    extracted: str | None
    score: float
    groups: Mapping[str, str] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    latency_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_hash: str | None = None
    #: True when the official metric is LLM-judged and no judge was given: the row has no score yet (`score` is 0 and
    #: aggregations leave it out of every denominator, reporting how many are pending).
    needs_judge: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkSummary:
    """The official metrics of one benchmark run: `metrics` holds the headline number under `primary`."""

    benchmark: str
    primary: str
    metrics: Mapping[str, float]
    counts: Mapping[str, int]
    notes: Sequence[str] = ()
