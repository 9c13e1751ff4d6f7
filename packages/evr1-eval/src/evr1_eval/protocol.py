"""What a run sends and how it reads the answer: the protocol choice and the evr1 protocol's settings.

Two protocols exist for every benchmark (see docs/eval-benchmarks.md):

- `official`: the benchmark's own prompt wording and answer format; `prompt_variant` may swap the wording for a
  model family's published evaluation prompt (a preset's `qwen3_vl` prompt), never the scorer.
- `evr1`: the answer format evr1-train trains (`<think>…</think><answer>…</answer>`), rendered by `Evr1Settings`.

`Evr1Settings` is the one typed object that says how a trained checkpoint expects to be asked: prompt template,
answer formats, system prompt, chat template, frame sampling and stop / EOS settings. Today the CLI fills it
(`evr1-eval run --protocol evr1 --evr1-settings FILE`); a training run can fill it the same way (`from_dict` of the
trainer's recorded settings), so evaluation asks the question exactly as training did. Every field is recorded in
the run manifest and its `key()` is part of the run fingerprint: a resume never mixes two prompt formats.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evr1_eval.types import PROTOCOLS, ProtocolName

#: The trainer's answer-format phrases, by problem type (evr1-train `data/prompt.py`), keyed like evr1-rewards'
#: normalised names; eval's own type names are normalised the same way before the lookup.
TRAIN_ANSWER_FORMATS: Mapping[str, str] = {
    "multiple_choice": "the option letter",
    "numerical": "a single number",
    "regression": "a single number",
    "boolean": "Yes or No",
    "ocr": "the recognised text",
    "math": "the final value (or the option letter if options are given)",
    "temporal_grounding": 'JSON {"time": [start_seconds, end_seconds]}',
    "spatial_grounding": 'JSON {"boxes": [x1, y1, x2, y2]}',
    "spatiotemporal_grounding": 'JSON {"time": [s, e], "boxes": {"<second>": [x1, y1, x2, y2], ...}}',
    "tracking": 'JSON {"boxes": {"<second>": [x1, y1, x2, y2], ...}}',
}
_TYPE_SPELLINGS = {"spatial_temporal_grounding": "spatiotemporal_grounding", "multiple choice": "multiple_choice"}
_FIELDS = ("lead", "question", "options", "instruction")
#: Prompt variants of the official protocol: "official" = the benchmark's own wording; the others are model families'
#: published evaluation prompts (a benchmark may define its own version of one, e.g. Qwen3-VL's Video-MME prompt).
PROMPT_VARIANTS = ("official", "qwen3_vl", "vlmevalkit")


def check_variant(variant: str) -> str:
    if variant not in PROMPT_VARIANTS:
        raise ValueError(f"unknown prompt variant {variant!r}; choose one of {', '.join(PROMPT_VARIANTS)}")
    return variant


def _type_key(problem_type: str) -> str:
    key = re.sub(r"[\s\-]+", "_", problem_type.strip().lower())
    return _TYPE_SPELLINGS.get(key, key)


def _lead(n_videos: int, n_images: int) -> str:
    if n_videos and n_images:
        return "Examine the video and the accompanying image carefully."
    if n_videos:
        return "Watch the video carefully."
    if n_images:
        return "Examine the image carefully."
    return "Read the question carefully."


@dataclass(frozen=True, kw_only=True)
class Evr1Settings:
    """How an evr1-trained checkpoint is asked and stopped; defaults reproduce evr1-train's prompt (`data/prompt.py`).

    template: the user text, with `{lead}`, `{question}`, `{options}` ("\\nOptions:\\nA. …" or "") and `{instruction}`;
        media placeholders are not part of it (backends place the frames before the text, as the trainer does).
    think: ask for `<think>…</think>` before `<answer>…</answer>` (`instruction_think`), else `instruction_direct`.
    answer_formats: problem type -> the phrase for `{format}` (unknown types: `default_format`).
    system_prompt / chat_template: the system turn and a Jinja chat template file used in training (None = none / the
        tokenizer's own); recorded, and applied by backends that take them.
    sampling: `SamplingSpec` fields the checkpoint was trained with (fps, max_frames, max_pixels, ...): they replace the
        benchmark defaults, so the model sees the frames it was trained on.
    generation: decoding settings (`max_tokens`, `temperature`, ...), applied where the run gives none explicitly.
    stop / stop_token_ids: strings and token ids that end generation (the model's EOS and end-of-turn tokens).
    source: where the settings came from ("defaults", "cli:FILE", "train:RUN"), for the manifest.
    """

    template: str = "{lead}\nQuestion: {question}{options}\n{instruction}"
    think: bool = True
    instruction_think: str = "Think step by step inside <think></think>, then give {format} inside <answer></answer>."
    instruction_direct: str = "Give {format} inside <answer></answer>."
    answer_formats: Mapping[str, str] = field(default_factory=lambda: dict(TRAIN_ANSWER_FORMATS))
    default_format: str = "the final answer"
    system_prompt: str | None = None
    chat_template: str | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)
    generation: Mapping[str, Any] = field(default_factory=dict)
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
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
        object.__setattr__(self, "stop", tuple(str(s) for s in self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))

    def answer_format(self, problem_type: str) -> str:
        formats = {_type_key(k): v for k, v in self.answer_formats.items()}
        return formats.get(_type_key(problem_type), self.default_format)

    def render(
        self, problem_type: str, question: str, options: Sequence[str], *, n_videos: int = 1, n_images: int = 0
    ) -> str:
        """The user text for one question; `options` are already lettered ("A. red")."""
        instruction = self.instruction_think if self.think else self.instruction_direct
        return self.template.format(
            lead=_lead(n_videos, n_images),
            question=question.strip(),
            options="\nOptions:\n" + "\n".join(options) if options else "",
            instruction=instruction.format(format=self.answer_format(problem_type)),
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["stop"], data["stop_token_ids"] = list(self.stop), list(self.stop_token_ids)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evr1Settings:
        """Build from a mapping (a JSON file, a training run's recorded settings); unknown keys are an error naming the
        valid ones, so a typo never silently falls back to a default."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"evr1 settings: unknown field(s) {unknown}; valid: {', '.join(sorted(names))}")
        kwargs = dict(data)
        for key in ("stop", "stop_token_ids"):
            if key in kwargs:
                kwargs[key] = tuple(kwargs[key] or ())
        return cls(**kwargs)

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
