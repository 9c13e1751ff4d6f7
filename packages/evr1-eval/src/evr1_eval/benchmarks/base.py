"""The benchmark contract: what the runner, `score` and `report` may rely on, and the registry that holds them.

A `Benchmark` is a frozen declaration: one module per benchmark fills in only what differs (id fields, grouping fields,
official extractor, aggregation, judged problem types, frame defaults); loading, prompting and scoring are shared here
so 22 benchmarks do not become 22 near-copies.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evr1_eval.types import BenchmarkSummary, Sample, ScoredSample

if TYPE_CHECKING:
    from evr1_cache.spec import SamplingSpec

#: An LLM judge: an async callable that receives the judge prompt and returns the judge's raw text.
Judge = Callable[[str], Awaitable[str]]

#: How an error row (no response: missing video, decode/engine error, timeout) counts in the official aggregation.
#: "wrong": in every denominator with score 0 (default: a failure is never a free pass);
#: "exclude": dropped from every denominator (only where the official protocol drops unanswered items).
ErrorPolicy = Literal["wrong", "exclude"]


@dataclass(frozen=True, slots=True)
class LoadError:
    """One annotation row that could not become a Sample: `row` is its 0-based position in the file."""

    row: int
    id: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class LoadResult:
    samples: list[Sample]
    errors: list[LoadError]
    #: Rows that were loaded but changed (a duplicate id made unique): worth reading, not fatal.
    warnings: list[LoadError] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a benchmark's scorer decides for one response, before it is wrapped into a ScoredSample."""

    score: float
    extracted: str | None
    details: Mapping[str, Any] = field(default_factory=dict)
    #: True when the official metric needs an LLM judge that was not given: the row gets no score.
    needs_judge: bool = False


#: The official per-sample rule: (benchmark, sample, response) -> Outcome.
Scorer = Callable[["Benchmark", Sample, str], Outcome]
#: The official aggregation over rows already filtered for errors and pending judgements.
Aggregator = Callable[["Benchmark", Sequence[ScoredSample]], tuple[str, dict[str, float], list[str]]]
#: Turns one row of the benchmark's official annotation layout into the EasyVideoR1 layout (or returns it unchanged).
RowAdapter = Callable[[Mapping[str, Any]], Mapping[str, Any]]
#: Turns an official annotation *document* that is not a list of rows (TempCompass' `{video: {dimension: [...]}}`)
#: into its rows; gets the document and the file's stem (some layouts name the question format only in the file name).
DocumentFlattener = Callable[[Mapping[str, Any], str], list[Any]]

#: Frame defaults shared by most benchmarks: Qwen's published video recipe (2 fps, 4..768 frames; research §1.3).
DEFAULT_SAMPLING: Mapping[str, Any] = {"fps": 2.0, "min_frames": 4, "max_frames": 768}


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    """One benchmark's loader, prompt, official extraction/metric and aggregation (see docs/eval-benchmarks.md)."""

    name: str
    title: str
    #: Canonical problem types this benchmark contains (see loading.canonical_problem_type).
    problem_types: tuple[str, ...]
    #: The benchmark's own id fields, tried after `problem_id` and before the row position.
    id_fields: tuple[str, ...] = ("question_id", "qid", "id")
    #: A field that distinguishes rows sharing one id (VideoMathQA's multi-binary pairs reuse their question's
    #: `problem_id`): when present the id becomes `<id>#<value>`.
    id_suffix_field: str | None = None
    #: Problem type -> template wrapping the row's question (`{question}`) before the shared prompt is applied, for
    #: benchmarks whose annotation holds a bare query (Charades-STA sentences, OVO-Bench forward steps).
    question_templates: Mapping[str, str] = field(default_factory=dict)
    #: Question text for rows whose `problem` is empty (Video-MMLU captions).
    default_question: str | None = None
    #: Aggregation groups: group name -> annotation fields tried in order (first non-empty wins).
    group_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Group name -> function of the raw row, used when no field in `group_fields` holds the group (e.g. the video's
    #: folder: MVBench's source dataset, MMVU's subject).
    derived_groups: Mapping[str, Callable[[Mapping[str, Any]], str | None]] = field(default_factory=dict)
    #: Converts official-layout rows; applied to every row that lacks EasyVideoR1's `problem` field.
    adapter: RowAdapter | None = None
    #: Flattens an official nested document (a JSON object that is not `{"data": [...]}`) into rows for `adapter`.
    flatten: DocumentFlattener | None = None
    #: Official per-sample rule; None = evr1-rewards' scorer of the sample's problem type (metric mode).
    scorer: Scorer | None = None
    #: Official aggregation; None = micro accuracy plus per-group breakdowns.
    aggregator: Aggregator | None = None
    #: Problem types whose official metric is LLM-judged (these rows need a judge to be scored).
    judged_types: frozenset[str] = frozenset()
    #: Problem types the official protocol also judges, scored by rule when no judge is given (MMVU/VCR-Bench MC).
    judge_optional_types: frozenset[str] = frozenset()
    error_policy: ErrorPolicy = "wrong"
    #: SamplingSpec keyword arguments (evr1_cache.spec); recorded by the runner, overridable from the CLI.
    sampling_defaults: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_SAMPLING))
    #: Version of the prompt template; part of the run settings so a changed template never mixes into a resume.
    prompt_version: str = "v1"
    #: Other names this benchmark is known by (EasyVideoR1's keys).
    aliases: tuple[str, ...] = ()
    #: Deviations and caveats shown in summaries and docs.
    notes: tuple[str, ...] = ()

    # -- loading and prompting ---------------------------------------------------------------------------------
    def load(self, annotations: Path, media_root: Path | None = None, *, style: str = "direct") -> LoadResult:
        """Parse every row of `annotations` (JSON list, JSONL, {"data": [...]}, an official nested document, or a folder
        of such files); bad rows are reported, not dropped."""
        from evr1_eval.benchmarks.loading import load_samples

        return load_samples(self, Path(annotations), None if media_root is None else Path(media_root), style=style)

    def prompt(self, sample: Sample) -> str:
        """The user text sent to the model: the template is applied at load time, so this is `sample.prompt`."""
        return sample.prompt

    @property
    def sampling(self) -> SamplingSpec:
        """Default frame settings as the cache's SamplingSpec (imported lazily: the spec module is stdlib only)."""
        from evr1_cache.spec import SamplingSpec

        return SamplingSpec(**dict(self.sampling_defaults))

    # -- scoring -------------------------------------------------------------------------------------------------
    @property
    def needs_judge(self) -> bool:
        """True when some of this benchmark's official metrics are LLM-judged."""
        return bool(self.judged_types)

    def sample_needs_judge(self, sample: Sample) -> bool:
        return sample.problem_type in self.judged_types

    def score(self, sample: Sample, response: str | None) -> ScoredSample:
        """Score one response with the official rule; a judged row without a judge is marked, never guessed."""
        if self.sample_needs_judge(sample):
            outcome = Outcome(
                score=0.0, extracted=None, details={"reason": "official metric is LLM-judged"}, needs_judge=True
            )
            return _scored(sample, response, outcome)
        try:
            outcome = (self.scorer or _default_scorer)(self, sample, response if isinstance(response, str) else "")
        except (ValueError, TypeError, KeyError, LookupError) as exc:  # the GT or config, never the response
            row = self.error_row(sample, f"scoring failed on this sample's ground truth: {type(exc).__name__}: {exc}")
            return dataclasses.replace(row, response=response)
        return _scored(sample, response, outcome)

    async def score_with_judge(self, sample: Sample, response: str, judge: Judge | None) -> ScoredSample:
        """Like `score`, but judged rows (and the optionally judged types) go to `judge` (the openai backend);
        without a judge, judged rows stay pending and optional ones are scored by rule."""
        judged = self.sample_needs_judge(sample) or sample.problem_type in self.judge_optional_types
        if not judged or judge is None:
            return self.score(sample, response)
        from evr1_eval.benchmarks.judging import judge_outcome

        return _scored(sample, response, await judge_outcome(self, sample, response, judge))

    def error_row(self, sample: Sample, error: str) -> ScoredSample:
        """The row recorded when a sample could not be answered (it counts per `error_policy`)."""
        return make_error_row(self.name, sample, error)

    def aggregate(self, rows: Sequence[ScoredSample]) -> BenchmarkSummary:
        """Official aggregation; error rows count per `error_policy`, judge-pending rows are excluded and counted."""
        from evr1_eval.benchmarks.aggregation import summarize

        return summarize(self, rows)


def _default_scorer(bench: Benchmark, sample: Sample, response: str) -> Outcome:
    from evr1_eval.benchmarks.scoring_rules import rewards_outcome

    return rewards_outcome(sample, response)


def _scored(sample: Sample, response: str | None, outcome: Outcome) -> ScoredSample:
    return ScoredSample(
        id=sample.id,
        benchmark=sample.benchmark,
        problem_type=sample.problem_type,
        response=response,
        extracted=outcome.extracted,
        score=float(outcome.score),
        groups=dict(sample.groups),
        details=dict(outcome.details),
        needs_judge=outcome.needs_judge,
    )


# -- registry ------------------------------------------------------------------------------------------------------
_REGISTRY: dict[str, Benchmark] = {}
_ALIASES: dict[str, str] = {}


def register(bench: Benchmark) -> Benchmark:
    """Add a benchmark (and its aliases) to the registry; a duplicate name is a programming error."""
    for key in (bench.name, *bench.aliases):
        if key in _REGISTRY or key in _ALIASES:
            raise ValueError(f"benchmark name {key!r} is already registered")
    _REGISTRY[bench.name] = bench
    for alias in bench.aliases:
        _ALIASES[alias] = bench.name
    return bench


def get_benchmark(name: str) -> Benchmark:
    """Look a benchmark up by name or alias; an unknown name raises with the closest known names."""
    import evr1_eval.benchmarks  # noqa: F401  (registers every module)

    key = name.strip()
    key = _ALIASES.get(key, key)
    if key in _REGISTRY:
        return _REGISTRY[key]
    known = [*_REGISTRY, *_ALIASES]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise KeyError(f"unknown benchmark {name!r}.{hint} Run `evr1-eval list` for all {len(_REGISTRY)} benchmarks.")


def available_benchmarks() -> list[str]:
    import evr1_eval.benchmarks  # noqa: F401

    return sorted(_REGISTRY)


def make_error_row(benchmark: str, sample: Sample, error: str) -> ScoredSample:
    """A sample that could not be answered (missing video, engine error, timeout...): score 0, `error` set."""
    return ScoredSample(
        id=sample.id,
        benchmark=benchmark,
        problem_type=sample.problem_type,
        response=None,
        extracted=None,
        score=0.0,
        groups=dict(sample.groups),
        error=error,
    )
