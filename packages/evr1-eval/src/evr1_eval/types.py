"""The records that flow through an evaluation: a sample in, a scored row out, and the value types around them.

They are the contract between benchmark modules (which load and score), backends (which generate) and the runner
(which schedules, resumes and aggregates), so each can change without the others. This module imports nothing of
evr1_eval: every other module may import it, and it closes no import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

#: An LLM judge: an async callable that receives the judge prompt and returns the judge's raw text (evr1-rewards'
#: one judge interface, re-exported).
from evr1_rewards.judge import Judge as Judge

#: The two ways a benchmark can be run and scored (docs/eval-benchmarks.md, "Protocols"):
#: "official" = the benchmark's own prompt, answer format, extractor and aggregation, quirks included;
#: "evr1" = the training answer format (`<answer>` tags) scored by evr1-rewards, as the model was trained.
ProtocolName = Literal["official", "evr1"]
PROTOCOLS: tuple[ProtocolName, ...] = ("official", "evr1")
#: How the official rule reads a response whose final answer is in `<answer>…</answer>` (`--answer-tags`,
#: docs/eval-benchmarks.md): "official" = the whole response goes to the benchmark's official extractor, exactly as the
#: reference code does (the default); "read" = the final answer tag's content, as evr1-rewards reads it, goes to that
#: extractor when the response has one (a named deviation, recorded in the run settings and reported in the summary).
AnswerTags = Literal["official", "read"]
ANSWER_TAGS: tuple[AnswerTags, ...] = ("official", "read")
#: The row detail saying, under `answer_tags="read"`, whether the official rule read the final `<answer>` tag's content.
ANSWER_TAG_READ = "answer_tag_read"
#: What a benchmark's official pipeline does with `<think>…</think>` / `<analysis>…</analysis>` blocks before its rule
#: reads the response (`Benchmark.reasoning_blocks`): "strip" (lmms-eval's scoring loop, its `--reasoning_tags`
#: default) or "keep" (the reference reads the raw response: Video-MME's script, the standalone official scripts).
ReasoningBlocks = Literal["strip", "keep"]
#: How the official rule treats reasoning blocks (`--reasoning-tags`, docs/eval-benchmarks.md): "official" = each
#: benchmark's own pipeline (the default); "strip" = removed before every benchmark's rule (lmms-eval's pipeline
#: everywhere); "keep" = never removed (lmms-eval with `--reasoning_tags none`, the official scripts on raw text).
ReasoningTags = Literal["official", "strip", "keep"]
REASONING_TAGS: tuple[ReasoningTags, ...] = ("official", "strip", "keep")
#: The row detail under `reasoning_tags` other than "official": `{"applied": "strip"|"keep", "differs": bool}`, where
#: `differs` says the response had reasoning blocks its benchmark's official pipeline treats the other way.
REASONING_APPLIED = "reasoning_tags"


@dataclass(frozen=True, slots=True)
class Reading:
    """How the official rule reads a response: the one setting behind `--answer-tags` and `--reasoning-tags`.

    The default is every reference's own reading; any other value is a named deviation that the runner records in its
    fingerprint (a resume read another way is refused), the manifest records, `verify` re-scores with, and the summary
    reports. On disk its fields stay flat keys (`answer_tags`, `reasoning_tags`); a record without one means its
    default, so files written before a field existed keep their meaning."""

    answer_tags: AnswerTags = "official"
    reasoning_tags: ReasoningTags = "official"

    def __post_init__(self) -> None:
        for name, allowed in (("answer_tags", ANSWER_TAGS), ("reasoning_tags", REASONING_TAGS)):
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; choose one of {', '.join(allowed)}")

    @property
    def is_official(self) -> bool:
        """True when every benchmark reads responses as its reference does (no deviation to report)."""
        return self == Reading()

    def record(self) -> dict[str, str]:
        """Both fields as the flat keys a manifest holds."""
        return {"answer_tags": self.answer_tags, "reasoning_tags": self.reasoning_tags}

    def fingerprint(self) -> dict[str, str]:
        """The fields that differ from their default: a run's fingerprint from before a field existed stays equal."""
        default = Reading().record()
        return {k: v for k, v in self.record().items() if v != default[k]}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Reading:
        """The reading a manifest or fingerprint recorded (a missing or null key: that field's default); an unknown
        value is refused by name (ValueError)."""
        default = cls()
        return cls(
            answer_tags=record.get("answer_tags") or default.answer_tags,
            reasoning_tags=record.get("reasoning_tags") or default.reasoning_tags,
        )


#: Every reference's own reading (the default of `Benchmark.score`, `RunConfig`, `score_samples`).
OFFICIAL_READING = Reading()


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One benchmark question, with everything a backend and a scorer need and nothing engine-specific."""

    #: Stable id: `problem_id` when present, else the benchmark's own id field, else the 0-based position in the file.
    id: str
    benchmark: str
    #: The user text sent to the model (the run protocol's prompt already applied).
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
    #: Anything else a scorer may need (fps, image size, coordinate convention, tolerance...). `official_doc` holds
    #: the row in the shape the benchmark's official code reads (its field names), built once at load time.
    extras: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Generation:
    """What a backend returns for one request."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class LoadError:
    """One annotation row that could not become a Sample: `row` is its 1-based `unit` number in its file, "line" in
    a JSONL / text file (the line an editor shows), "item" in a JSON list."""

    row: int
    id: str | None
    reason: str
    unit: str = "line"


@dataclass(frozen=True, slots=True)
class LoadResult:
    samples: list[Sample]
    errors: list[LoadError]
    #: Rows that were loaded but changed (a duplicate id made unique): worth reading, not fatal.
    warnings: list[LoadError] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a benchmark's official rule decides for one response, before it is wrapped into a ScoredSample."""

    score: float
    extracted: str | None
    details: Mapping[str, Any] = field(default_factory=dict)
    #: True when the official metric needs an LLM judge that was not given: the row gets no score.
    needs_judge: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoredSample:
    """One row of `results.jsonl`; `error` is set (and `score` is 0) when the sample could not be answered.

    `score` is the official protocol's per-sample score (the headline); `evr1_score` is evr1-rewards' accuracy of the
    same response (the evr1 protocol, as training scores it), None on error rows."""

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
    #: What the model was sent: `evr1_cache.PromptRecord.to_dict()` (text and media in order, with its hash); None
    #: when no request was built (the media could not be loaded).
    prompt: Mapping[str, Any] | None = None
    #: True when the official metric is LLM-judged and no judge was given: the row has no score yet (`score` is 0 and
    #: aggregations leave it out of every denominator, reporting how many are pending).
    needs_judge: bool = False
    evr1_score: float | None = None


@dataclass(frozen=True, slots=True)
class Reference:
    """Where a benchmark's official protocol comes from: the code that computed the published numbers."""

    repository: str
    path: str
    commit: str
    note: str = ""

    def __str__(self) -> str:
        tail = f" ({self.note})" if self.note else ""
        return f"{self.repository}:{self.path}@{self.commit[:7]}{tail}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkSummary:
    """The metrics of one benchmark run: `metrics` holds the official protocol's metrics (headline under `primary`),
    `evr1_metrics` the evr1 protocol's (evr1-rewards accuracy, the way training scores); `reference` names the
    official code the official metrics reproduce."""

    benchmark: str
    primary: str
    metrics: Mapping[str, float]
    counts: Mapping[str, int]
    notes: Sequence[str] = ()
    evr1_metrics: Mapping[str, float] = field(default_factory=dict)
    reference: str = ""
