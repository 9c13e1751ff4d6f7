"""Read what an evr1-train checkpoint records about its training (`evr1_train_protocol.json`) into `Evr1Settings`.

Why: a checkpoint is evaluated as it was trained only if the evaluator asks with the trainer's prompt, renders it
with the trainer's chat template, shows the frames of the trainer's `SamplingSpec` / `ImageSpec`, suppresses the
tokens the trainer suppressed and stops where the trained model stops (its EOS ids) after at most as many tokens as
training allowed. evr1-train writes all of that beside every checkpoint (docs/train.md, "Run folders and what a
checkpoint records"); this module validates the file, refuses versions it does not know, and maps it onto the
evaluator's own types. evr1-eval never imports evr1-train (import contract): the JSON file is the whole interface.

`evr1-eval run --from-train RUN_OR_CHECKPOINT` accepts a run folder (its newest checkpoint), a `checkpoints/` folder,
a `checkpoints/step_N` folder, its `actor/` model folder, or a merged model folder that carries the file.

Names (stable): PROTOCOL_FILE, SUPPORTED_VERSIONS, TrainedCheckpoint, find_checkpoint, read_protocol,
settings_from_protocol, TrainProtocolError
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evr1_eval.protocol import Evr1Settings
from evr1_rewards import RewardError, normalize_problem_type
from evr1_rewards.prompt_format import LEADS

PROTOCOL_FILE = "evr1_train_protocol.json"
PROTOCOL_FORMAT = "evr1-train-protocol"
#: Versions of the file this evr1-eval reads.
SUPPORTED_VERSIONS = (1,)
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
    record: Mapping[str, Any] = field(repr=False)
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


def _require(record: Mapping[str, Any], where: str, key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in record:
        raise TrainProtocolError(f"{where}: `{key}` is missing")
    value = record[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise TrainProtocolError(f"{where}: `{key}` must be {names}, got {type(value).__name__}")
    return value


def read_protocol(folder: Path) -> dict[str, Any]:
    """The validated record in `folder` (format and version checked; every field this reader uses typed)."""
    path = folder / PROTOCOL_FILE
    where = str(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TrainProtocolError(f"{where}: not readable JSON ({exc})") from None
    if not isinstance(record, dict):
        raise TrainProtocolError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if record.get("format") != PROTOCOL_FORMAT:
        raise TrainProtocolError(f"{where}: `format` is {record.get('format')!r}, expected {PROTOCOL_FORMAT!r}")
    version = record.get("version")
    if version not in SUPPORTED_VERSIONS:
        known = ", ".join(map(str, SUPPORTED_VERSIONS))
        newer = isinstance(version, int) and version > max(SUPPORTED_VERSIONS)
        fix = "upgrade evr1-eval (pip install -U evr1-eval)" if newer else "it was not written by evr1-train"
        raise TrainProtocolError(f"{where}: version {version!r} is not one this evr1-eval reads ({known}); {fix}")
    prompt = _require(record, where, "prompt", dict)
    for key, kind in (("template", str), ("lead_in", dict), ("instruction", str), ("answer_format", dict)):
        _require(prompt, f"{where} prompt", key, kind)
    _require(prompt, f"{where} prompt", "think", bool)
    sampling = _require(record, where, "sampling", dict)
    _require(sampling, f"{where} sampling", "video", dict)
    _require(sampling, f"{where} sampling", "image", dict)
    generation = _require(record, where, "generation", dict)
    _require(generation, f"{where} generation", "eos_token_ids", list)
    _require(generation, f"{where} generation", "max_new_tokens", int)
    if record.get("chat_template") is not None and not isinstance(record["chat_template"], str):
        raise TrainProtocolError(f"{where}: `chat_template` must be a string or null")
    return record


def _check_rules(prompt: Mapping[str, Any], where: str) -> None:
    """The parts of the prompt the file describes in words must be the ones this reader reproduces."""
    template = prompt["template"]
    try:
        template.format(**dict.fromkeys(_TEMPLATE_FIELDS, ""))
    except (KeyError, IndexError, ValueError) as exc:
        raise TrainProtocolError(
            f"{where}: prompt template {template!r} uses a field this reader lacks ({exc!r})"
        ) from None
    for key, rule in (("placeholders", _PLACEHOLDERS_RULE), ("options", _OPTIONS_RULE)):
        if key in prompt and prompt[key] != rule:
            raise TrainProtocolError(
                f"{where}: prompt {key} rule {prompt[key]!r} is not one this evr1-eval reproduces ({rule!r}); "
                "upgrade evr1-eval"
            )
    missing = sorted(set(LEADS) - set(prompt["lead_in"]))
    if missing:
        raise TrainProtocolError(f"{where}: prompt lead_in lacks {missing}")
    aliases = prompt.get("problem_type_aliases")
    for name in set(prompt["answer_format"]) - {"default"}:  # the one vocabulary (evr1-rewards) must know each type
        try:
            normalize_problem_type(name, aliases=aliases if isinstance(aliases, Mapping) else None)
        except RewardError as exc:
            raise TrainProtocolError(
                f"{where}: prompt answer_format: {exc} (a plugin's scorer not imported?)"
            ) from None
    if "{answer_format}" not in prompt["instruction"]:
        raise TrainProtocolError(f"{where}: prompt instruction {prompt['instruction']!r} has no {{answer_format}}")


def _spec_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "key"}


def settings_from_protocol(record: Mapping[str, Any], source: str) -> Evr1Settings:
    """The evr1 protocol's settings that reproduce the recorded training: prompt, chat template, frames, decoding."""
    where = f"{source} {PROTOCOL_FILE}"
    prompt = record["prompt"]
    _check_rules(prompt, where)
    formats = {str(k): str(v) for k, v in prompt["answer_format"].items()}
    default = formats.pop("default", "the final answer")
    instruction = str(prompt["instruction"]).replace("{answer_format}", "{format}")
    think = bool(prompt["think"])
    gen = record["generation"]
    validation = gen.get("validation") if isinstance(gen.get("validation"), Mapping) else {}
    sampled = bool(validation.get("do_sample", False))
    train = gen.get("train") if isinstance(gen.get("train"), Mapping) else {}
    decoding: dict[str, Any] = {"max_tokens": int(gen["max_new_tokens"]), "temperature": 0.0}
    if sampled:  # the trainer validated with its training sampler: so does the evaluator (numbers then vary)
        decoding.update(
            temperature=float(train.get("temperature", 1.0)),
            top_p=float(train.get("top_p", 1.0)),
            top_k=int(train.get("top_k", -1)),
        )
    defaults = Evr1Settings()
    return Evr1Settings(
        template=str(prompt["template"]).replace("{lead_in}", "{lead}"),
        leads={k: str(prompt["lead_in"][k]) for k in LEADS},
        think=think,
        instruction_think=instruction if think else defaults.instruction_think,
        instruction_direct=defaults.instruction_direct if think else instruction,
        answer_formats=formats,
        default_format=default,
        problem_type_aliases={str(k): str(v) for k, v in (prompt.get("problem_type_aliases") or {}).items()},
        system_prompt=prompt.get("system_prompt") or None,
        chat_template=record.get("chat_template"),
        sampling=_spec_fields(record["sampling"]["video"]),
        image_sampling=_spec_fields(record["sampling"]["image"]),
        generation=decoding,
        stop_token_ids=tuple(int(i) for i in gen["eos_token_ids"]),
        suppress_token_ids=tuple(int(i) for i in gen.get("suppressed_token_ids") or ()),
        source=f"train:{source}",
    )


def load_trained(path: str | Path) -> TrainedCheckpoint:
    """`--from-train PATH`: find the checkpoint, read and validate its record, build its `Evr1Settings`."""
    folder, model_dir = find_checkpoint(path)
    record = read_protocol(folder)
    step = record.get("step")
    return TrainedCheckpoint(
        folder=folder,
        model_dir=model_dir,
        step=int(step) if isinstance(step, int) else None,
        record=record,
        settings=settings_from_protocol(record, str(folder)),
    )


def recorded_spec_keys(record: Mapping[str, Any]) -> dict[str, str]:
    """The cache keys the trainer computed for its video and image specs (to check ours against)."""
    out = {}
    for kind in ("video", "image"):
        key = record["sampling"][kind].get("key")
        if isinstance(key, str):
            out[kind] = key
    return out


def _spec_diff(label: str, trained: Mapping[str, Any], spec: Any) -> list[str]:
    """Fields whose values differ. A field the training record lacks (a checkpoint written before the spec gained it)
    is not a difference by itself: the recorded spec key, compared separately, versions every field that moves pixels."""
    ours = spec.to_dict() if callable(getattr(spec, "to_dict", None)) else dict(vars(spec))
    return [
        f"{label}.{k}: {ours.get(k)!r} here, {trained.get(k)!r} in training"
        for k in sorted(trained)
        if ours.get(k) != trained.get(k)
    ]


def differences(
    trained: TrainedCheckpoint,
    *,
    params: Any,
    video_specs: Mapping[str, Any],
    image_spec: Any,
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
