"""Metrics that keep offline (stored) and online (sampled) rollouts apart.

Names (stable): hybrid_metrics(is_offline, scores, accuracies=None, response_lengths=None, prefix="evr1/hybrid"),
hybrid_metrics_from_extra_fields(extra_fields)   # verl: per-sample agent-loop `extra_fields` dicts
finite_mean(values)   # the mean of the finite values (NaN when none)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def finite_mean(values: Sequence[float | None]) -> float:
    """Mean of the finite values; NaN when there are none (a metric with no sample in this batch)."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return sum(vals) / len(vals) if vals else float("nan")


def hybrid_metrics(
    is_offline: Sequence[bool],
    scores: Sequence[float],
    accuracies: Sequence[float] | None = None,
    response_lengths: Sequence[float] | None = None,
    prefix: str = "evr1/hybrid",
) -> dict[str, float]:
    """Counts and means per origin. NaN means "no sample of that origin in this batch" (loggers skip or plot gaps)."""
    n = len(is_offline)
    if len(scores) != n:
        raise ValueError(f"is_offline has {n} entries but scores has {len(scores)}")
    off = [i for i, o in enumerate(is_offline) if o]
    on = [i for i, o in enumerate(is_offline) if not o]
    out: dict[str, float] = {
        f"{prefix}/offline_samples": float(len(off)),
        f"{prefix}/online_samples": float(len(on)),
        f"{prefix}/offline_fraction": len(off) / n if n else 0.0,
        f"{prefix}/offline_score_mean": finite_mean([scores[i] for i in off]),
        f"{prefix}/online_score_mean": finite_mean([scores[i] for i in on]),
    }
    for name, seq in (("accuracy", accuracies), ("response_length", response_lengths)):
        if seq is None:
            continue
        if len(seq) != n:
            raise ValueError(f"is_offline has {n} entries but {name} has {len(seq)}")
        out[f"{prefix}/offline_{name}_mean"] = finite_mean([seq[i] for i in off])
        out[f"{prefix}/online_{name}_mean"] = finite_mean([seq[i] for i in on])
    return out


def hybrid_metrics_from_extra_fields(extra_fields: Sequence[object], prefix: str = "evr1/hybrid") -> dict[str, float]:
    """Metrics from verl's per-sample `extra_fields` (our agent loop's marker + the reward loop's `reward_extra_info`)."""
    rows = [r if isinstance(r, dict) else {} for r in extra_fields]
    is_off = [bool(r.get("evr1_offline", 0)) for r in rows]
    infos: list[dict[str, Any]] = [i if isinstance(i := r.get("reward_extra_info"), dict) else {} for r in rows]
    scores = [float(i.get("score", float("nan"))) for i in infos]
    accs = [float(i.get("accuracy", float("nan"))) for i in infos]
    out = hybrid_metrics(is_off, scores, accs, prefix=prefix)
    out[f"{prefix}/offline_truncated"] = float(sum(bool(r.get("evr1_offline_truncated", 0)) for r in rows))
    out[f"{prefix}/offline_skipped"] = float(sum("skipped" in str(r.get("evr1_hybrid_reason", "")) for r in rows))
    return out
