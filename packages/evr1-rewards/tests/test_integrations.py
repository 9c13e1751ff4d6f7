"""Adapters against the real call conventions of verl, TRL and OpenRLHF (no framework installed here; the verl
reward-loop test with verl itself is test_verl_reward_loop.py)."""

from __future__ import annotations

import json
import pickle  # noqa: TID251  (TRL's async trainer pickles reward functions: that is what is tested)

import pytest

from evr1_rewards import RewardConfigError, RewardRouter, UnknownProblemTypeError
from evr1_rewards.integrations import openrlhf, trl, verl


# ------------------------------------------------------------------------------------------------------------ verl
def test_verl_compute_score_keyword_call() -> None:
    # verl's reward loop calls with keywords only, per sample; response may carry a leading space.
    out = verl.compute_score(
        data_source="video_mcq", solution_str=" <answer>B</answer>", ground_truth="B",
        extra_info={"problem_type": "multiple choice", "options": ["A. x", "B. y"], "index": 3, "num_turns": 1},
    )  # fmt: skip
    assert out == {"score": 1.0, "accuracy": 1.0, "format": 1.0}


def test_verl_problem_type_from_data_source_and_kwargs() -> None:
    assert verl.compute_score("numerical", "<answer>3</answer>", "3")["score"] == 1.0
    out = verl.compute_score("whatever", "<answer>3</answer>", "3", None, problem_type="number", accuracy_weight=1.0)
    assert out["score"] == 1.0
    assert set(out) == set(verl.EXTRA_KEYS)


def test_verl_extras_and_numpy_like_ground_truth() -> None:
    class FakeArray(list):  # parquet rows hand lists over as numpy arrays; anything with tolist() is unwrapped
        def tolist(self) -> list:
            return list(self)

    out = verl.compute_score(
        "tg", '<answer>{"time": [2, 1]}</answer>', '{"time": [1, 2]}', {"extras": {"x": 1}}, mode="metric"
    )
    assert out["accuracy"] == 1.0  # metric mode swaps the reversed span
    tests = FakeArray([{"input": "", "output": "7"}])
    assert verl.compute_score("code", "<answer>print(7)</answer>", tests)["accuracy"] == 1.0


def test_verl_none_in_extra_info_is_absent() -> None:
    info = {"problem_type": "numerical", "rel_tol": None, "extras": {"abs_tol": None, "rel_tol": 0.01}, "index": None}
    assert verl.compute_score("x", "<answer>3.01</answer>", "3", info)["accuracy"] == 1.0
    info = {"problem_type": None, "options": ["A. x", "B. y"], "extras": {"options": None}}
    assert verl.compute_score("mcq", "<answer>y</answer>", "B", info)["accuracy"] == 1.0  # None never overrides


def test_verl_reward_kwargs_choose_the_sandbox_and_tokens() -> None:
    out = verl.compute_score(
        "code", "<answer>print(int(input()) + 1)</answer><|my_eot|>", [{"input": "1", "output": "2"}], {},
        unsafe_local=False, sandbox="bwrap", end_of_turn_tokens=["<|my_eot|>"],
    )  # fmt: skip
    assert out == {"score": 1.0, "accuracy": 1.0, "format": 1.0}


def test_verl_errors_are_clear() -> None:
    with pytest.raises(RewardConfigError, match="no problem type"):
        verl.compute_score(None, "x", "y")
    with pytest.raises(UnknownProblemTypeError):
        verl.compute_score("gsm8k", "x", "y")
    assert verl.compute_score("mcq", "x", "??", on_error="zero")["score"] == 0.0


# ------------------------------------------------------------------------------------------------------------- TRL
def test_trl_plain_completions() -> None:
    f = trl.make_reward_func()
    out = f(
        prompts=["q1", "q2", "q3"],
        completions=["<answer>B</answer>", "<answer>7</answer>", "whatever"],
        completion_ids=[[1], [2], [3]],
        problem_type=["mcq", "numerical", None],
        solution=["B", "8", "x"],
        trainer_state=object(),
    )
    assert out == [1.0, pytest.approx(0.1), None]  # None row → TRL skips it
    assert f.__name__ == "evr1_overall"


def test_trl_conversational_completions_and_components() -> None:
    completions = [
        [{"role": "assistant", "content": "<think>r</think><answer>C</answer>"}],
        [{"role": "assistant", "content": [{"type": "text", "text": "<answer>A</answer>"}]}],
    ]
    acc = trl.make_reward_func(problem_type="multiple choice", component="accuracy", ground_truth_column="answer")
    out = acc(prompts=[[{"role": "user", "content": "q"}]] * 2, completions=completions, answer=["C", "B"],
              options=[["A. a", "B. b", "C. c"], None])  # fmt: skip
    assert out == [1.0, 0.0]
    fmt = trl.make_reward_func(problem_type="mcq", component="format")
    assert fmt(prompts=None, completions=completions, ground_truth=["C", "B"]) == [1.0, 1.0]


def test_trl_reward_function_pickles_and_keeps_its_settings() -> None:
    f = trl.make_reward_func(problem_type="mcq", component="accuracy", name="mc_acc", end_of_turn_tokens=["<|my_eot|>"])
    g = pickle.loads(pickle.dumps(f))
    assert isinstance(g, trl.RewardFunction)
    assert g.__name__ == "mc_acc"
    assert g(completions=["<answer>B</answer><|my_eot|>"], ground_truth=["B"]) == [1.0]
    fmt = trl.RewardFunction(problem_type="mcq", component="format", end_of_turn_tokens=["<|my_eot|>"])
    assert pickle.loads(pickle.dumps(fmt))(completions=["<answer>B</answer><|my_eot|>"], ground_truth=["B"]) == [1.0]


def test_trl_none_in_extras_is_absent() -> None:
    # datasets fills keys missing from a row's dict column with None (a heterogeneous `extras` column)
    f = trl.RewardFunction(component="accuracy")
    out = f(
        completions=["<answer>3.001</answer>", "<answer>B</answer>"],
        problem_type=["numerical", "mcq"],
        solution=["3", "B"],
        extras=[{"rel_tol": 0.01, "options": None}, {"rel_tol": None, "options": ["A. x", "B. y"]}],
        options=[None, None],
    )
    assert out == [1.0, 1.0]


def test_trl_missing_columns_are_clear() -> None:
    f = trl.make_reward_func()
    with pytest.raises(KeyError, match="ground-truth column"):
        f(prompts=["q"], completions=["x"], problem_type=["mcq"])
    with pytest.raises(KeyError, match="problem_type"):
        f(prompts=["q"], completions=["x"], ground_truth=["A"])


# -------------------------------------------------------------------------------------------------------- OpenRLHF
def test_response_from_query_strips_prompt_and_special_tokens() -> None:
    prompt = "<|im_start|>user\nWhich?<|im_end|>\n<|im_start|>assistant\n"
    query = prompt + "<answer>B</answer><|im_end|><|endoftext|>"
    assert openrlhf.response_from_query(query, prompt) == "<answer>B</answer>"
    # If detokenisation changed the prompt text, the last assistant marker is used.
    assert openrlhf.response_from_query(query.replace("Which?", "Which ?"), prompt) == "<answer>B</answer>"


PROMPT = "<|im_start|>user\nColour?<|im_end|>\n<|im_start|>assistant\n"
PAYLOAD = {
    "query": [PROMPT + "<answer>B</answer><|im_end|>", PROMPT + "<answer>3</answer><|im_end|>"],
    "prompts": [PROMPT, PROMPT],
    "labels": [json.dumps({"problem_type": "multiple choice", "ground_truth": "B"}), "4"],
}


def test_openrlhf_labels_with_none_extras() -> None:
    label = json.dumps({"problem_type": "numerical", "ground_truth": "3", "extras": {"rel_tol": None, "options": None}})
    out = openrlhf.score_openrlhf(RewardRouter(), ["<answer>3</answer>"], None, [label])
    assert out["rewards"] == [1.0]


def test_openrlhf_reward_func_file_hook() -> None:
    out = openrlhf.reward_func(PAYLOAD["query"][:1], PAYLOAD["prompts"][:1], PAYLOAD["labels"][:1])
    rewards = out["rewards"]
    assert [float(x) for x in rewards] == [1.0]
