"""Every model family's end-of-turn tokens (evr1_cache.families) are known to the rewards (evr1_rewards).

A rollout decoded with special tokens kept ends with its template's end-of-turn marker; a family whose marker the
rewards did not know would lose the format score on every correct answer. Light: cache + rewards only.
"""

from __future__ import annotations

import pytest

from evr1_cache.families import all_families
from evr1_rewards import END_OF_TURN_TOKENS, RewardInput, RewardRouter, strip_end_of_turn


@pytest.mark.parametrize("family", all_families(), ids=lambda f: f.name)
def test_each_familys_end_of_turn_tokens_are_built_into_the_rewards(family) -> None:
    missing = [t for t in family.end_of_turn if t not in END_OF_TURN_TOKENS]
    assert not missing, f"{family.name}: add {missing} to evr1_rewards.END_OF_TURN_TOKENS"
    for token in family.end_of_turn:
        assert (
            strip_end_of_turn(f"<think>red</think><answer>B</answer>{token}") == "<think>red</think><answer>B</answer>"
        )
        # a vision token is never taken for the end of a turn
        assert all(v != token for v in family.vision_tokens)


@pytest.mark.parametrize("family", all_families(), ids=lambda f: f.name)
def test_a_correct_answer_keeps_its_format_score_after_the_end_of_turn_token(family) -> None:
    router = RewardRouter()
    plain = router.score(
        RewardInput(response="<think>red</think><answer>B</answer>", ground_truth="B", problem_type="multiple_choice")
    )
    for token in family.end_of_turn:
        got = router.score(
            RewardInput(
                response=f"<think>red</think><answer>B</answer>{token}",
                ground_truth="B",
                problem_type="multiple_choice",
            )
        )
        assert (got.overall, got.format, got.accuracy) == (plain.overall, plain.format, plain.accuracy), token
