"""The verl adapter inside verl's own reward loop: verl loads `pkg://evr1_rewards.integrations.verl` from its config,
wraps it with the configured reward kwargs, and its NaiveRewardManager decodes real token ids and calls it.

Needs verl (and torch/transformers): runs in the `train` nox session and in the verl test venv; skipped elsewhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="needs verl installed (the train session / verl venv runs this file)")

import numpy as np
import torch
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "testenv"))
    try:
        from tiny_qwen import build_tokenizer
    finally:
        sys.path.remove(str(ROOT / "testenv"))
    return build_tokenizer()


def _config(**reward_kwargs: object):  # type: ignore[no-untyped-def]
    return OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://evr1_rewards.integrations.verl",
                    "name": "compute_score",
                    "reward_kwargs": reward_kwargs,
                },
                "reward_manager": {"source": "register", "name": "naive"},
            }
        }
    )


def _batch(tokenizer, prompt: str, response: str, data_source: str, ground_truth: object, extra_info: dict):  # type: ignore[no-untyped-def]
    from verl import DataProto

    p = tokenizer.encode(prompt, add_special_tokens=False)
    r = [*tokenizer.encode(response, add_special_tokens=False), tokenizer.convert_tokens_to_ids("<|im_end|>")]
    pad = 4  # right padding after the response, masked out
    responses = torch.tensor([r + [tokenizer.pad_token_id or 0] * pad])
    attention = torch.tensor([[1] * (len(p) + len(r)) + [0] * pad])
    return DataProto.from_dict(
        tensors={"prompts": torch.tensor([p]), "responses": responses, "attention_mask": attention},
        non_tensors={
            "data_source": np.array([data_source], dtype=object),
            "reward_model": np.array([{"ground_truth": ground_truth}], dtype=object),
            "extra_info": np.array([extra_info], dtype=object),
        },
    )


CASES = [
    # (response, data_source, ground truth, extra_info, expected score)
    (
        "<think>the bus is blue</think><answer>B</answer>",
        "videomme",
        "B",
        {"problem_type": "multiple choice", "options": ["A. red", "B. blue"]},
        1.0,
    ),
    (
        "<answer>a dog</answer>",
        "multiple choice",
        "A",
        {},
        0.0,
    ),  # data_source as the type; the article is no option (EVR1: A)
    ('<answer>{"time": [3, 5]}</answer>', "charades", '{"time": [3, 5]}', {"problem_type": "temporal grounding"}, 1.0),
    (
        "<answer>print(int(input()) + 1)</answer>",
        "code",
        [{"input": "1", "output": "2"}],
        {},
        1.0,
    ),  # list GT from parquet
]


@pytest.mark.parametrize(("response", "data_source", "gt", "extra_info", "expected"), CASES)
def test_naive_reward_manager_calls_the_adapter(tokenizer, response, data_source, gt, extra_info, expected) -> None:  # type: ignore[no-untyped-def]
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = _config(accuracy_weight=0.9, format_weight=0.1)
    fn = get_custom_reward_fn(config)
    assert fn is not None
    manager = get_reward_manager_cls("naive")(config, tokenizer, fn)
    data = _batch(
        tokenizer,
        "<|im_start|>user\nWhat?<|im_end|>\n<|im_start|>assistant\n",
        response,
        data_source,
        gt,
        dict(extra_info),
    )
    out = manager.loop.run_until_complete(manager.run_single(data))
    assert out["reward_score"] == pytest.approx(expected)
    assert set(out["reward_extra_info"]) == {"score", "accuracy", "format"}  # a fixed key set: verl stacks them
    rm = manager.assemble_rm_scores(data, [out["reward_score"]])
    assert rm.sum().item() == pytest.approx(expected)


def test_reward_kwargs_from_the_config_reach_the_router(tokenizer) -> None:  # type: ignore[no-untyped-def]
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = _config(mode="metric", accuracy_weight=1.0, format_weight=0.0)
    manager = get_reward_manager_cls("naive")(config, tokenizer, get_custom_reward_fn(config))
    data = _batch(tokenizer, "q", '{"time": [5, 3]}', "tg", '{"time": [3, 5]}', {"problem_type": "temporal_grounding"})
    out = manager.loop.run_until_complete(manager.run_single(data))
    assert out["reward_score"] == 1.0  # metric mode swapped the reversed span; weights 1/0 from the config
