"""Find an evr1-train checkpoint and turn what it records about its training (`evr1_train_protocol.json`) into `Evr1Settings`.

Why: a checkpoint is evaluated as it was trained only if the evaluator asks with the trainer's prompt, renders it
with the trainer's chat template, shows the frames of the trainer's `SamplingSpec` / `ImageSpec`, suppresses the
tokens the trainer suppressed and stops where the trained model stops (its EOS ids) after at most as many tokens as
training allowed. evr1-train writes all of that beside every checkpoint (docs/train.md, "Run folders and what a
checkpoint records"); the file's one schema, shared with the writer, is `evr1_cache.TrainSettings` (it validates the
file and refuses versions it does not know); this module checks that the recorded prompt rules are ones this evaluator
reproduces and maps them onto its own types. evr1-eval never imports evr1-train (import contract).

`evr1-eval run --from-train RUN_OR_CHECKPOINT` accepts a run folder (its newest checkpoint), a `checkpoints/` folder,
a `checkpoints/step_N` folder, its `actor/` model folder, or a merged model folder that carries the file.

Names (stable): TrainedCheckpoint, find_checkpoint, read_protocol, settings_from_protocol, TrainProtocolError
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_cache import TRAIN_SETTINGS_FILE as PROTOCOL_FILE
from evr1_cache import TrainSettings, TrainSettingsError
from evr1_eval.protocol import TRAIN_LEADS, Evr1Settings

if TYPE_CHECKING:
    from evr1_cache import ImageSpec, PromptSettings, SamplingSpec
    from evr1_eval.backends.base import GenerationParams

#: The trainer's descriptions of how it places media markers and writes options, in the versions read here.
_PLACEHOLDERS_RULE = "<video>/<image> prepended, one per media item the question text does not place itself"
_OPTIONS_RULE = "\nOptions:\n{one option per line, as given in the row}"
_TEMPLATE_FIELDS = ("placeholders", "lead_in", "question", "options", "instruction")
_LATEST = "latest.json"


class TrainProtocolError(ValueError):
    """A `--from-train` path is not an evr1-train checkpoint, or its record cannot be read; the message says why."""


@dataclass(frozen=True)
class TrainedCheckpoint:
    """One checkpoint as `--from-train` found it: where its model is, and how it was trained."""

    #: The folder that holds `evr1_train_protocol.json` (a `step_N` folder, a run folder or a merged model).
    folder: Path
    #: The Hugging Face model folder to load (`step_N/actor`, or `step_N/merged` for a LoRA run).
    model_dir: Path
    step: int | None
    record: TrainSettings = field(repr=False)
    settings: Evr1Settings = field(repr=False)

    def describe(self) -> str:
        at = f" (step {self.step})" if self.step is not None else ""
        return f"{self.folder}{at}"


def _is_protocol_dir(path: Path) -> bool:
    return (path / PROTOCOL_FILE).is_file()


def _from_checkpoints_dir(ckpts: Path) -> Path:
    pointer = ckpts / _LATEST
    if pointer.is_file():
        try:
            target = ckpts / str(json.loads(pointer.read_text(encoding="utf-8"))["path"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TrainProtocolError(f"--from-train: {pointer} is unreadable ({exc}); pass a step_N folder") from None
        if target.is_dir():
            return target
    steps = sorted(p for p in ckpts.glob("step_*") if p.is_dir() and _is_protocol_dir(p))
    if not steps:
        raise TrainProtocolError(f"--from-train: {ckpts} holds no checkpoint (no step_*/{PROTOCOL_FILE})")
    return steps[-1]


def find_checkpoint(path: str | Path) -> tuple[Path, Path]:
    """`(folder holding the protocol file, model folder)` for any of the accepted layouts (see the module docstring)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise TrainProtocolError(f"--from-train {path}: no such file or folder ({p.absolute()})")
    if p.is_file():
        if p.name != PROTOCOL_FILE:
            raise TrainProtocolError(f"--from-train {path} is a file; pass the run or checkpoint folder")
        p = p.parent
    if (p / "checkpoints").is_dir() and not (p / "actor").is_dir():
        p = _from_checkpoints_dir(p / "checkpoints")
    elif p.name == "checkpoints" or (p / _LATEST).is_file():
        p = _from_checkpoints_dir(p)
    if (p / "config.json").is_file() and not _is_protocol_dir(p) and _is_protocol_dir(p.parent):
        return p.parent, p  # the actor/ (or merged/) folder of a step folder
    if not _is_protocol_dir(p):
        raise TrainProtocolError(
            f"--from-train {path}: no {PROTOCOL_FILE} in {p} (evr1-train's local engine writes one into its run folder "
            "and every checkpoints/step_N folder); pass one of those, or use --protocol evr1 --evr1-settings FILE"
        )
    return p, _model_dir(p, path)


def _model_dir(folder: Path, given: str | Path) -> Path:
    if (folder / "config.json").is_file():
        return folder  # a merged model folder carrying the record
    for name in ("actor", "merged"):
        if (folder / name / "config.json").is_file():
            return folder / name
    if (folder / "actor" / "adapter_config.json").is_file():
        raise TrainProtocolError(
            f"--from-train {given}: {folder / 'actor'} is a LoRA adapter; merge it into a full model first "
            f"(evr1-train merge {folder}), then pass --from-train {folder} again"
        )
    if (folder / "checkpoints").is_dir():
        raise TrainProtocolError(f"--from-train {given}: the run in {folder} has no complete checkpoint yet")
    raise TrainProtocolError(f"--from-train {given}: {folder} holds no model (no actor/config.json)")


def read_protocol(folder: Path) -> TrainSettings:
    """The validated settings file in `folder` (its schema: `evr1_cache.TrainSettings`)."""
    try:
        return TrainSettings.read(folder)
    except TrainSettingsError as exc:
        raise TrainProtocolError(str(exc)) from None


def _check_rules(prompt: PromptSettings, where: str) -> None:
    """The parts of the prompt the file describes in words must be the ones this reader reproduces."""
    template = prompt.template
    try:
        template.format(**dict.fromkeys(_TEMPLATE_FIELDS, ""))
    except (KeyError, IndexError, ValueError) as exc:
        raise TrainProtocolError(
            f"{where}: prompt template {template!r} uses a field this reader lacks ({exc!r})"
        ) from None
    for key, rule in (("placeholders", _PLACEHOLDERS_RULE), ("options", _OPTIONS_RULE)):
        if key in prompt.rules and prompt.rules[key] != rule:
            raise TrainProtocolError(
                f"{where}: prompt {key} rule {prompt.rules[key]!r} is not one this evr1-eval reproduces ({rule!r}); "
                "upgrade evr1-eval"
            )
    missing = sorted(set(TRAIN_LEADS) - set(prompt.lead_in))
    if missing:
        raise TrainProtocolError(f"{where}: prompt lead_in lacks {missing}")
    if "{answer_format}" not in prompt.instruction:
        raise TrainProtocolError(f"{where}: prompt instruction {prompt.instruction!r} has no {{answer_format}}")


def _spec_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "key"}


def settings_from_protocol(record: TrainSettings, source: str) -> Evr1Settings:
    """The evr1 protocol's settings that reproduce the recorded training: prompt, chat template, frames, decoding."""
    where = f"{source} {PROTOCOL_FILE}"
    prompt = record.prompt
    _check_rules(prompt, where)
    formats = dict(prompt.answer_format)
    default = formats.pop("default", "the final answer")
    instruction = prompt.instruction.replace("{answer_format}", "{format}")
    gen = record.generation
    decoding: dict[str, Any] = {"max_tokens": gen.max_new_tokens, "temperature": 0.0}
    if gen.validation.get("do_sample", False):  # validated with the training sampler: so does the evaluator
        decoding.update(
            temperature=float(gen.train.get("temperature", 1.0)),
            top_p=float(gen.train.get("top_p", 1.0)),
            top_k=int(gen.train.get("top_k", -1)),
        )
    defaults = Evr1Settings()
    return Evr1Settings(
        template=prompt.template.replace("{lead_in}", "{lead}"),
        leads={k: prompt.lead_in[k] for k in TRAIN_LEADS},
        think=prompt.think,
        instruction_think=instruction if prompt.think else defaults.instruction_think,
        instruction_direct=defaults.instruction_direct if prompt.think else instruction,
        answer_formats=formats,
        default_format=default,
        problem_type_aliases=dict(prompt.problem_type_aliases),
        system_prompt=prompt.system_prompt,
        chat_template=record.chat_template,
        sampling=_spec_fields(record.video),
        image_sampling=_spec_fields(record.image),
        generation=decoding,
        stop_token_ids=gen.eos_token_ids,
        suppress_token_ids=gen.suppressed_token_ids,
        source=f"train:{source}",
    )


def load_trained(path: str | Path) -> TrainedCheckpoint:
    """`--from-train PATH`: find the checkpoint, read and validate its record, build its `Evr1Settings`."""
    folder, model_dir = find_checkpoint(path)
    record = read_protocol(folder)
    return TrainedCheckpoint(
        folder=folder,
        model_dir=model_dir,
        step=record.step,
        record=record,
        settings=settings_from_protocol(record, str(folder)),
    )


def _spec_diff(label: str, trained: Mapping[str, Any], spec: SamplingSpec | ImageSpec) -> list[str]:
    """Fields whose values differ. A field the training record lacks (a checkpoint written before the spec gained it)
    is not a difference by itself: the recorded spec key, compared separately, versions every field that moves pixels."""
    ours = spec.to_dict()
    return [
        f"{label}.{k}: {ours.get(k)!r} here, {trained.get(k)!r} in training"
        for k in sorted(trained)
        if ours.get(k) != trained.get(k)
    ]


def differences(
    trained: TrainedCheckpoint,
    *,
    params: GenerationParams,
    video_specs: Mapping[str, SamplingSpec],
    image_spec: ImageSpec,
    system_prompt: str | None,
    model: str | None,
    response_filter: str,
    without_video: bool,
) -> list[str]:
    """Every evaluation setting of this run that differs from the checkpoint's training settings, one line each
    (`params`: the run's GenerationParams; `video_specs`: benchmark -> SamplingSpec; `model`: an explicit --model)."""
    s = trained.settings
    want = {
        "max_tokens": s.generation.get("max_tokens"),
        "temperature": s.generation.get("temperature", 0.0),
        "stop": (),
        "stop_token_ids": s.stop_token_ids,
        "suppress_token_ids": s.suppress_token_ids,
        "presence_penalty": 0.0,
        "repetition_penalty": 1.0,
    }
    if want["temperature"]:
        want.update({k: s.generation[k] for k in ("top_p", "top_k") if k in s.generation})
    lines = [
        f"{k}: {_show(getattr(params, k))} here, {_show(v)} in training"
        for k, v in want.items()
        if _show(getattr(params, k)) != _show(v)
    ]
    for bench, spec in video_specs.items():
        lines += _spec_diff(f"{bench} frames", s.sampling, spec)
    lines += _spec_diff("image", s.image_sampling, image_spec)
    if (system_prompt or None) != (s.system_prompt or None):
        lines.append(f"system prompt: {system_prompt!r} here, {s.system_prompt!r} in training")
    if model and Path(model).expanduser().resolve() != trained.model_dir.resolve():
        lines.append(f"model: {model} here, the checkpoint's is {trained.model_dir}")
    if response_filter != "none":
        lines.append(f"response filter: {response_filter} here (training scores the whole answer)")
    if without_video:
        lines.append("--without-video: no video is shown (training showed every row's videos)")
    return lines


def _show(value: Any) -> Any:
    return list(value) if isinstance(value, (tuple, list)) else value
