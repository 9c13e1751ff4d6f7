"""What a run sends and how it reads the answer: the protocol choice and the evr1 protocol's settings.

Two protocols exist for every benchmark (see docs/eval-benchmarks.md):

- `official`: the benchmark's own prompt wording and answer format; `prompt_variant` may swap the wording for a
  model family's published evaluation prompt (a preset's `qwen3_vl` prompt), never the scorer.
- `evr1`: the answer format evr1-train trains (`<think>…</think><answer>…</answer>`), rendered by `Evr1Settings`.

`Evr1Settings` is the one typed object that says how a trained checkpoint expects to be asked: prompt template,
answer formats, system prompt, chat template, frame sampling and stop / EOS settings. The CLI fills it from a
file (`evr1-eval run --protocol evr1 --evr1-settings FILE`) or from a training checkpoint's own record
(`evr1-eval run --from-train RUN`, read by `evr1_eval.train_protocol`), so evaluation asks the question exactly as
training did. Every field is recorded in the run manifest and its `key()` is part of the run fingerprint: a resume
never mixes two prompt formats.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evr1_cache.registry import check_fields
from evr1_eval.types import PROTOCOLS, ProtocolName
from evr1_rewards import RewardError, normalize_problem_type
from evr1_rewards.prompt_format import (
    DEFAULT_ANSWER_FORMAT,
    INSTRUCTION_DIRECT,
    INSTRUCTION_THINK,
    LEADS,
    TEMPLATE,
    answer_format,
    modality,
    options_text,
    unplaced_markers,
)
from evr1_rewards.vocabulary import name_key

_FIELDS = ("placeholders", "lead", "question", "options", "instruction")
#: Prompt variants of the official protocol: "official" = the benchmark's own wording; the others are model families'
#: published evaluation prompts (a benchmark may define its own version of one, e.g. Qwen3-VL's Video-MME prompt).
PROMPT_VARIANTS = ("official", "qwen3_vl", "vlmevalkit")


def check_variant(variant: str) -> str:
    if variant not in PROMPT_VARIANTS:
        raise ValueError(f"unknown prompt variant {variant!r}; choose one of {', '.join(PROMPT_VARIANTS)}")
    return variant


@dataclass(frozen=True, kw_only=True)
class Evr1Settings:
    """How an evr1-trained checkpoint is asked and stopped; the defaults are the evr1 prompt format that evr1-train
    trains with (`evr1_rewards.prompt_format`, imported by both, copied by neither).

    template: the user text, with `{placeholders}` (markers of the media the question does not place itself), `{lead}`,
        `{question}`, `{options}` ("\\nOptions:\\nA. …" or "") and `{instruction}`. A question's own `<video>` /
        `<image>` markers stay where they are (as in training); `{placeholders}` at the template's start renders
        nothing, because backends put unplaced media before the text, which is the same prompt.
    leads: the `{lead}` sentence by modality ("video", "image", "video+image", "text").
    think: ask for `<think>…</think>` before `<answer>…</answer>` (`instruction_think`), else `instruction_direct`.
    answer_formats: empty = each type's answer format registered with its evr1-rewards scorer; else the table a
        training run recorded (problem type -> the phrase for `{format}`; types it lacks get `default_format`).
        `problem_type_aliases` are extra readings given to `normalize_problem_type` (an older run's own aliases).
    system_prompt / chat_template: the system turn and the Jinja chat template used in training (None = none / the
        tokenizer's own); `chat_template` is the template text, or the path of a file holding it. Backends apply both.
    sampling / image_sampling: `SamplingSpec` / `ImageSpec` fields the checkpoint was trained with (fps, max_frames,
        max_pixels, ...): they replace the benchmark defaults, so the model sees the frames it was trained on.
    generation: decoding settings (`max_tokens`, `temperature`, ...), applied where the run gives none explicitly.
    stop / stop_token_ids: strings and token ids that end generation (the model's EOS and end-of-turn tokens).
    suppress_token_ids: token ids never generated (the trainer suppresses the vision placeholders).
    source: where the settings came from ("defaults", "cli:FILE", "train:RUN"), for the manifest.
    """

    template: str = TEMPLATE
    leads: Mapping[str, str] = field(default_factory=lambda: dict(LEADS))
    think: bool = True
    instruction_think: str = INSTRUCTION_THINK
    instruction_direct: str = INSTRUCTION_DIRECT
    answer_formats: Mapping[str, str] = field(default_factory=dict)
    default_format: str = DEFAULT_ANSWER_FORMAT
    problem_type_aliases: Mapping[str, str] = field(default_factory=dict)
    system_prompt: str | None = None
    chat_template: str | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)
    image_sampling: Mapping[str, Any] = field(default_factory=dict)
    generation: Mapping[str, Any] = field(default_factory=dict)
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    suppress_token_ids: tuple[int, ...] = ()
    source: str = "defaults"

    def __post_init__(self) -> None:
        try:
            self.template.format(**dict.fromkeys(_FIELDS, ""))
            for text in (self.instruction_think, self.instruction_direct):
                text.format(format="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"evr1 settings: a template uses an unknown placeholder or bad braces ({exc!r}); the prompt template "
                f"may use {', '.join('{' + f + '}' for f in _FIELDS)} and the instructions {{format}}"
            ) from None
        missing = sorted(set(LEADS) - set(self.leads))
        if missing:
            raise ValueError(f"evr1 settings: `leads` lacks {missing} (keys: {', '.join(LEADS)})")
        object.__setattr__(self, "stop", tuple(str(s) for s in self.stop or ()))  # a JSON list or null
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids or ()))
        object.__setattr__(self, "suppress_token_ids", tuple(int(t) for t in self.suppress_token_ids or ()))

    def answer_format(self, problem_type: str) -> str:
        """The `{format}` phrase: the recorded table's when there is one, else the type's scorer's (a type evr1-rewards does
        not know: `default_format`)."""
        try:
            name = normalize_problem_type(problem_type, aliases=self.problem_type_aliases or None)
        except RewardError:
            return self.default_format
        if not self.answer_formats:
            return answer_format(name)
        return {name_key(k): v for k, v in self.answer_formats.items()}.get(name, self.default_format)

    def render(
        self, problem_type: str, question: str, options: Sequence[str], *, n_videos: int = 1, n_images: int = 0
    ) -> str:
        """The user text for one question, as the trainer renders it; `options` are the option lines ("A. red").

        `question` may hold `<video>` / `<image>` markers where the media go (at most one per media item, else a
        ValueError, as in training); the text then carries markers and backends place the media there.
        """
        template, markers = self.template, unplaced_markers(question, n_videos, n_images)
        if template.startswith("{placeholders}"):  # unplaced media go first either way (see the class docstring)
            template, markers = template[len("{placeholders}") :], ""
        instruction = self.instruction_think if self.think else self.instruction_direct
        return template.format(
            placeholders=markers,
            lead=self.leads[modality(n_videos, n_images)],
            question=question,
            options=options_text(options),
            instruction=instruction.format(format=self.answer_format(problem_type)),
        )

    def resolved_chat_template(self) -> str | None:
        """The chat template text: `chat_template` itself, or the file it names (a template holds `{%` or `{{`)."""
        value = self.chat_template
        if value is None or "{%" in value or "{{" in value:
            return value
        path = Path(value).expanduser()
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(
                f"evr1 settings: chat_template {value!r} is neither a Jinja template nor a readable file ({exc})"
            ) from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # recorded as JSON, where a tuple is a list

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evr1Settings:
        """Build from a mapping (a JSON file, a training run's recorded settings); unknown keys are an error naming the
        valid ones, so a typo never silently falls back to a default."""
        check_fields("evr1 settings", data, cls)
        return cls(**data)

    @classmethod
    def from_file(cls, path: Path) -> Evr1Settings:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"--evr1-settings {path}: cannot read a JSON object ({exc})") from None
        if not isinstance(data, Mapping):
            raise ValueError(f"--evr1-settings {path}: expected a JSON object, got {type(data).__name__}")
        return dataclasses.replace(cls.from_dict(data), source=str(data.get("source") or f"cli:{Path(path).name}"))

    def key(self) -> str:
        """Hash of everything that changes what the model is asked or when it stops (not `source`)."""
        data = {k: v for k, v in self.to_dict().items() if k != "source"}
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class ProtocolSettings:
    """The protocol a run uses to ask its questions (both protocols' scores are computed for every answer)."""

    protocol: ProtocolName = "official"
    #: official protocol: "official" (the benchmark's own wording) or a registered model-family prompt ("qwen3_vl").
    prompt_variant: str = "official"
    evr1: Evr1Settings = field(default_factory=Evr1Settings)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; choose one of {', '.join(PROTOCOLS)}")
        check_variant(self.prompt_variant)
        if self.protocol == "evr1" and self.prompt_variant != "official":
            raise ValueError(
                "a prompt variant applies to the official protocol only; the evr1 protocol's prompt is its "
                "Evr1Settings template"
            )

    def record(self) -> dict[str, Any]:
        """What the manifest and the run fingerprint store."""
        out: dict[str, Any] = {"protocol": self.protocol, "prompt_variant": self.prompt_variant}
        if self.protocol == "evr1":
            out["evr1"] = self.evr1.to_dict()
            out["evr1_key"] = self.evr1.key()
        return out
