"""What the viewer shows, as typed records: eval and train each convert their own run folders into these.

Why here, in evr1-cache: both evr1-eval and evr1-train depend on evr1-cache (which owns the frames), and neither may
depend on the other, so the one viewer they share lives in the package below both. These records are stdlib only;
the site writer (`evr1_cache.viewer.site`) needs the `viewer` extra (Jinja2).

A `SampleRecord` is one prompt with its media and every response it got: one response for an evaluation sample, the
n rollouts of a group for a training step. Its `key` matches the same prompt across runs (side-by-side views).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from evr1_cache.prompt_record import PromptRecord, PromptRecordError

MediaKind = Literal["video", "image"]
RunKind = Literal["eval", "train"]
Source = Literal["online", "offline"]
#: A sample's verdict: every response correct / none / some, an error row, or no verdict (unscored, judge pending).
Verdict = Literal["correct", "wrong", "mixed", "error", "unscored"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaRef:
    """One video or image of a prompt, and where its frames live in an evr1-cache.

    `frame_indices` / `timestamps` are what the model was given (recorded at run time); the thumbnails are read from
    `cache_root / cache_file` and checked against them. Without a cache entry the strip shows the timestamps only,
    with `note` saying why (decoded on the fly, cache not given...).
    """

    kind: MediaKind
    source: str
    cache_root: str | None = None
    #: The entry's path relative to `cache_root` (as `evr1-cache build` writes it into `video_cache[i].file`).
    cache_file: str | None = None
    frame_indices: tuple[int, ...] = ()
    timestamps: tuple[float, ...] = ()
    note: str | None = None
    #: Only these positions of the entry (a tool's frames, picked from the stream it serves from); () = all.
    positions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseRecord:
    """One model response and how it was scored."""

    text: str | None
    #: What the extractor read from `text` (the answer); highlighted in the response when it can be located.
    extracted: str | None = None
    #: Reward / metric components by name (overall, accuracy, format, overlong_penalty, score...).
    scores: Mapping[str, float] = field(default_factory=dict)
    #: True / False when a verdict exists; None for unscored rows (LLM judge pending).
    correct: bool | None = None
    error: str | None = None
    #: Training only: a stored (offline) trajectory or a sampled (online) one.
    source: Source | None = None
    advantage: float | None = None
    tokens: int | None = None
    #: Free-form extra facts shown beside the scores (finish reason, hybrid gate reason...).
    details: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleRecord:
    """One prompt, its media and its responses (see the module docstring)."""

    key: str
    label: str
    benchmark: str = ""
    task: str = ""
    problem_type: str = ""
    prompt: str = ""
    system: str | None = None
    #: The hash of the prompt record `prompt` / `system` were read from, checked on reading (`evr1_cache.PromptRecord`):
    #: the card then shows exactly what was sent. None: no record, the text was rebuilt (a note says why).
    prompt_hash: str | None = None
    ground_truth: str = ""
    media: tuple[MediaRef, ...] = ()
    responses: tuple[ResponseRecord, ...] = ()
    #: Training step of a rollout dump; None for evaluation samples.
    step: int | None = None
    #: Why the sample has no usable response (media could not be loaded, engine error...).
    error: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> Verdict:
        if self.error is not None or (self.responses and all(r.error is not None for r in self.responses)):
            return "error"
        marks = [r.correct for r in self.responses if r.correct is not None]
        if not marks:
            return "unscored"
        if all(marks):
            return "correct"
        return "wrong" if not any(marks) else "mixed"

    @property
    def source(self) -> str:
        """ "offline", "online", "mixed" (a group with both) or "" (evaluation)."""
        kinds = {r.source for r in self.responses if r.source is not None}
        return "mixed" if len(kinds) > 1 else (kinds.pop() if kinds else "")


def shown_prompt(stored: object, text: str, system: str | None, *, instead: str) -> dict[str, Any]:
    """A card's `prompt`, `system` and `prompt_hash` from a stored prompt record (`PromptRecord.to_dict()`), its hash
    verified: a card shows what was sent, never a rebuilt prompt. Without a usable record: `text` / `system` and a
    note saying why and what is shown `instead`."""
    if not isinstance(stored, Mapping):
        why = "no prompt was recorded"
    else:
        try:
            sent = PromptRecord.from_dict(stored)
        except PromptRecordError as exc:
            why = str(exc)
        else:
            return {"prompt": sent.text, "system": sent.system, "prompt_hash": sent.hash}
    return {"prompt": text, "system": system, "notes": (f"{why}; shown instead: {instead}",)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Curve:
    """One line of a chart: `metric` (the chart) of `series` (a task, or "all") over training steps."""

    metric: str
    series: str
    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        clean = tuple((float(x), float(y)) for x, y in self.points if math.isfinite(float(y)))
        object.__setattr__(self, "points", clean)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """One run as the viewer sees it: its samples, its curves and a few headline facts."""

    name: str
    kind: RunKind
    samples: Sequence[SampleRecord]
    curves: Sequence[Curve] = ()
    #: Headline facts shown on the overview (metric name -> value), in order.
    summary: Mapping[str, float | int | str] = field(default_factory=dict)
    #: Problems found while reading the run (shown on the overview, never fatal).
    problems: Sequence[str] = ()
    #: Where the run was read from (shown, not opened).
    source: str = ""
