"""What a plan says: a histogram of prompt lengths, the rows over the limit, and (for `build --plan`) a decision per
row -- keep, drop, or resample with fewer frames / a smaller size -- each with a logged reason.

Resampling keeps a row's media but plans them under a smaller budget: first fewer frames (lower `max_frames` or
`nframes`; GLM-4.1V, which has no frame bound, a lower `fps`), then smaller frames (lower `max_pixels` /
`total_pixels`), each step x0.75, until the prompt fits or nothing can shrink any further (then the row is dropped
and the reason says so). The smaller spec is recorded per row, so a cache can be built for it.

Names (stable): Decision, histogram(plans, bins), over_limit(plans, limit), decide(...), write_report(path, ...).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evr1_cache.families import ModelFamily
from evr1_cache.plan.tokens import MediaPlan, RowPlan, TextCounter, plan_row, plan_video
from evr1_cache.spec import ImageSpec, SamplingSpec

__all__ = ["ACTIONS", "Decision", "decide", "histogram", "over_limit", "shrunk_specs", "summary", "write_report"]

#: What `build --plan --on-over-limit` may do with a row over the limit.
ACTIONS = ("keep", "drop", "resample")
SHRINK = 0.75
MAX_STEPS = 24


@dataclass(frozen=True)
class Decision:
    """The plan's verdict on one row: `action` in keep | drop | resample, why, and the smaller spec if resampled."""

    index: int
    row_id: str
    action: str
    reason: str
    total: int
    new_total: int | None = None
    video_spec: Mapping[str, Any] | None = field(default=None)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def over_limit(plans: Sequence[RowPlan], limit: int | None) -> list[RowPlan]:
    """The rows whose prompt is longer than `limit`, longest first."""
    return sorted((p for p in plans if p.over(limit)), key=lambda p: (-p.total, p.index))


def histogram(plans: Sequence[RowPlan], bins: int = 10, width: int = 40, limit: int | None = None) -> str:
    """A text histogram of prompt lengths (equal-width bins; `|` marks the bin holding the limit)."""
    values = [p.total for p in plans if p.ok]
    if not values:
        return "(no row could be planned)"
    lo, hi = min(values), max(values)
    step = max(1, -(-(hi - lo + 1) // bins))
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, (v - lo) // step)] += 1
    top = max(counts)
    lines = []
    for b, n in enumerate(counts):
        a, z = lo + b * step, lo + (b + 1) * step - 1
        if a > hi:
            break
        mark = " <- limit" if limit is not None and a <= limit <= z else ""
        over = " (over)" if limit is not None and a > limit else ""
        lines.append(f"{a:>8}-{z:<8} {'#' * max(1 if n else 0, round(width * n / top)):<{width}} {n}{over}{mark}")
    return "\n".join(lines)


def summary(plans: Sequence[RowPlan], limit: int | None = None) -> dict[str, Any]:
    """Counts and percentiles of the prompt lengths (and how many rows are over `limit`)."""
    ok = sorted(p.total for p in plans if p.ok)

    def pct(q: float) -> int | None:
        return ok[min(len(ok) - 1, int(q * len(ok)))] if ok else None

    return {
        "rows": len(plans),
        "planned": len(ok),
        "errors": sum(1 for p in plans if not p.ok),
        "exact": all(p.exact for p in plans if p.ok),
        "min": ok[0] if ok else None,
        "p50": pct(0.5),
        "p90": pct(0.9),
        "p99": pct(0.99),
        "max": ok[-1] if ok else None,
        "limit": limit,
        "over_limit": sum(1 for p in plans if p.over(limit)),
    }


def shrunk_specs(spec: SamplingSpec, family: ModelFamily) -> list[SamplingSpec]:
    """Ever smaller budgets derived from `spec`: fewer frames first, then smaller frames (each step x0.75)."""
    base = spec.to_dict()
    out: list[SamplingSpec] = []
    seen = {spec.key()}

    def add(**change: Any) -> bool:
        try:
            candidate = SamplingSpec(**{**base, **change})
        except ValueError:
            return False
        if candidate.key() in seen:
            return False
        seen.add(candidate.key())
        out.append(candidate)
        base.update(change)
        return True

    for _ in range(MAX_STEPS):  # fewer frames
        if base.get("nframes") is not None:
            n = int(base["nframes"])
            new = max(family.temporal_patch_size, int(n * SHRINK))
            if new >= n or not add(nframes=new):
                break
        elif family.name == "glm4v":
            if not add(fps=round(float(base["fps"]) * SHRINK, 6)) or float(base["fps"]) < 0.05:
                break
        else:
            n = int(base["max_frames"])
            new = max(int(base["min_frames"]), family.temporal_patch_size, int(n * SHRINK))
            if new >= n or not add(max_frames=new):
                break
    factor = int(base.get("size_factor") or family.size_factor)
    floor = factor * factor * 4
    for _ in range(MAX_STEPS):  # smaller frames
        name = "total_pixels" if base.get("total_pixels") is not None else "max_pixels"
        value = base.get(name)
        if value is None or family.name == "internvl":  # InternVL frames are fixed tile squares
            break
        new = max(floor, int(int(value) * SHRINK))
        change: dict[str, Any] = {name: new}
        if name == "max_pixels" and base.get("min_pixels") is not None and int(base["min_pixels"]) > new:
            change["min_pixels"] = new
        if new >= int(value) or not add(**change):
            break
    return out


def decide(
    plans: Sequence[RowPlan],
    rows: Sequence[Mapping[str, Any]],
    messages: Sequence[Sequence[Mapping[str, Any]]],
    family: ModelFamily,
    spec: SamplingSpec,
    image_spec: ImageSpec,
    limit: int,
    action: str,
    counter: TextCounter | None = None,
) -> list[Decision]:
    """A `Decision` for every row over `limit` (and every row that could not be planned: dropped, with its error)."""
    if action not in ACTIONS:
        raise ValueError(f"on_over_limit must be one of {list(ACTIONS)}, got {action!r}")
    out: list[Decision] = []
    ladder: list[SamplingSpec] | None = None

    def fit(plan: RowPlan, videos: list[MediaPlan], images: list[MediaPlan]) -> tuple[SamplingSpec, RowPlan] | None:
        """The first budget of the ladder under which the row fits, with its plan (None when none does)."""
        for candidate in ladder or ():
            replanned = [plan_video(v.path, family, candidate, _native_meta(v)) for v in videos]
            if any(v.error for v in replanned):
                continue
            row, msgs = rows[plan.index], messages[plan.index]
            new = plan_row(plan.index, row, msgs, replanned, images, family, image_spec, counter)
            if new.ok and new.total <= limit:
                return candidate, new
        return None

    for plan in plans:
        if not plan.ok:
            out.append(Decision(plan.index, plan.row_id, "drop", f"cannot be planned: {plan.error}", 0))
            continue
        if not plan.over(limit):
            continue
        why = f"prompt {plan.total} tokens ({plan.text} text + {plan.vision} vision) > limit {limit}"
        if action == "keep":
            out.append(Decision(plan.index, plan.row_id, "keep", why + "; kept (--on-over-limit keep)", plan.total))
            continue
        videos = [m for m in plan.media if m.kind == "video"]
        images = [m for m in plan.media if m.kind == "image"]
        if action == "resample" and videos:
            ladder = ladder if ladder is not None else shrunk_specs(spec, family)
            fitted = fit(plan, videos, images)
            if fitted is not None:
                new_spec, new_plan = fitted
                out.append(
                    Decision(
                        plan.index,
                        plan.row_id,
                        "resample",
                        f"{why}; resampled to {_describe(new_plan.media)} = {new_plan.total} tokens",
                        plan.total,
                        new_plan.total,
                        new_spec.to_dict(),
                    )
                )
                continue
            why += "; still over the limit at the smallest budget tried"
        elif action == "resample":
            why += "; no video to resample (images keep their budget)"
        out.append(Decision(plan.index, plan.row_id, "drop", why + "; dropped", plan.total))
    return out


def _native_meta(video: MediaPlan) -> dict[str, Any] | None:
    if video.native is None:
        return None
    total, fps, height, width = video.native
    return {"total_num_frames": total, "fps": fps, "height": height, "width": width}


def _describe(media: Sequence[MediaPlan]) -> str:
    return ", ".join(f"{m.nframes} frames of {m.width}x{m.height}" for m in media if m.kind == "video")


def write_report(
    path: str | os.PathLike[str],
    plans: Sequence[RowPlan],
    decisions: Sequence[Decision] = (),
    limit: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """A JSONL report, written atomically: one summary line, then one line per row (its decision when it has one)."""
    from evr1_cache.atomic import atomic_open

    target = Path(path)
    by_index = {d.index: d for d in decisions}
    with atomic_open(target, "w") as fh:
        fh.write(json.dumps({"summary": summary(plans, limit), **(dict(extra) if extra else {})}) + "\n")
        for p in plans:
            record: dict[str, Any] = {
                "index": p.index,
                "row": p.row_id,
                "total": p.total,
                "text": p.text,
                "vision": p.vision,
                "exact": p.exact,
                "media": [
                    {"kind": m.kind, "path": m.path, "tokens": m.tokens, "frames": m.nframes, "hw": [m.height, m.width]}
                    for m in p.media
                ],
            }
            if p.error:
                record["error"] = p.error
            if p.index in by_index:
                record["decision"] = by_index[p.index].as_dict()
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return target
