"""Shared adapter plumbing: cached routers, array-like ground truths, extras from framework rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import suppress
from functools import lru_cache

from evr1_rewards.errors import RewardConfigError, one_of
from evr1_rewards.router import THINK_POLICIES, RewardRouter
from evr1_rewards.sandbox.config import SandboxConfig
from evr1_rewards.types import MODES


@lru_cache(maxsize=64)
def cached_router(
    accuracy: float,
    fmt: float,
    mode: str,
    think: str,
    on_unknown: str,
    on_error: str,
    sandbox: SandboxConfig | None = None,
    end_of_turn: tuple[str, ...] = (),
) -> RewardRouter:
    """One router per configuration (adapters are called per sample; building routers per call is waste)."""
    return RewardRouter(
        {"accuracy": accuracy, "format": fmt},
        mode=one_of("mode", mode, MODES),
        think=one_of("think", think, THINK_POLICIES),
        on_unknown=one_of("on_unknown", on_unknown, ("raise", "open_ended")),
        on_error=one_of("on_error", on_error, ("raise", "zero")),
        sandbox=sandbox,
        end_of_turn_tokens=end_of_turn,
    )


def sandbox_from(kw: Mapping[str, object]) -> SandboxConfig | None:
    """A sandbox config from adapter kwargs: `sandbox` (backend name, URL or mapping), `sandbox_fusion_url`,
    `unsafe_local`, `sandbox_workers`; None when none is given (the environment decides)."""
    base = SandboxConfig.coerce(plain(kw.get("sandbox")))
    url, unsafe, workers = kw.get("sandbox_fusion_url"), kw.get("unsafe_local"), kw.get("sandbox_workers")
    if base is None and url is None and unsafe is None and workers is None:
        return None
    base = base or SandboxConfig()
    return SandboxConfig(
        backend="sandbox_fusion" if url else base.backend,
        url=str(url) if url else base.url,
        workers=int(_number("sandbox_workers", workers)) if workers is not None else base.workers,
        unsafe_local=bool(unsafe) if unsafe is not None else base.unsafe_local,
        python=base.python,
    )


def tokens_from(value: object) -> tuple[str, ...]:
    """`end_of_turn_tokens` from adapter kwargs: a list, or one whitespace-separated string."""
    value = plain(value)
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, (list, tuple)):
        return tuple(str(t) for t in value)
    raise RewardConfigError(f"end_of_turn_tokens must be a list of strings, got {value!r}")


def plain(value: object) -> object:
    """numpy arrays / scalars (as parquet loaders hand them over) → lists / Python scalars, recursively."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, (str, bytes)):
        value = tolist()
    elif not isinstance(value, (str, bytes, Mapping, list, tuple)) and hasattr(value, "items"):
        value = dict(value.items())  # OmegaConf DictConfig and other mapping-likes
    elif type(value).__name__ == "ListConfig" and isinstance(value, Iterable):
        value = list(value)
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def merge_extras(*sources: object) -> dict[str, object]:
    """Scorer extras from several mappings (later ones win), numpy values made plain. A `None` value is an absent
    key - `datasets`/parquet fill keys missing from some rows' dict column with None - so it never overrides."""
    out: dict[str, object] = {}
    for src in sources:
        if isinstance(src, Mapping):
            for k, v in src.items():
                if v is not None:
                    out[str(k)] = plain(v)
    return out


def weights_from(kw: Mapping[str, object]) -> tuple[float, float]:
    w = kw.get("weights")
    if isinstance(w, Mapping):
        acc = _number("weights.accuracy", w.get("accuracy", 1.0 - _number("weights.format", w.get("format", 0.1))))
        return acc, _number("weights.format", w.get("format", 1.0 - acc))
    acc = _number("accuracy_weight", kw.get("accuracy_weight", 0.9))
    return acc, _number("format_weight", kw.get("format_weight", 1.0 - acc))


def _number(what: str, value: object) -> float:
    """A setting given as a number or numeric string (YAML, CLI overrides), as a float."""
    if isinstance(value, (int, float, str)):
        with suppress(ValueError):
            return float(value)
    raise RewardConfigError(f"{what} must be a number, got {value!r}")
