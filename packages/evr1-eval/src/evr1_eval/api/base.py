"""The benchmark contract: what the runner, `score` and `report` may rely on.

A `Benchmark` is a frozen declaration: one module per benchmark fills in only what differs (id fields, grouping fields,
the official protocol's reference, document, prompt, per-sample rule and aggregation, judged problem types, frame
defaults); loading, prompting and scoring are shared here so 22 benchmarks do not become 22 near-copies. It imports
the shared implementations at top level; none of them imports this module back (no import cycle).

Every answer is scored under both protocols: `score` is the official rule's (the headline), `evr1_score`
evr1-rewards' (the evr1 protocol). The run's protocol decides only how the question is asked (the prompt).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from evr1_cache.spec import SamplingSpec
from evr1_eval.api.aggregation import Aggregator, summarize
from evr1_eval.api.extractors import ScanEnd
from evr1_eval.api.judging import judge_outcome
from evr1_eval.api.loading import RowView, generic_prompt, load_samples
from evr1_eval.api.prompts import check_variant
from evr1_eval.api.scoring_rules import Rule, answer_tag_input, has_reasoning_blocks, lmms_input, rewards_outcome
from evr1_eval.protocol import ProtocolSettings
from evr1_eval.types import (
    ANSWER_TAG_READ,
    OFFICIAL_READING,
    REASONING_APPLIED,
    BenchmarkSummary,
    Judge,
    LoadResult,
    Outcome,
    Reading,
    ReasoningBlocks,
    Reference,
    Sample,
    ScoredSample,
)

#: How an error row (no response: missing video, decode/engine error, timeout) counts in the official aggregation.
#: "wrong": in every denominator with score 0 (default: a failure is never a free pass);
#: "exclude": dropped from every denominator (only where the official protocol drops unanswered items).
ErrorPolicy = Literal["wrong", "exclude"]
#: Turns one row of the benchmark's official annotation layout into the EasyVideoR1 layout (or returns it unchanged).
RowAdapter = Callable[[Any], Mapping[str, Any]]
#: Turns an official annotation *document* that is not a list of rows (TempCompass' `{video: {dimension: [...]}}`)
#: into its rows; gets the document and the file's stem (some layouts name the question format only in the file name).
DocumentFlattener = Callable[[Mapping[str, Any], str], list[Any]]
#: A parsed row -> the row in the official code's own field names (what its prompt and scorer read).
DocBuilder = Callable[[RowView], dict[str, Any]]
#: The official document -> the prompt text the official code sends.
OfficialPrompt = Callable[[Mapping[str, Any]], str]

#: Frame defaults shared by most benchmarks: Qwen's published video recipe (2 fps, 4..768 frames).
DEFAULT_SAMPLING: Mapping[str, Any] = {"fps": 2.0, "min_frames": 4, "max_frames": 768}


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    """One benchmark's loader, prompts, official extraction/metric and aggregation (see docs/eval-benchmarks.md)."""

    name: str
    title: str
    #: evr1-rewards' canonical names of the problem types this benchmark contains (`evr1_rewards.vocabulary`).
    problem_types: tuple[str, ...]
    #: This benchmark's own readings of problem-type names, consulted before evr1-rewards' vocabulary
    #: (`normalize_problem_type(..., aliases=...)`): OVO-Bench's "REC" is repetition counting, not referring expressions.
    type_aliases: Mapping[str, str] = field(default_factory=dict)
    #: The benchmark's own id fields, tried after `problem_id` and before the row position.
    id_fields: tuple[str, ...] = ("question_id", "qid", "id")
    #: A field that distinguishes rows sharing one id (VideoMathQA's multi-binary pairs reuse their question's
    #: `problem_id`): when present the id becomes `<id>#<value>`.
    id_suffix_field: str | None = None
    #: Task group or problem type -> template wrapping a bare query (`{question}`) in the evr1 and generic prompts
    #: (Charades-STA sentences, OVO-Bench forward steps); official prompts have their own wording.
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
    # -- the official protocol ------------------------------------------------------------------------------------
    #: The code the official protocol reproduces (None: no official code could be read; `notes` say what is used).
    reference: Reference | None = None
    #: Builds the row in the official code's field names, stored as `sample.extras["official_doc"]`.
    official_doc: DocBuilder | None = None
    #: The official prompt from the official document (None: the generic prompt, `loading.generic_prompt`).
    official_prompt: OfficialPrompt | None = None
    #: Model-family prompts of this benchmark (e.g. Qwen3-VL's own Video-MME prompt) by variant name; variants not
    #: listed use `prompts.direct_prompt`.
    prompt_variants: Mapping[str, OfficialPrompt] = field(default_factory=dict)
    #: Official per-sample rule; None = evr1-rewards' scorer of the sample's problem type.
    scorer: Rule | None = None
    #: What the official pipeline does with `<think>`/`<analysis>` blocks before the rule reads a response: "strip"
    #: (lmms-eval's scoring loop, for its tasks) or "keep" (the raw response: Video-MME's script, the standalone
    #: official scripts, evr1-rewards). `Benchmark.score` applies it; `--reasoning-tags strip|keep` overrides it.
    reasoning_blocks: ReasoningBlocks = "keep"
    #: The end of an over-long response (over `extractors.MAX_SCAN`) the rule reads: "head" for rules that take the
    #: FIRST letter or token, else "tail"; the part kept when a response is cut before reasoning blocks are stripped.
    answer_end: ScanEnd = "tail"
    #: Official aggregation; None = micro accuracy plus per-group breakdowns.
    aggregator: Aggregator | None = None
    #: Problem types whose official metric is LLM-judged (these rows need a judge to be scored).
    judged_types: frozenset[str] = frozenset()
    #: Problem types the official protocol also judges, scored by rule when no judge is given (VCR-Bench MC).
    judge_optional_types: frozenset[str] = frozenset()
    #: Problem types whose official rule defers some answers to an LLM judge (the rule's `Outcome.needs_judge`):
    #: MMVU's open answers the rules reject, TempCompass answers no rule matches.
    judge_fallback_types: frozenset[str] = frozenset()
    error_policy: ErrorPolicy = "wrong"
    #: A row without a video is a load error (video benchmarks); False: rows may have images only, or no media.
    needs_video: bool = True
    #: SamplingSpec keyword arguments (evr1_cache.spec); recorded by the runner, overridable from the CLI / presets.
    sampling_defaults: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_SAMPLING))
    #: Version of the prompt templates; part of the run settings so a changed template never mixes into a resume.
    prompt_version: str = "v2"
    #: Other names this benchmark is known by (EasyVideoR1's keys).
    aliases: tuple[str, ...] = ()
    #: Deviations and caveats shown in summaries and docs.
    notes: tuple[str, ...] = ()

    # -- loading and prompting ---------------------------------------------------------------------------------
    def load(
        self,
        annotations: Path,
        media_root: Path | None = None,
        *,
        protocol: ProtocolSettings | None = None,
        allow_outside_media: bool = False,
        allow_remote_media: Iterable[str] = (),
    ) -> LoadResult:
        """Parse every row of `annotations` (JSON list, JSONL, {"data": [...]}, an official nested document, or a folder
        of such files) with prompts for `protocol` (default: official); bad rows are reported, not dropped. Media
        paths must stay inside `media_root` (default: the annotations' folder) unless `allow_outside_media`; URLs are
        downloaded only for the `allow_remote_media` schemes."""
        root = None if media_root is None else Path(media_root)
        return load_samples(
            self, Path(annotations), root, protocol,
            allow_outside_media=allow_outside_media, allow_remote_media=allow_remote_media,
        )  # fmt: skip

    def prompt_for(self, view: RowView, doc: Mapping[str, Any] | None, protocol: ProtocolSettings) -> str:
        """The user text for one parsed row under `protocol` (applied at load time: `sample.prompt`)."""
        if protocol.protocol == "evr1":
            return generic_prompt(self, view, protocol)
        variant = check_variant(protocol.prompt_variant)
        if doc is not None and variant in self.prompt_variants:
            return self.prompt_variants[variant](doc)
        if doc is not None and variant == "official" and self.official_prompt is not None:
            return self.official_prompt(doc)
        return generic_prompt(self, view, protocol)

    @property
    def sampling(self) -> SamplingSpec:
        """Default frame settings as the cache's SamplingSpec."""
        return SamplingSpec(**dict(self.sampling_defaults))

    # -- scoring -------------------------------------------------------------------------------------------------
    @property
    def needs_judge(self) -> bool:
        """True when some of this benchmark's official metrics are (or may be) LLM-judged."""
        return bool(self.judged_types or self.judge_fallback_types)

    def sample_needs_judge(self, sample: Sample) -> bool:
        return sample.problem_type in self.judged_types

    def official_outcome(self, sample: Sample, response: str) -> Outcome:
        """The official rule alone (judged types come back pending)."""
        if self.sample_needs_judge(sample):
            return Outcome(
                score=0.0, extracted=None, details={"reason": "official metric is LLM-judged"}, needs_judge=True
            )
        return (self.scorer or rewards_outcome)(sample, response)

    def strips_reasoning(self, reading: Reading = OFFICIAL_READING) -> bool:
        """Whether the official rule reads responses with reasoning blocks removed under `reading`."""
        if reading.reasoning_tags == "official":
            return self.reasoning_blocks == "strip"
        return reading.reasoning_tags == "strip"

    def score(self, sample: Sample, response: str | None, *, reading: Reading = OFFICIAL_READING) -> ScoredSample:
        """Score one response under both protocols; a judged row without a judge is marked pending, never guessed.

        `reading` says which text the official rule reads: the whole response or its final `<answer>` tag's content
        (`answer_tags`), then with or without reasoning blocks (`reasoning_tags`; by default what this benchmark's
        official pipeline does, `reasoning_blocks`). The evr1 protocol always reads the raw response. A reading other
        than the default is a named deviation each row records in its details (`_reading_details`)."""
        text = response if isinstance(response, str) else ""
        tag = answer_tag_input(text, reading.answer_tags)
        read = text if tag is None else tag
        rule_text = lmms_input(read, self.answer_end) if self.strips_reasoning(reading) else read
        try:
            evr1 = rewards_outcome(sample, text)
            reuse = self.scorer is None and not self.sample_needs_judge(sample) and rule_text == read
            outcome = evr1 if reuse else self.official_outcome(sample, rule_text)
        except (ValueError, TypeError, KeyError, LookupError) as exc:  # the GT or config, never the response
            row = self.error_row(sample, f"scoring failed on this sample's ground truth: {type(exc).__name__}: {exc}")
            return dataclasses.replace(row, response=response)
        row = scored_row(sample, response, outcome, evr1)
        if reading.is_official:
            return row
        return dataclasses.replace(row, details={**row.details, **self._reading_details(read, tag, reading)})

    def _reading_details(self, read: str, tag: str | None, reading: Reading) -> dict[str, Any]:
        """What a row read under a non-default `reading` says: whether the official rule read a final `<answer>` tag
        (`answer_tag_read`), and how reasoning blocks were treated (`reasoning_tags`: `applied`, and `differs` when the
        response had blocks this benchmark's official pipeline treats the other way)."""
        details: dict[str, Any] = {}
        if reading.answer_tags == "read":
            details[ANSWER_TAG_READ] = tag is not None
        if reading.reasoning_tags != "official":
            departs = reading.reasoning_tags != self.reasoning_blocks
            differs = departs and has_reasoning_blocks(read, self.answer_end)
            details[REASONING_APPLIED] = {"applied": reading.reasoning_tags, "differs": differs}
        return details

    async def score_with_judge(
        self, sample: Sample, response: str, judge: Judge | None, *, reading: Reading = OFFICIAL_READING
    ) -> ScoredSample:
        """Like `score`, but rows the official protocol judges (pending ones and the optionally judged types) go to
        `judge` (the openai backend); without a judge, pending rows stay pending and optional ones are scored by rule.
        The judge reads the answer part of the response under every reading (`judging.final_text`)."""
        row = self.score(sample, response, reading=reading)
        wants = row.needs_judge or sample.problem_type in self.judge_optional_types
        if judge is None or row.error is not None or not wants:
            return row
        outcome = await judge_outcome(sample, response, judge)
        kept = {k: row.details[k] for k in ("evr1", ANSWER_TAG_READ, REASONING_APPLIED) if k in row.details}
        return dataclasses.replace(
            row,
            score=float(outcome.score),
            extracted=outcome.extracted,
            details={**dict(outcome.details), "evr1": {}, **kept},
            needs_judge=outcome.needs_judge,
        )

    def error_row(self, sample: Sample, error: str) -> ScoredSample:
        """The row recorded when a sample could not be answered (it counts per `error_policy`)."""
        return make_error_row(self.name, sample, error)

    def aggregate(self, rows: Sequence[ScoredSample]) -> BenchmarkSummary:
        """Official aggregation (and the evr1 protocol's metrics); errors count per `error_policy`, judge-pending rows
        are excluded and counted."""
        return summarize(self, rows)


def scored_row(sample: Sample, response: str | None, outcome: Outcome, evr1: Outcome) -> ScoredSample:
    details = dict(outcome.details)
    details["evr1"] = {"extracted": evr1.extracted, **dict(evr1.details)}
    return ScoredSample(
        id=sample.id,
        benchmark=sample.benchmark,
        problem_type=sample.problem_type,
        response=response,
        extracted=outcome.extracted,
        score=float(outcome.score),
        groups=dict(sample.groups),
        details=details,
        needs_judge=outcome.needs_judge,
        evr1_score=float(evr1.score),
    )


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


__all__ = [
    "DEFAULT_SAMPLING",
    "Benchmark",
    "DocBuilder",
    "DocumentFlattener",
    "ErrorPolicy",
    "OfficialPrompt",
    "RowAdapter",
    "make_error_row",
    "scored_row",
]
