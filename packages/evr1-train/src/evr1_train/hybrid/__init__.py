"""Hybrid offline+online RL: k of the n rollouts of a group come from stored trajectories.

Public API (stable; the local engine uses the same functions as the verl agent loop):
    HybridConfig, GateDecision, OfflineResponse,
    row_offline_text, offline_slots, gate, plan_group, fit_offline_response, hybrid_metrics,
    hybrid_metrics_from_extra_fields, finite_mean
Per-sample marker field written by both engines: OFFLINE_FIELD ("evr1_offline", 1 = stored trajectory, 0 = sampled).
"""

from evr1_train.hybrid.config import HybridConfig
from evr1_train.hybrid.metrics import finite_mean, hybrid_metrics, hybrid_metrics_from_extra_fields
from evr1_train.hybrid.select import (
    OFFLINE_TEXT_FIELD,
    GateDecision,
    OfflineResponse,
    fit_offline_response,
    gate,
    offline_slots,
    plan_group,
    row_offline_text,
)

OFFLINE_FIELD = "evr1_offline"

__all__ = [
    "OFFLINE_FIELD",
    "OFFLINE_TEXT_FIELD",
    "GateDecision",
    "HybridConfig",
    "OfflineResponse",
    "finite_mean",
    "fit_offline_response",
    "gate",
    "hybrid_metrics",
    "hybrid_metrics_from_extra_fields",
    "offline_slots",
    "plan_group",
    "row_offline_text",
]
