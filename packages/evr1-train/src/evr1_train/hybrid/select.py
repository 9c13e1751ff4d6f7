"""Which rollouts of a group come from the stored trajectory, and how a stored response is fitted to the limit.

Pure Python: the verl agent loop and the local engine call these same functions, so both mix data identically.

Names (stable):
    row_offline_text(row, cfg) -> str | None     # the stored trajectory of a dataset row, or None
    offline_slots(n, cfg) -> tuple[int, ...]     # slot indices that may be offline: the last k of n
    gate(cfg, online_accuracies) -> GateDecision  # "always" / "below_accuracy" decision for one group
    plan_group(cfg, n, has_offline, online_accuracies=None) -> tuple[bool, ...]   # is_offline per slot
    fit_offline_response(token_ids, max_len, eos_id, cfg) -> OfflineResponse       # truncate | skip, with reason
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evr1_train.hybrid.config import HybridConfig

#: Non-tensor field carrying a row's stored trajectory text from the dataset to the agent loop ("" when none).
OFFLINE_TEXT_FIELD = "evr1_offline_text"


def row_offline_text(row: Mapping[str, Any], cfg: HybridConfig) -> str | None:
    """The row's stored response when the row says it has one (EasyVideoR1: flag truthy and non-empty text)."""
    if not cfg.enable:
        return None
    flag = row.get(cfg.flag_key)
    text = row.get(cfg.output_key)
    if flag is None:  # rows without the flag column: a non-empty text is enough
        flag = bool(text)
    if not flag or not isinstance(text, str) or not text.strip():
        return None
    return text


def offline_slots(n: int, cfg: HybridConfig) -> tuple[int, ...]:
    """The last k slots of a group: online slots run first, so gated slots can wait for their accuracies."""
    cfg.check_group_size(n)
    return tuple(range(n - cfg.k, n)) if cfg.enable else ()


@dataclass(frozen=True)
class GateDecision:
    """Whether a group's offline slots use the stored trajectory, and why (logged, counted in metrics)."""

    use_offline: bool
    reason: str
    online_accuracy: float | None = None


def gate(cfg: HybridConfig, online_accuracies: Sequence[float | None] | None) -> GateDecision:
    """Decide for one group. In "below_accuracy" mode the decision uses the mean of the finite online accuracies."""
    if not cfg.enable:
        return GateDecision(False, "hybrid disabled")
    if cfg.mode == "always":
        return GateDecision(True, "mode=always")
    accs = [float(a) for a in (online_accuracies or ()) if a is not None and math.isfinite(float(a))]
    if not accs:
        return GateDecision(False, "below_accuracy: no scored online rollout in this group; kept online")
    mean = sum(accs) / len(accs)
    if cfg.accuracy_threshold is None:  # HybridConfig refuses this combination; keep the type checker informed
        raise ValueError("evr1.hybrid.mode=below_accuracy needs evr1.hybrid.accuracy_threshold")
    threshold = float(cfg.accuracy_threshold)
    if mean < threshold:
        return GateDecision(True, f"online accuracy {mean:.3f} < {threshold:.3f}", mean)
    return GateDecision(False, f"online accuracy {mean:.3f} >= {threshold:.3f}", mean)


def plan_group(
    cfg: HybridConfig, n: int, has_offline: bool, online_accuracies: Sequence[float] | None = None
) -> tuple[bool, ...]:
    """is_offline for each of the n slots of one group."""
    if not cfg.enable or not has_offline:
        return (False,) * n
    slots = set(offline_slots(n, cfg))
    use = gate(cfg, online_accuracies).use_offline
    return tuple(use and i in slots for i in range(n))


@dataclass(frozen=True)
class OfflineResponse:
    """A stored response fitted to the response limit. `skipped` means: generate this slot online instead."""

    token_ids: tuple[int, ...]
    truncated: bool = False
    skipped: bool = False
    reason: str = ""


def fit_offline_response(
    token_ids: Sequence[int], max_len: int, eos_id: int | None, cfg: HybridConfig
) -> OfflineResponse:
    """Append EOS (stored texts carry none; EasyVideoR1 then trained pads) and apply the over-length policy.

    EasyVideoR1 crashed on a stored response longer than the limit; here it is truncated (the cut response has no
    EOS, exactly like an online response that hit the limit) or skipped with a reason.
    """
    if max_len < 1:
        raise ValueError(f"response limit must be >= 1, got {max_len}")
    ids = [int(t) for t in token_ids]
    if not ids:
        return OfflineResponse((), skipped=True, reason="stored trajectory is empty after tokenisation")
    if eos_id is not None and ids[-1] != eos_id:
        ids.append(int(eos_id))
    if len(ids) <= max_len:
        return OfflineResponse(tuple(ids))
    why = f"stored trajectory has {len(ids)} tokens > response limit {max_len}; "
    if cfg.overlong == "skip":
        return OfflineResponse((), skipped=True, reason=why + "skipped")
    return OfflineResponse(tuple(ids[:max_len]), truncated=True, reason=why + "truncated")
