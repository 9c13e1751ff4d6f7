"""Shared adapter plumbing: cached routers, array-like ground truths, extras from framework rows."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from evr1_rewards.router import RewardRouter


@lru_cache(maxsize=64)
def cached_router(accuracy: float, fmt: float, mode: str, think: str, on_unknown: str, on_error: str) -> RewardRouter:
    """One router per configuration (adapters are called per sample; building routers per call is waste)."""
    return RewardRouter(
        {"accuracy": accuracy, "format": fmt},
        mode=mode,  # type: ignore[arg-type]
        think=think,  # type: ignore[arg-type]
        on_unknown=on_unknown,  # type: ignore[arg-type]
        on_error=on_error,  # type: ignore[arg-type]
    )


def plain(value: object) -> object:
    """numpy arrays / scalars (as parquet loaders hand them over) → lists / Python scalars, recursively."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, (str, bytes)):
        value = tolist()
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def weights_from(kw: Mapping[str, object]) -> tuple[float, float]:
    w = kw.get("weights")
    if isinstance(w, Mapping):
        acc = float(w.get("accuracy", 1.0 - float(w.get("format", 0.1))))  # type: ignore[arg-type]
        return acc, float(w.get("format", 1.0 - acc))  # type: ignore[arg-type]
    acc = float(kw.get("accuracy_weight", 0.9))  # type: ignore[arg-type]
    return acc, float(kw.get("format_weight", 1.0 - acc))  # type: ignore[arg-type]
