"""Published evaluation settings as named presets: one `Preset` per (model family, setting), in a registry.

A preset is what a model family's report or official repository says it was evaluated with: frame rate and cap,
pixel and token budgets, prompt variant, decoding, and how the answer is read (thinking models: the text after the
last `</think>`), globally and per benchmark, each value with its source. `evr1-eval run --preset NAME` applies it;
explicit CLI flags still win, and the manifest records the preset and its sources. A new family is one module that
calls `register(Preset(...))` and one import line in `evr1_eval/presets/__init__.py`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from evr1_cache.registry import lookup, register_unique
from evr1_eval.protocol import check_variant

#: How a response is read before it is scored: as returned, or the text after its last `</think>` (the Qwen3-VL
#: evaluation code's `response.split("</think>")[-1].strip()` for thinking models).
ResponseFilter = Literal["none", "after_think"]
RESPONSE_FILTERS: tuple[ResponseFilter, ...] = ("none", "after_think")
#: Generation fields evr1-eval's backends apply (`GenerationParams`).
GENERATION_FIELDS = (
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "stop",
    "presence_penalty",
    "repetition_penalty",
)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a value comes from: a repository file at a commit, an issue comment by a maintainer, a report table."""

    what: str
    where: str


@dataclass(frozen=True, kw_only=True)
class Preset:
    """One family's published evaluation settings.

    sampling: `SamplingSpec` fields for every benchmark; benchmark_sampling: per-benchmark fields on top of those.
    generation: `GenerationParams` fields (max_tokens, temperature, top_p, top_k, seed, stop, presence_penalty,
        repetition_penalty).
    unapplied_generation: published decoding settings evr1-eval's backends cannot apply (none today): recorded in
        the manifest and announced when a run uses the preset, never silently lost.
    """

    name: str
    family: str
    description: str
    sources: tuple[Source, ...]
    sampling: Mapping[str, Any] = field(default_factory=dict)
    benchmark_sampling: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    generation: Mapping[str, Any] = field(default_factory=dict)
    unapplied_generation: Mapping[str, Any] = field(default_factory=dict)
    prompt_variant: str = "official"
    system_prompt: str | None = None
    response_filter: ResponseFilter = "none"
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_variant(self.prompt_variant)
        if self.response_filter not in RESPONSE_FILTERS:
            raise ValueError(f"preset {self.name}: response_filter must be one of {RESPONSE_FILTERS}")
        unknown = sorted(set(self.generation) - set(GENERATION_FIELDS))
        if unknown:
            raise ValueError(
                f"preset {self.name}: generation fields {unknown} are not applied by evr1-eval's backends; "
                "put them under unapplied_generation"
            )
        if not self.sources:
            raise ValueError(f"preset {self.name}: a preset must cite its sources")

    def sampling_for(self, benchmark: str) -> dict[str, Any]:
        """`SamplingSpec` fields for one benchmark (global, then the benchmark's own)."""
        return {**dict(self.sampling), **dict(self.benchmark_sampling.get(benchmark, {}))}

    def record(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["sources"] = [dataclasses.asdict(s) for s in self.sources]
        data["notes"] = list(self.notes)
        return data


_PRESETS: dict[str, Preset] = {}


def register(preset: Preset) -> Preset:
    return register_unique(_PRESETS, preset.name, preset, "preset")


def get_preset(name: str) -> Preset:
    return lookup(_PRESETS, name, "preset", cutoff=0.4)


def available_presets() -> list[str]:
    return sorted(_PRESETS)


def apply_response_filter(text: str, how: ResponseFilter) -> str:
    if how == "after_think":
        return text.split("</think>")[-1].strip()
    return text
