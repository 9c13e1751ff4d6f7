"""The train -> eval settings file (`evr1_train_protocol.json`): its one schema, written by evr1-train, read by evr1-eval.

Why here: a checkpoint is evaluated as it was trained only if the evaluator reads exactly what the trainer wrote (the
prompt, the frames' `SamplingSpec` / `ImageSpec`, the chat template, the EOS and suppressed tokens, the answer
length). evr1-eval never imports evr1-train, and both depend on evr1-cache, so the schema lives here: `TrainSettings`
(frozen) with `to_json` for the writer and `from_json` for the reader, which checks the format, the version and the
type of every field either side uses, and names the file and the field in its error. docs/train.md ("Run folders and
what a checkpoint records") documents the fields.

The `prompt` section describes how evr1-train renders a row; which of its rules an evaluator can reproduce is the
evaluator's own check. Fields a newer writer adds to `prompt`, `answer` or `adapter` are kept as they are.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evr1_cache.spec import ImageSpec, SamplingSpec

__all__ = [
    "SUPPORTED_VERSIONS",
    "TRAIN_SETTINGS_FILE",
    "TRAIN_SETTINGS_FORMAT",
    "GenerationSettings",
    "PromptSettings",
    "TrainSettings",
    "TrainSettingsError",
    "spec_record",
]

TRAIN_SETTINGS_FILE = "evr1_train_protocol.json"
TRAIN_SETTINGS_FORMAT = "evr1-train-protocol"
#: The version this code writes, and the versions it reads.
TRAIN_SETTINGS_VERSION = 1
SUPPORTED_VERSIONS = (1,)


class TrainSettingsError(ValueError):
    """A settings file that cannot be read as this schema; the message names the file, the field and the fix."""


def spec_record(spec: SamplingSpec | ImageSpec) -> dict[str, Any]:
    """A spec as the file records it: its settings and its cache key (which versions every field that moves pixels)."""
    return {**spec.to_dict(), "key": spec.key()}


def _get(record: Mapping[str, Any], where: str, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    """`record[key]` checked to be `kind` (`default`: optional; a JSON null counts as absent)."""
    value = record.get(key)
    if value is None:
        if default is not ...:
            return default
        if key not in record:
            raise TrainSettingsError(f"{where}: `{key}` is missing")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise TrainSettingsError(f"{where}: `{key}` must be {names}, got {type(value).__name__}")
    return value


def _ints(record: Mapping[str, Any], where: str, key: str) -> tuple[int, ...]:
    values = _get(record, where, key, list, [])
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise TrainSettingsError(f"{where}: `{key}` must be a list of token ids (integers)")
    return tuple(values)


@dataclass(frozen=True)
class PromptSettings:
    """How the trainer renders a row: a template over the lead-in, question, options and answer instruction."""

    template: str
    lead_in: Mapping[str, str]
    instruction: str
    answer_format: Mapping[str, str]
    think: bool
    problem_type_aliases: Mapping[str, str] = field(default_factory=dict)
    system_prompt: str | None = None
    #: Everything else the writer describes (the placeholder and option rules, column names, ...), as written.
    rules: Mapping[str, Any] = field(default_factory=dict)

    _TYPED = ("template", "lead_in", "instruction", "answer_format", "think", "problem_type_aliases", "system_prompt")

    @classmethod
    def from_json(cls, record: Mapping[str, Any], where: str) -> PromptSettings:
        return cls(
            template=_get(record, where, "template", str),
            lead_in={str(k): str(v) for k, v in _get(record, where, "lead_in", dict).items()},
            instruction=_get(record, where, "instruction", str),
            answer_format={str(k): str(v) for k, v in _get(record, where, "answer_format", dict).items()},
            think=_get(record, where, "think", bool),
            problem_type_aliases={
                str(k): str(v) for k, v in _get(record, where, "problem_type_aliases", dict, {}).items()
            },
            system_prompt=_get(record, where, "system_prompt", str, None) or None,
            rules={k: v for k, v in record.items() if k not in cls._TYPED},
        )

    def to_json(self) -> dict[str, Any]:
        typed = {k: v for k, v in dataclasses.asdict(self).items() if k != "rules"}
        return {**typed, **dict(self.rules)}


@dataclass(frozen=True, kw_only=True)
class GenerationSettings:
    """How the trained model generates: where it stops (the first EOS id, kept in the response), how long it may
    answer, which tokens it may never produce, and the samplers of training and validation."""

    eos_token_ids: tuple[int, ...]
    eos_tokens: tuple[str, ...] = ()
    pad_token_id: int | None = None
    stop: str = "after the first token in eos_token_ids (it is part of the response)"
    suppressed_token_ids: tuple[int, ...] = ()
    suppressed_tokens: tuple[str, ...] = ()
    max_new_tokens: int
    train: Mapping[str, Any] = field(default_factory=dict)
    validation: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, record: Mapping[str, Any], where: str) -> GenerationSettings:
        _get(record, where, "eos_token_ids", list)
        return cls(
            eos_token_ids=_ints(record, where, "eos_token_ids"),
            max_new_tokens=_get(record, where, "max_new_tokens", int),
            eos_tokens=tuple(str(t) for t in _get(record, where, "eos_tokens", list, [])),
            pad_token_id=_get(record, where, "pad_token_id", int, None),
            stop=_get(record, where, "stop", str, cls.stop),
            suppressed_token_ids=_ints(record, where, "suppressed_token_ids"),
            suppressed_tokens=tuple(str(t) for t in _get(record, where, "suppressed_tokens", list, [])),
            train=dict(_get(record, where, "train", dict, {})),
            validation=dict(_get(record, where, "validation", dict, {})),
        )

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


@dataclass(frozen=True)
class TrainSettings:
    """One `evr1_train_protocol.json`: how a checkpoint's model was prompted, shown frames and made to generate.

    `video` / `image` are `spec_record`s (settings + key) kept as written: a record from before a spec field existed
    lacks it, and its key still tells whether the pixels match."""

    engine: str
    mode: str
    base_model: str
    prompt: PromptSettings
    video: Mapping[str, Any]
    image: Mapping[str, Any]
    generation: GenerationSettings
    adapter: Mapping[str, Any] | None = None
    answer: Mapping[str, Any] = field(default_factory=dict)
    video_source: str | None = None
    chat_template: str | None = None
    add_generation_prompt: bool = True
    step: int | None = None
    version: int = TRAIN_SETTINGS_VERSION
    #: A tool-using agent's tools (`evr1-train engine.agent=true`): tools, max_turns, max_turn_tokens,
    #: max_response_tokens, budget and tool_config (evr1_cache.tools' ToolBudget / ToolConfig fields); None otherwise.
    agent: Mapping[str, Any] | None = None

    def with_step(self, step: int) -> TrainSettings:
        """The same settings recorded for checkpoint `step`."""
        return dataclasses.replace(self, step=int(step))

    def spec_keys(self) -> dict[str, str]:
        """The cache keys the trainer computed for its video and image specs (to check a reader's own against)."""
        return {kind: rec["key"] for kind, rec in (("video", self.video), ("image", self.image)) if "key" in rec}

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object (the layout docs/train.md documents)."""
        out: dict[str, Any] = {
            "format": TRAIN_SETTINGS_FORMAT,
            "version": self.version,
            "engine": self.engine,
            "mode": self.mode,
            "base_model": self.base_model,
            "adapter": dict(self.adapter) if self.adapter is not None else None,
            "prompt": self.prompt.to_json(),
            "answer": dict(self.answer),
            "sampling": {"video": dict(self.video), "image": dict(self.image), "video_source": self.video_source},
            "chat_template": self.chat_template,
            "add_generation_prompt": self.add_generation_prompt,
            "generation": self.generation.to_json(),
        }
        if self.step is not None:
            out["step"] = self.step
        if self.agent is not None:
            out["agent"] = dict(self.agent)
        return out

    @classmethod
    def from_json(cls, record: object, where: str) -> TrainSettings:
        """The settings of a parsed file (`where` names it in errors); `TrainSettingsError` for anything else."""
        if not isinstance(record, dict):
            raise TrainSettingsError(f"{where}: expected a JSON object, got {type(record).__name__}")
        if record.get("format") != TRAIN_SETTINGS_FORMAT:
            raise TrainSettingsError(
                f"{where}: `format` is {record.get('format')!r}, expected {TRAIN_SETTINGS_FORMAT!r}"
            )
        version = record.get("version")
        if version not in SUPPORTED_VERSIONS or isinstance(version, bool):
            known = ", ".join(map(str, SUPPORTED_VERSIONS))
            newer = isinstance(version, int) and version > max(SUPPORTED_VERSIONS)
            fix = "upgrade evr1 (pip install -U evr1-cache evr1-eval)" if newer else "it was not written by evr1-train"
            raise TrainSettingsError(f"{where}: version {version!r} is not one this reader knows ({known}); {fix}")
        sampling = _get(record, where, "sampling", dict)
        adapter = _get(record, where, "adapter", dict, None)
        return cls(
            engine=_get(record, where, "engine", str, "unknown"),
            mode=_get(record, where, "mode", str, "unknown"),
            base_model=_get(record, where, "base_model", str, ""),
            prompt=PromptSettings.from_json(_get(record, where, "prompt", dict), f"{where} prompt"),
            video=dict(_get(sampling, f"{where} sampling", "video", dict)),
            image=dict(_get(sampling, f"{where} sampling", "image", dict)),
            generation=GenerationSettings.from_json(_get(record, where, "generation", dict), f"{where} generation"),
            adapter=dict(adapter) if adapter is not None else None,
            answer=dict(_get(record, where, "answer", dict, {})),
            video_source=_get(sampling, f"{where} sampling", "video_source", str, None),
            chat_template=_get(record, where, "chat_template", str, None),
            add_generation_prompt=_get(record, where, "add_generation_prompt", bool, True),
            step=_get(record, where, "step", int, None),
            version=int(version),
            agent=_get(record, where, "agent", dict, None),
        )

    @classmethod
    def read(cls, folder: str | Path) -> TrainSettings:
        """The settings file in `folder`, validated."""
        path = Path(folder) / TRAIN_SETTINGS_FILE
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TrainSettingsError(f"{path}: not readable JSON ({exc})") from None
        return cls.from_json(record, str(path))
