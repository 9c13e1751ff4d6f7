"""Hybrid offline+online selection: config validation, slot choice, the accuracy gate, over-length handling, metrics."""

from __future__ import annotations

import math

import pytest

from evr1_train.hybrid import (
    HybridConfig,
    fit_offline_response,
    gate,
    hybrid_metrics,
    hybrid_metrics_from_extra_fields,
    offline_slots,
    plan_group,
    row_offline_text,
)

ON = HybridConfig(enable=True, k=2)
GATED = HybridConfig(enable=True, k=1, mode="below_accuracy", accuracy_threshold=0.5)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"mode": "sometimes"}, "mode must be one of"),
        ({"mode": "below_accuracy"}, "accuracy_threshold"),
        ({"mode": "below_accuracy", "accuracy_threshold": 1.5}, "accuracy_threshold"),
        ({"k": 0}, "k must be an integer >= 1"),
        ({"offline_handling": "luffy"}, "offline_handling"),
        ({"overlong": "crash"}, "overlong"),
        ({"shaping_gamma": 0.0}, "shaping_gamma"),
    ],
)
def test_config_rejects_bad_settings(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        HybridConfig(enable=True, **kwargs)


def test_from_mapping_names_unknown_keys() -> None:
    with pytest.raises(ValueError, match=r"unknown evr1.hybrid keys \['kk'\]"):
        HybridConfig.from_mapping({"enable": True, "kk": 1})
    cfg = HybridConfig.from_mapping({"enable": True, "mode": "below_accuracy", "accuracy_threshold": "0.25"})
    assert cfg.accuracy_threshold == 0.25


def test_offline_slots_are_the_last_k_and_need_an_online_rollout() -> None:
    assert offline_slots(8, ON) == (6, 7)
    assert offline_slots(8, HybridConfig()) == ()
    with pytest.raises(ValueError, match="n > k"):
        offline_slots(2, ON)


def test_gate_modes() -> None:
    assert gate(ON, None).use_offline
    assert gate(HybridConfig(), [0.0]).use_offline is False
    low = gate(GATED, [0.0, 1.0, 0.0])
    assert low.use_offline
    assert low.online_accuracy == pytest.approx(1 / 3)
    high = gate(GATED, [1.0, 0.5, 0.5])
    assert not high.use_offline
    assert ">=" in high.reason
    assert not gate(GATED, []).use_offline  # nothing scored: stay online, with a reason
    assert gate(GATED, [float("nan"), 0.0]).use_offline  # NaN accuracies are ignored, not averaged


def test_plan_group() -> None:
    assert plan_group(ON, 4, has_offline=True) == (False, False, True, True)
    assert plan_group(ON, 4, has_offline=False) == (False,) * 4
    assert plan_group(GATED, 3, True, [1.0, 1.0]) == (False, False, False)
    assert plan_group(GATED, 3, True, [0.0, 0.5]) == (False, False, True)
    assert plan_group(GATED, 3, True, [0.0, 1.0]) == (False, False, False)  # mean 0.5 is not below 0.5


def test_fit_offline_response_appends_eos_and_handles_overlong() -> None:
    assert fit_offline_response([5, 6], 8, eos_id=2, cfg=ON).token_ids == (5, 6, 2)
    assert fit_offline_response([5, 6, 2], 8, eos_id=2, cfg=ON).token_ids == (5, 6, 2)
    cut = fit_offline_response(list(range(10, 20)), 4, eos_id=2, cfg=ON)
    assert cut.truncated
    assert cut.token_ids == (10, 11, 12, 13)
    assert "11 tokens > response limit 4" in cut.reason
    skip = fit_offline_response(list(range(10, 20)), 4, eos_id=2, cfg=HybridConfig(enable=True, overlong="skip"))
    assert skip.skipped
    assert skip.token_ids == ()
    assert "skipped" in skip.reason
    assert fit_offline_response([], 4, eos_id=2, cfg=ON).skipped


def test_row_offline_text_follows_the_flag() -> None:
    row = {"offline_output": "<answer>B</answer>", "has_offline_trajectory": True}
    assert row_offline_text(row, ON) == "<answer>B</answer>"
    assert row_offline_text({**row, "has_offline_trajectory": False}, ON) is None
    assert row_offline_text({"offline_output": "  "}, ON) is None
    assert row_offline_text(row, HybridConfig()) is None  # hybrid disabled


def test_metrics_separate_offline_and_online() -> None:
    m = hybrid_metrics([False, False, True, False], [0.0, 1.0, 1.0, 0.5], accuracies=[0, 1, 1, 0])
    assert m["evr1/hybrid/offline_samples"] == 1
    assert m["evr1/hybrid/online_samples"] == 3
    assert m["evr1/hybrid/offline_score_mean"] == 1.0
    assert m["evr1/hybrid/online_score_mean"] == pytest.approx(0.5)
    assert m["evr1/hybrid/online_accuracy_mean"] == pytest.approx(1 / 3)
    none = hybrid_metrics([False], [0.2])
    assert math.isnan(none["evr1/hybrid/offline_score_mean"])
    with pytest.raises(ValueError, match="scores has 1"):
        hybrid_metrics([True, False], [1.0])


def test_metrics_from_verl_extra_fields() -> None:
    rows = [
        {"evr1_offline": 1, "evr1_offline_truncated": 1, "reward_extra_info": {"score": 0.9, "accuracy": 1.0}},
        {"evr1_offline": 0, "evr1_hybrid_reason": "stored trajectory ... skipped", "reward_extra_info": {"score": 0.1}},
        None,
    ]
    m = hybrid_metrics_from_extra_fields(rows)
    assert m["evr1/hybrid/offline_samples"] == 1
    assert m["evr1/hybrid/online_samples"] == 2
    assert m["evr1/hybrid/offline_truncated"] == 1
    assert m["evr1/hybrid/offline_skipped"] == 1
    assert m["evr1/hybrid/offline_score_mean"] == pytest.approx(0.9)
