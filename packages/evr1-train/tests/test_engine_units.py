"""Local-engine building blocks on real tensors: padding, reward placement, verl estimators/losses, config checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evr1_train.engine.algorithms import actor_config, compute_advantages, outcome_rewards, policy_loss
from evr1_train.engine.batch import EncodedPrompt, collate_sequences, cut_at_eos, pad_responses
from evr1_train.engine.config import LocalConfig


def _cfg(**kw) -> LocalConfig:
    base = {"train_files": ("x.jsonl",), "val_files": ()}
    return LocalConfig(**{**base, **kw})


def test_cut_at_eos_keeps_eos_and_drops_padding() -> None:
    assert cut_at_eos([5, 6, 2, 7, 7], eos_ids=[2], pad_id=0) == [5, 6, 2]
    assert cut_at_eos([5, 6, 0, 0], eos_ids=[2], pad_id=0) == [5, 6]  # stopped by the batch, no EOS of its own
    assert cut_at_eos([], eos_ids=[2], pad_id=0) == []


def test_collate_left_pads_prompts_right_pads_responses() -> None:
    p1 = EncodedPrompt(
        torch.tensor([1, 2, 3]), {"pixel_values": torch.ones(4, 6), "image_grid_thw": torch.tensor([[1, 2, 2]])}
    )
    p2 = EncodedPrompt(torch.tensor([4, 5]), {})
    b = collate_sequences([p1, p2], [[7, 8, 9], [7]], pad_id=0, device="cpu", width=4)
    assert b["input_ids"].tolist() == [[1, 2, 3, 7, 8, 9, 0], [0, 4, 5, 7, 0, 0, 0]]
    assert b["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0, 0]]
    assert b["response_mask"].tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    assert b["pixel_values"].shape == (4, 6)
    assert "pixel_values_videos" not in b
    ids, mask = pad_responses([[1], []], pad_id=9)
    assert ids.tolist() == [[1], [9]]
    assert mask.tolist() == [[1], [0]]


def test_outcome_reward_sits_on_the_last_response_token() -> None:
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.float32)
    r = outcome_rewards([0.5, 1.0], mask)
    assert r.tolist() == [[0, 0, 0.5, 0], [1.0, 0, 0, 0]]


def test_grpo_and_rloo_advantages_are_verls() -> None:
    from verl.trainer.ppo import core_algos

    mask = torch.ones(4, 3)
    rewards = outcome_rewards([1.0, 0.0, 0.0, 0.0], mask)
    uids = ["a", "a", "b", "b"]
    adv = compute_advantages(_cfg(adv_estimator="grpo"), rewards, mask, uids)
    ref, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, np.array(uids, dtype=object))
    assert torch.equal(adv, ref)
    assert adv[0, 0] > 0 > adv[1, 0]
    assert adv[2].abs().sum() == 0
    rloo = compute_advantages(_cfg(adv_estimator="rloo"), rewards, mask, uids)
    assert rloo[0, 0] == pytest.approx(1.0)
    assert rloo[1, 0] == pytest.approx(-1.0)


def test_gdpo_needs_its_reward_keys() -> None:
    mask = torch.ones(2, 2)
    rewards = outcome_rewards([1.0, 0.0], mask)
    with pytest.raises(ValueError, match="gdpo_reward_keys"):
        compute_advantages(_cfg(adv_estimator="gdpo"), rewards, mask, ["a", "a"])
    cfg = _cfg(adv_estimator="gdpo", gdpo_reward_keys=("accuracy", "format"))
    adv = compute_advantages(
        cfg, rewards, mask, ["a", "a"], components={"accuracy": [1, 0], "format": [1, 1]}, prompt_width=3
    )
    assert adv[0, 0] > 0 > adv[1, 0]


def test_policy_loss_matches_verl_and_splits_micro_batches_exactly() -> None:
    """Micro-batch losses (normalised by mini-batch token count) sum to verl's whole-batch token-mean loss."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    torch.manual_seed(0)
    cfg = _cfg(loss_mode="vanilla")
    acfg = actor_config(cfg)
    lp = torch.randn(4, 5) * 0.1 - 1
    old = lp + torch.randn(4, 5) * 0.05
    adv = torch.randn(4, 1).expand(4, 5).clone()
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]], dtype=torch.float32)
    kw = {"entropy": None, "ref_log_prob": None, "offline_mask": None, "hybrid": None}
    whole, _ = policy_loss(
        cfg,
        acfg,
        old_log_prob=old,
        log_prob=lp,
        advantages=adv,
        response_mask=mask,
        batch_num_tokens=int(mask.sum()),
        global_batch_size=4,
        **kw,
    )
    parts = sum(
        policy_loss(
            cfg,
            acfg,
            old_log_prob=old[s],
            log_prob=lp[s],
            advantages=adv[s],
            response_mask=mask[s],
            batch_num_tokens=int(mask.sum()),
            global_batch_size=4,
            **kw,
        )[0]
        for s in (slice(0, 2), slice(2, 4))
    )
    acfg2 = actor_config(cfg)
    ref, _ = get_policy_loss_fn("vanilla")(old, lp, adv, mask.bool(), "token-mean", acfg2, None)
    assert whole.item() == pytest.approx(ref.item(), rel=1e-6)
    assert parts.item() == pytest.approx(ref.item(), rel=1e-6)


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ValueError, match="critic"):
        _cfg(adv_estimator="gae")
    with pytest.raises(ValueError, match="ppo_mini_batch_size"):
        _cfg(train_batch_size=8, ppo_mini_batch_size=3)
    with pytest.raises(ValueError, match="train_files"):
        LocalConfig(train_files=(), val_files=())
    with pytest.raises(ValueError, match=r"engine\.device"):
        _cfg(device="tpu")
    cfg = LocalConfig.from_cfg(
        {
            "data": {"train_files": "t.jsonl", "val_files": ["v.jsonl"], "train_batch_size": 4},
            "actor_rollout_ref": {
                "actor": {"ppo_mini_batch_size": 2, "optim": {"lr": 0.01, "lr_warmup_steps_ratio": 0.1}},
                "rollout": {"n": 3},
            },
            "trainer": {"total_training_steps": 50},
        }
    )
    assert cfg.train_files == ("t.jsonl",)
    assert cfg.val_files == ("v.jsonl",)
    assert (cfg.n, cfg.lr, cfg.warmup_steps, cfg.mini_batches_per_step) == (3, 0.01, 5, 2)


def test_overlong_penalty_follows_dapo_soft_punishment() -> None:
    from evr1_train.engine.algorithms import overlong_penalty

    # max 2048, buffer 512: free up to 1536 tokens, then linear down to -factor at 2048 (and beyond)
    assert overlong_penalty(100, 2048, 512, 1.0) == 0.0
    assert overlong_penalty(1536, 2048, 512, 1.0) == 0.0
    assert overlong_penalty(1792, 2048, 512, 1.0) == pytest.approx(-0.5)
    assert overlong_penalty(2048, 2048, 512, 0.5) == pytest.approx(-0.5)
    assert overlong_penalty(2304, 2048, 512, 1.0) == pytest.approx(-1.5)


def _dapo(**reward_kwargs: object) -> dict:
    return {
        "data": {"train_files": "x.jsonl", "max_response_length": 64},
        "reward": {"reward_manager": {"name": "dapo"}, "reward_kwargs": reward_kwargs},
    }


def test_overlong_settings_are_read_like_verls_dapo_reward_manager() -> None:
    on = LocalConfig.from_cfg(_dapo(overlong_buffer_cfg={"enable": True, "len": 16, "penalty_factor": 0.5}))
    assert (on.overlong_buffer_len, on.overlong_max_resp_len, on.overlong_penalty_factor) == (16, 64, 0.5)
    explicit = LocalConfig.from_cfg(_dapo(max_resp_len=32, overlong_buffer_cfg={"enable": True, "len": 16}))
    assert explicit.overlong_max_resp_len == 32
    # switched off, or another reward manager (verl applies it in the dapo manager only): no shaping
    assert LocalConfig.from_cfg(_dapo(overlong_buffer_cfg={"enable": False, "len": 16})).overlong_buffer_len == 0
    naive = _dapo(overlong_buffer_cfg={"enable": True, "len": 16})
    naive["reward"]["reward_manager"]["name"] = "naive"
    assert LocalConfig.from_cfg(naive).overlong_buffer_len == 0
    with pytest.raises(ValueError, match=r"overlong_buffer_cfg\.len must be > 0 and <= "):
        LocalConfig.from_cfg(_dapo(overlong_buffer_cfg={"enable": True, "len": 128}))
    with pytest.raises(ValueError, match=r"must be > 0 when the overlong penalty is enabled"):
        LocalConfig.from_cfg(_dapo(overlong_buffer_cfg={"enable": True, "len": 0}))
