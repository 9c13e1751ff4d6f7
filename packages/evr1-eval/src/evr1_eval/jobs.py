"""From CLI arguments to runner jobs: find each benchmark's annotation file, load it, fix frame settings per model.

Shared by `run` and `precompute` so both see the same samples and the same `SamplingSpec` (hence the same cache keys).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from evr1_cache import ImageSpec, SamplingSpec

from evr1_cache.registry import check_fields
from evr1_eval.types import ProtocolName

ANNOTATION_SUFFIXES = (".json", ".jsonl")


def find_annotations(annotations_dir: Path, names: Sequence[str]) -> Path:
    """`DIR/<name>.json(l)` for the benchmark's name or any alias (case-insensitive), else a clear error."""
    annotations_dir = Path(annotations_dir)
    if not annotations_dir.is_dir():
        raise FileNotFoundError(f"--annotations-dir {annotations_dir} is not a directory")
    files = {p.name.lower(): p for p in annotations_dir.iterdir() if p.suffix.lower() in ANNOTATION_SUFFIXES}
    folders = {p.name.lower(): p for p in annotations_dir.iterdir() if p.is_dir()}
    for name in names:
        for suffix in ANNOTATION_SUFFIXES:
            hit = files.get(f"{name.lower()}{suffix}")
            if hit is not None:
                return hit
        if name.lower() in folders:  # an official release's folder of files (TempCompass' questions/, MVBench's json/)
            return folders[name.lower()]
    expected = " or ".join(f"{n}.json(l)" for n in names[:3]) + f" (or a folder {names[0]}/ of them)"
    raise FileNotFoundError(
        f"no annotation file for {names[0]} in {annotations_dir}: expected {expected}; "
        f"found {sorted(files)[:10] or 'no .json/.jsonl files'}"
    )


def file_digest(path: Path) -> str:
    """sha256 of an annotation file, or of a folder's annotation files (names and contents, in name order)."""
    from evr1_eval.api.loading import annotation_files
    from evr1_eval.results import file_sha256

    files = annotation_files(path)
    return file_sha256(*files, names=len(files) > 1 or files[0] != path)


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """`KEY=VALUE` pairs (VALUE parsed as JSON when it parses: 1.0, 64, null) for SamplingSpec fields."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--sampling {item!r}: expected KEY=VALUE, e.g. --sampling fps=1 --sampling max_frames=64")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def sampling_overrides(spec: SamplingSpec, overrides: Mapping[str, Any], model: str | None) -> dict[str, Any]:
    """Validated overrides for `dataclasses.replace(spec, ...)`: unknown keys name the valid ones; the model's family
    fills `family` and `size_factor` unless given (its own frame rule and patch geometry, `evr1_cache.families`);
    `nframes` switches fps off (the spec takes exactly one)."""
    from evr1_cache.families import family_or_none

    out = dict(overrides)
    check_fields("--sampling", out, spec)
    family = family_or_none(model) if model else None
    if family is not None:
        if "family" not in out and not family.spec_rule:
            out["family"] = family.name
        if "size_factor" not in out:
            out["size_factor"] = None if out.get("family") else family.size_factor
            if out.get("family") is not None:  # the family's own pixel budget replaces the benchmark's Qwen one
                out.setdefault("min_pixels", None)
                out.setdefault("max_pixels", None)
    if out.get("nframes") is not None and "fps" not in out:
        out["fps"] = None
    return out


def image_spec_for(spec: SamplingSpec, overrides: Mapping[str, Any] | None = None) -> ImageSpec:
    """Images use their own budget, with the same patch geometry (and model family) as the videos; `overrides` are
    `ImageSpec` fields (a checkpoint's training record gives all of them)."""
    from evr1_cache import ImageSpec

    base = {"size_factor": spec.size_factor, "family": spec.family}
    return ImageSpec(**{**base, **dict(overrides or {})})


def load_job(
    bench: Any,
    annotations_dir: Path,
    media_root: Path | None,
    protocol: Any = None,
    *,
    allow_outside_media: bool = False,
    allow_remote_media: Iterable[str] = (),
) -> Any:
    """Load every sample of one benchmark into a runner `Job` (bad rows kept as load errors), with prompts for
    `protocol` (a `ProtocolSettings`; default: the official protocol); the media rules are `Benchmark.load`'s."""
    from evr1_eval.protocol import ProtocolSettings
    from evr1_eval.runner import Job

    protocol = protocol or ProtocolSettings()
    path = find_annotations(annotations_dir, [bench.name, *getattr(bench, "aliases", ())])
    loaded = bench.load(
        path, media_root, protocol=protocol,
        allow_outside_media=allow_outside_media, allow_remote_media=allow_remote_media,
    )  # fmt: skip
    return Job(
        benchmark=bench,
        samples=loaded.samples,
        source=file_digest(path),
        load_errors=tuple(loaded.errors),
        protocol=protocol.record(),
    )


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """A run's protocol, preset and what follows from them. Precedence, for every setting: an explicit command-line
    value, then the preset, then the evr1 settings (evr1 protocol), then the built-in default (greedy, 1,024 tokens,
    the benchmark's frame defaults)."""

    protocol: Any  # ProtocolSettings
    preset: Any = None  # Preset | None
    response_filter: str = "none"
    system_prompt: str | None = None
    #: The checkpoint the settings come from (`--from-train`; a `train_protocol.TrainedCheckpoint`), else None.
    trained: Any = None

    @property
    def evr1(self) -> Any:
        """The evr1 protocol's settings when the run uses that protocol, else None."""
        return self.protocol.evr1 if self.protocol.protocol == "evr1" else None

    def sampling_for(self, benchmark: str) -> dict[str, Any]:
        evr1 = dict(self.evr1.sampling) if self.evr1 is not None else {}
        return {**evr1, **(self.preset.sampling_for(benchmark) if self.preset else {})}

    def image_sampling(self) -> dict[str, Any]:
        """`ImageSpec` fields from the evr1 settings (a checkpoint's training record), else none."""
        return dict(self.evr1.image_sampling) if self.evr1 is not None else {}

    def chat_template(self) -> str | None:
        """The chat template the evr1 settings name (the text), else None (the tokenizer's own)."""
        return self.evr1.resolved_chat_template() if self.evr1 is not None else None

    def generation(self, explicit: Mapping[str, Any]) -> dict[str, Any]:
        """GenerationParams keyword arguments."""
        evr1 = self.evr1
        out: dict[str, Any] = {}
        if evr1 is not None:
            out.update(evr1.generation)
            out.update({k: v for k in ("stop", "stop_token_ids", "suppress_token_ids") if (v := getattr(evr1, k))})
        if self.preset is not None:
            out.update(self.preset.generation)
        out.update(explicit)
        if "stop" in out:
            out["stop"] = tuple(out["stop"] or ())
        return out

    def announcements(self) -> list[str]:
        """What a user must know about settings the backends cannot apply."""
        if self.preset is None or not self.preset.unapplied_generation:
            return []
        shown = ", ".join(f"{k}={v}" for k, v in self.preset.unapplied_generation.items())
        return [
            f"preset {self.preset.name} publishes {shown}, which evr1-eval's backends do not apply yet "
            "(recorded in the manifest)"
        ]


def resolve_settings(
    *,
    protocol: str | None = "official",
    preset: str | None = None,
    prompt_variant: str | None = None,
    evr1_settings: Path | None = None,
    response_filter: str | None = None,
    system_prompt: str | None = None,
    from_train: Path | None = None,
) -> RunSettings:
    """The run settings of `run` (and `precompute`, so both use the same frames). `protocol=None` means the default:
    evr1 with `from_train` (a checkpoint is asked in its training format), else official."""
    from evr1_eval.presets import get_preset
    from evr1_eval.protocol import Evr1Settings, ProtocolSettings

    trained = None
    if from_train is not None:
        from evr1_eval.train_protocol import load_trained

        if evr1_settings:
            raise ValueError("--from-train and --evr1-settings both give the evr1 settings: pass one of them")
        if protocol == "official":
            raise ValueError(
                "--from-train asks in the checkpoint's training format (the evr1 protocol); drop --protocol official "
                "(both protocols' scores are computed for every answer anyway)"
            )
        trained = load_trained(from_train)
    protocol = protocol or ("evr1" if trained is not None else "official")
    chosen = get_preset(preset) if preset else None
    variant = prompt_variant or (chosen.prompt_variant if chosen and protocol == "official" else "official")
    evr1 = trained.settings if trained is not None else Evr1Settings()
    if evr1_settings:
        evr1 = Evr1Settings.from_file(evr1_settings)
    if evr1_settings and protocol != "evr1":
        raise ValueError("--evr1-settings applies to --protocol evr1 only")
    system = system_prompt
    if system is None and chosen is not None:
        system = chosen.system_prompt
    if system is None and protocol == "evr1":
        system = evr1.system_prompt
    return RunSettings(
        # the cast is checked: ProtocolSettings refuses an unknown protocol by name
        protocol=ProtocolSettings(protocol=cast(ProtocolName, protocol), prompt_variant=variant, evr1=evr1),
        preset=chosen,
        response_filter=response_filter or (chosen.response_filter if chosen else "none"),
        system_prompt=system,
        trained=trained,
    )
