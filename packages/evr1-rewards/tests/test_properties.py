"""Property tests: any response - random, huge, nested, unbalanced, regex-pathological - never raises, stays in
[0, 1] and returns quickly, for every non-code type (code runs programs; its totality is tested in test_code.py)."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evr1_rewards import RewardInput, RewardRouter
from evr1_rewards.testing import TYPICAL, adversarial_responses

GT = {
    "multiple_choice": "B",
    "numerical": "42",
    "regression": "3.5",
    "boolean": "yes",
    "temporal_grounding": '{"time": [1, 5]}',
    "spatial_grounding": '{"boxes": [0, 0, 10, 10]}',
    "spatiotemporal_grounding": '{"time": [1, 2], "boxes": {"1": [0, 0, 5, 5], "2": [0, 0, 5, 5]}}',
    "tracking": '{"boxes": {"1": [0, 0, 5, 5], "2": [1, 1, 6, 6]}}',
    "segmentation": '{"size": [16, 16], "polygons": [[0, 0, 8, 0, 8, 8, 0, 8]]}',
    "ocr": "hello world",
    "open_ended": "a cat sits on the mat",
    "preference": "Response 1",
    "math": "42",
}
ROUTER = RewardRouter()
METRIC = RewardRouter(mode="metric")

TOKENS = st.sampled_from(
    ["<answer>", "</answer>", "<think>", "</think>", "\\boxed{", "{", "}", "[", "]", '"time":', '"boxes":', ",", ":",
     "the answer is", "Answer:", "A", "b", "I", "yes", "no", "1,000", "-", "3/4", "%", "e9", "\n", " ", "答案是", "$",
     "```", "Response 1", "0.5", "12:30", "to", "(", ")", "**", "\\frac{1}{2}", "one", "hundred", "null", "NaN"]
)  # fmt: skip
ADVERSARIAL = st.one_of(
    st.text(max_size=400),
    st.lists(TOKENS, max_size=120).map("".join),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
)


def _check(response: str, ptype: str, router: RewardRouter = ROUTER, budget_s: float | None = None) -> None:
    start = time.perf_counter()
    res = router.score(RewardInput(response=response, ground_truth=GT[ptype], problem_type=ptype))
    elapsed = time.perf_counter() - start
    for v in (res.overall, res.accuracy, res.format):
        assert 0.0 <= v <= 1.0
    if budget_s is not None:
        assert elapsed < budget_s, f"{ptype}: {elapsed * 1e3:.1f} ms"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(response=ADVERSARIAL, ptype=st.sampled_from(sorted(GT)), metric=st.booleans())
def test_random_responses_never_raise(response: str, ptype: str, metric: bool) -> None:
    _check(response, ptype, METRIC if metric else ROUTER)


MB = 1 << 20
HUGE = adversarial_responses(MB)


def _nested_json(depth: int) -> str:
    return '{"time": ' * depth + "[1, 2]" + "}" * depth


@pytest.mark.parametrize("name", sorted(HUGE))
@pytest.mark.parametrize("ptype", sorted(set(GT) - {"math"}))
def test_adversarial_megabyte_inputs_are_fast(name: str, ptype: str) -> None:
    # The benchmark target is 50 ms per call on one core; the test allows headroom for a loaded CI machine.
    _check(HUGE[name], ptype, budget_s=1.0)


def test_math_adversarial_inputs_are_bounded_by_its_timeout() -> None:
    # math hands non-numeric answers to math-verify in a worker: bounded by extras["math_timeout"], not by parsing.
    pytest.importorskip("math_verify", reason="the math extra is installed by the rewards test group")
    router = RewardRouter()
    from evr1_rewards.scorers import math as math_scorer

    start = time.perf_counter()
    assert math_scorer._Worker()._wait_ready()
    startup = time.perf_counter() - start  # a killed worker's replacement may still be importing sympy
    for name in ("empty", "digits", "nested_json", "latex_fracs", "answer_is_flood", "boxed_flood"):
        response = HUGE[name]
        start = time.perf_counter()
        res = router.score(
            RewardInput(response=response, ground_truth="x^{2}", problem_type="math", extras={"math_timeout": 0.5})
        )
        assert 0.0 <= res.overall <= 1.0
        assert time.perf_counter() - start < 5.0 + 2 * startup, name  # bounded (EVR1: unbounded sympy)


def test_json_bomb_in_ground_truth_raises_cleanly() -> None:
    from evr1_rewards import GroundTruthError

    with pytest.raises(GroundTruthError):
        ROUTER.score(RewardInput(response="x", ground_truth=_nested_json(100_000), problem_type="temporal_grounding"))


def test_non_string_responses_are_tolerated() -> None:
    for response in (None, 42, b"\xff\xfe<answer>B</answer>", ["B"]):
        res = ROUTER.score(RewardInput(response=response, ground_truth="B", problem_type="mcq"))  # type: ignore[arg-type]
        assert 0.0 <= res.overall <= 1.0


def test_ten_megabyte_response_is_bounded() -> None:
    start = time.perf_counter()
    res = ROUTER.score(
        RewardInput(response="x" * (10 * MB) + "<answer>B</answer>", ground_truth="B", problem_type="mcq")
    )
    assert res.accuracy == 1.0
    assert res.format == 0.0
    assert res.details.get("truncated")
    assert time.perf_counter() - start < 2.0


def test_nan_and_infinity_in_json_answers() -> None:
    for payload in ('{"time": [NaN, 5]}', '{"time": [1, Infinity]}', json.dumps({"time": [1e308, 1e309]})):
        _check(f"<answer>{payload}</answer>", "temporal_grounding")
        _check(f"<answer>{payload}</answer>", "spatiotemporal_grounding")


@pytest.mark.parametrize("ptype", sorted(TYPICAL))
def test_typical_cases_score_partially_or_fully(ptype: str) -> None:
    response, gt = TYPICAL[ptype]
    res = ROUTER.score(RewardInput(response=response, ground_truth=gt, problem_type=ptype))
    assert res.format == 1.0
    assert 0.0 < res.accuracy <= 1.0
