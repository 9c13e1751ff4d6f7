"""Named groups of a VLM's parameters (vision tower, merger, embeddings, ...) as regexes, and freezing by pattern.

Why names: users think "freeze the vision tower", not `model\\.visual\\.blocks\\..*`; and the same names pick the
modules LoRA leaves out. A group is a regex over parameter (or module) names that covers the families evr1 trains —
Qwen2/2.5-VL, Qwen3-VL(-MoE) and GLM-4V (`visual.*`, with `visual.merger` / `visual.deepstack_merger_list` /
`visual.downsample` as the connector), InternVL and LLaVA-style models (`vision_tower.*`, `multi_modal_projector.*`).
Anything that is not a group name is used as a regex itself (full match). A spec that matches no parameter is an
error naming a few real parameter names, so a typo never silently trains everything.

Names (stable): MODULE_GROUPS, register_module_group(name, regex), pattern_of(spec), freeze_modules(model, specs)
-> FreezeReport, exclude_regex(specs), FreezeReport
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evr1_cache.registry import did_you_mean

_PREFIX = r"(?:.*\.)?"
_SUFFIX = r"(?:\..*)?"

#: group name -> regex over parameter / module names (full match).
MODULE_GROUPS: dict[str, str] = {
    # the vision encoder without its connector
    "vision_tower": (
        rf"{_PREFIX}(?:visual\.(?!merger\b|deepstack_merger_list\b|downsample\b)[^.]+|vision_tower|vision_model)"
        rf"{_SUFFIX}"
    ),
    # the connector from vision features to the language model (Qwen's merger, LLaVA/InternVL's projector)
    "merger": rf"{_PREFIX}(?:visual\.(?:merger|deepstack_merger_list|downsample)|multi_modal_projector|mlp1){_SUFFIX}",
    # token embeddings (with tied weights also the output head, which shares the tensor)
    "embeddings": rf"{_PREFIX}(?:embed_tokens|wte|word_embeddings){_SUFFIX}",
    "lm_head": rf"{_PREFIX}lm_head{_SUFFIX}",
    # the language model's transformer blocks
    "language_model": rf"{_PREFIX}(?:language_model\.)?layers\.\d+{_SUFFIX}",
}


def register_module_group(name: str, regex: str) -> None:
    """Add a group (e.g. for a new model family); an existing name is refused, an invalid regex too."""
    if name in MODULE_GROUPS:
        raise ValueError(f"module group {name!r} already exists: {MODULE_GROUPS[name]}")
    re.compile(regex)
    MODULE_GROUPS[name] = regex


def pattern_of(spec: str) -> re.Pattern[str]:
    """The compiled regex of a group name or of a regex spec; a bare word that is not a group is an error."""
    if spec in MODULE_GROUPS:
        return re.compile(MODULE_GROUPS[spec])
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", spec):
        hint = did_you_mean(spec, MODULE_GROUPS, n=1)
        hint = f"{hint} " if hint else ""
        raise ValueError(
            f"unknown module group {spec!r}; {hint}groups: {sorted(MODULE_GROUPS)} (or give a regex over parameter "
            r"names, e.g. 'model\.visual\.blocks\.[0-3]\..*')"
        )
    try:
        return re.compile(spec)
    except re.error as exc:
        raise ValueError(f"module pattern {spec!r} is not a valid regex: {exc}") from None


@dataclass(frozen=True)
class FreezeReport:
    """What `freeze_modules` did: parameter counts (elements) overall and per spec."""

    frozen: int
    total: int
    trainable: int
    by_spec: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        if not self.frozen:
            return f"all {_count(self.total)} parameters trainable"
        share = self.frozen / self.total if self.total else 0.0
        parts = "".join(f"; {k}: {_count(v)}" for k, v in self.by_spec.items())
        return (
            f"frozen {_count(self.frozen)} of {_count(self.total)} parameters ({share:.0%}{parts}); "
            f"trainable {_count(self.trainable)}"
        )


def _count(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.2f} M" if n >= 1e5 else f"{n:,}"


def _unique(params: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """(name, parameter) once per tensor (tied weights appear under two names)."""
    first: dict[int, tuple[str, Any]] = {}
    for name, p in params:
        first.setdefault(id(p), (name, p))
    return list(first.values())


def freeze_modules(model: Any, specs: Sequence[str]) -> FreezeReport:
    """Set `requires_grad=False` on every parameter whose name fully matches a spec (group name or regex)."""
    named = list(model.named_parameters(remove_duplicate=False))
    compiled = [(spec, pattern_of(spec)) for spec in specs]
    by_spec: dict[str, int] = {}
    for spec, pattern in compiled:
        hits = [(n, p) for n, p in named if pattern.fullmatch(n)]
        if not hits:
            sample = ", ".join(n for n, _ in named[:: max(1, len(named) // 6)][:6])
            raise ValueError(
                f"evr1.frozen_modules: {spec!r} matches no parameter of {type(model).__name__}; parameter names "
                f"look like: {sample}"
            )
        for _, p in hits:
            p.requires_grad_(False)
        by_spec[spec] = sum(p.numel() for _, p in _unique(hits))
    return replace(trainable_report(model), by_spec=by_spec)


def trainable_report(model: Any) -> FreezeReport:
    """Counts without changing anything (e.g. after PEFT froze the base model)."""
    unique = _unique(model.named_parameters(remove_duplicate=False))
    total = sum(p.numel() for _, p in unique)
    trainable = sum(p.numel() for _, p in unique if p.requires_grad)
    return FreezeReport(frozen=total - trainable, total=total, trainable=trainable)


def exclude_regex(specs: Sequence[str]) -> str | None:
    """One regex (peft's / verl's `exclude_modules` string form, full match) for the union of `specs`."""
    return "|".join(f"(?:{pattern_of(s).pattern})" for s in specs) or None
