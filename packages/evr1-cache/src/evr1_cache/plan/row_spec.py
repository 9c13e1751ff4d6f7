"""A row's own video spec: the budget `evr1-cache build --plan --on-over-limit resample` cached an over-long row with.

Why a row-level override: a resampled row's frames live under a smaller spec (fewer frames, then smaller frames) than
the dataset's, in that spec's own cache folder (entries are keyed by their spec). The row records the spec in its
`evr1_plan` column -- {"action": "resample", "video": <SamplingSpec.to_dict()>, "reason": ...} -- and every reader
(the planner, evr1-train's media loader, prompt builder and start-up check) serves that row with that spec, so the
row is trained on, with exactly the prompt length the planner computed, instead of being refused as a cache miss.

The column is untrusted input: a malformed override, or one made for another model family than the run's, is a
`RowSpecError` naming the row; whether the override's frames are really in the cache, and whether its prompt fits
the limit, is checked by the trainer at start-up like any other row.

Names (stable): PLAN_COLUMN, RowSpecError, row_video_spec(row, default, name=None), has_row_spec(row).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evr1_cache.dataset import row_id
from evr1_cache.spec import SamplingSpec

__all__ = ["PLAN_COLUMN", "RowSpecError", "has_row_spec", "row_video_spec"]

#: The column `build --plan` writes into every row it resampled.
PLAN_COLUMN = "evr1_plan"


class RowSpecError(ValueError):
    """A row's `evr1_plan` column does not name a usable video spec (malformed, or another model family's)."""


def has_row_spec(row: Mapping[str, Any]) -> bool:
    """Whether the row carries a video-spec override (its `evr1_plan` column is set)."""
    return row.get(PLAN_COLUMN) is not None


def row_video_spec(row: Mapping[str, Any], default: SamplingSpec, name: str | None = None) -> SamplingSpec:
    """The spec the row's videos are served with: its `evr1_plan.video` settings when present, else `default`.

    Raises `RowSpecError` naming the row (`name`, else its id) for an override that is not a resample record with a
    valid `SamplingSpec`, or whose model family differs from `default`'s (its frames would not fit the model)."""
    plan = row.get(PLAN_COLUMN)
    if plan is None:
        return default
    who = name if name is not None else row_id(row)
    fix = (
        f"rebuild the dataset with `evr1-cache build --plan`, or remove the row's {PLAN_COLUMN} column to use the "
        "configured spec"
    )
    if isinstance(plan, str):
        import json

        try:
            plan = json.loads(plan)  # a column a table library stored as JSON text
        except ValueError:
            plan = None
    if not isinstance(plan, Mapping) or plan.get("action") != "resample" or not isinstance(plan.get("video"), Mapping):
        raise RowSpecError(
            f"row {who}: {PLAN_COLUMN} must be {{'action': 'resample', 'video': {{SamplingSpec settings}}}}, "
            f"got {_short(row.get(PLAN_COLUMN))}; {fix}"
        )
    try:
        spec = SamplingSpec.from_dict(plan["video"])
    except (TypeError, ValueError) as exc:
        raise RowSpecError(f"row {who}: {PLAN_COLUMN}.video is not a valid video spec ({exc}); {fix}") from exc
    mine = (spec.family, spec.size_factor, spec.resize)
    theirs = (default.family, default.size_factor, default.resize)
    if mine != theirs:
        raise RowSpecError(
            f"row {who}: {PLAN_COLUMN}.video was made for (family, size factor, resize) = {mine}, but the run's "
            f"video spec has {theirs}: its frames would not fit the model; {fix}"
        )
    return spec


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
