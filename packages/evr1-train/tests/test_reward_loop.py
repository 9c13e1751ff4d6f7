"""evr1 rewards inside verl's real reward-loop manager: extra_info (problem_type, options) reaches compute_score and
the reward components land in reward_extra_info (what DAPO filtering and GDPO read)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.verl


def test_naive_reward_loop_with_evr1_compute_score(tiny_vl) -> None:
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.utils.import_utils import load_extern_object

    tok = AutoTokenizer.from_pretrained(tiny_vl)
    fn = load_extern_object("pkg://evr1_rewards.integrations.verl", "compute_score")
    cfg = OmegaConf.create({"reward": {"reward_kwargs": {}}, "data": {"reward_fn_key": "data_source"}})
    manager = get_reward_manager_cls("naive")(cfg, tok, fn)
    options = ["A. red", "B. green", "C. blue"]
    results = []
    for text in ("<think>green</think><answer>B</answer>", "<answer>C</answer>", "I think it is green"):
        prompt = torch.tensor([tok.encode("Q?", add_special_tokens=False)])
        resp = torch.tensor([tok.encode(text, add_special_tokens=False)])
        data = DataProto.from_dict(
            tensors={
                "prompts": prompt,
                "responses": resp,
                "attention_mask": torch.ones(1, prompt.shape[1] + resp.shape[1], dtype=torch.long),
            },
            non_tensors={
                "data_source": np.array(["toy"], dtype=object),
                "reward_model": np.array([{"ground_truth": "B"}], dtype=object),
                "extra_info": np.array([{"problem_type": "multiple_choice", "options": options}], dtype=object),
                "tool_extra_fields": np.array([{"evr1_offline": 1}], dtype=object),
            },
        )
        results.append(manager.loop.run_until_complete(manager.run_single(data)))  # verl runs it on its own loop
    right, wrong, unformatted = results
    assert right["reward_score"] == pytest.approx(1.0)
    assert right["reward_extra_info"]["accuracy"] == 1.0
    assert right["reward_extra_info"]["format"] == 1.0
    assert wrong["reward_extra_info"]["accuracy"] == 0.0
    assert wrong["reward_extra_info"]["format"] == 1.0
    assert unformatted["reward_extra_info"]["format"] == 0.0
    assert set(right["reward_extra_info"]) >= {"score", "accuracy", "format"}
