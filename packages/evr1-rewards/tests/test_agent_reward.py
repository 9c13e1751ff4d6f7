"""Agent rewards: the final answer's reward minus optional call costs, each reported; calls can never add reward."""

from __future__ import annotations

import itertools
import random

import pytest

from evr1_rewards import AgentShaping, RewardConfigError, RewardInput, RewardRouter, agent_reward


def test_answer_reward_passes_through_without_shaping() -> None:
    result = RewardRouter().score(_inp("<answer>B</answer>", "B"))
    r = agent_reward(result, calls=3, invalid=1)
    assert r.overall == r.answer == result.overall
    assert r.accuracy == result.accuracy
    assert r.as_dict()["tool_calls"] == 3.0
    assert r.as_dict()["tool_invalid"] == 1.0


def test_costs_are_subtracted_and_reported_separately() -> None:
    result = RewardRouter().score(_inp("<answer>B</answer>", "B"))
    shaping = AgentShaping(call_cost=0.05, free_calls=1, invalid_call_penalty=0.1)
    r = agent_reward(result, calls=3, invalid=2, shaping=shaping)
    assert r.call_cost == pytest.approx(0.1)  # two calls beyond the free one
    assert r.invalid_penalty == pytest.approx(0.2)
    assert r.overall == pytest.approx(result.overall - 0.3)
    capped = agent_reward(result, calls=100, invalid=100, shaping=AgentShaping(call_cost=1, max_shaping=0.5))
    assert capped.overall == pytest.approx(result.overall - 0.5)
    assert capped.call_cost + capped.invalid_penalty == pytest.approx(0.5)


def test_calling_tools_never_raises_the_reward() -> None:
    router = RewardRouter()
    rng = random.Random(0)
    answers = ["<answer>B</answer>", "<answer>A</answer>", "", "no tags"]
    for text, calls, invalid in itertools.product(answers, range(0, 12, 3), range(0, 6, 2)):
        result = router.score(_inp(text, "B"))
        shaping = AgentShaping(
            call_cost=rng.random() * 0.3,
            free_calls=rng.randrange(4),
            invalid_call_penalty=rng.random(),
            max_shaping=rng.random() * 2,
        )
        shaped = agent_reward(result, calls, invalid, shaping)
        assert shaped.overall <= result.overall
        assert shaped.overall <= agent_reward(result, 0, 0, shaping).overall  # more calls: never more reward


@pytest.mark.parametrize(
    "bad",
    [{"call_cost": -0.1}, {"invalid_call_penalty": float("nan")}, {"free_calls": -1}, {"call_cost": True}],
)
def test_shaping_that_would_pay_for_calls_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(RewardConfigError):
        AgentShaping(**bad)  # type: ignore[arg-type]


def test_from_mapping_names_unknown_keys() -> None:
    assert AgentShaping.from_mapping({"call_cost": 0.1}).call_cost == 0.1
    with pytest.raises(RewardConfigError, match="known: call_cost"):
        AgentShaping.from_mapping({"cost": 0.1})


def _inp(text: str, truth: str) -> RewardInput:
    return RewardInput(response=text, ground_truth=truth, problem_type="multiple choice")
