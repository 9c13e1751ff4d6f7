"""evr1-rewards inside its real hosts, on one heterogeneous dataset: a parquet file written and read by `datasets`
(rows whose `extras` / `extra_info` dicts have different keys, so the missing ones come back as None), trained on by
TRL's real `GRPOTrainer` and read by verl's real `RLHFDataset` and scored by its registered reward managers.

Needs torch, transformers, verl and TRL: runs in the `train` nox session; skipped in the light `rewards` session.
(The evr1-train suite's own reward-loop test covers `tool_extra_fields`; these cover what the rewards package owns:
None-filled extras, every problem type through the loop, reward kwargs from verl's composed config, pickling.)
"""

from __future__ import annotations

import json
import pickle  # noqa: TID251  (TRL's async trainer pickles reward functions: that is what is tested)
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import ClassVar

import pytest

pytest.importorskip("verl", reason="needs verl (the train session runs this file)")
pytest.importorskip("trl", reason="needs TRL (the train session runs this file)")

import numpy as np
import torch
from omegaconf import OmegaConf

from evr1_rewards.integrations.trl import RewardFunction

pytestmark = pytest.mark.verl

PROMPT = [{"role": "user", "content": "Look at the clip and answer."}]
# (problem_type, ground truth, extras of this row only, a correct answer, a wrong answer)
ROWS = [
    ("multiple choice", "B", {"options": ["A. red", "B. blue", "C. green"]}, "<answer>B</answer>", "<answer>C</answer>"),
    ("numerical", "3", {"rel_tol": 0.01}, "<think>count</think><answer>3.01</answer>", "<answer>5</answer>"),
    ("regression", "4.0", {"official": False}, "<answer>4.0</answer>", "<answer>9</answer>"),
    ("temporal grounding", '{"time": [1.0, 2.0]}', {}, '<answer>{"time": [1, 2]}</answer>', '<answer>{"time": [5, 6]}</answer>'),
    ("spatial grounding", "[0, 0, 10, 10]", {"box_format": "absolute", "image_size": [100, 100]},
     "<answer>[0, 0, 10, 10]</answer>", "<answer>[50, 50, 60, 60]</answer>"),
    ("boolean", "yes", {}, "<answer>Yes</answer>", "<answer>No</answer>"),
    ("code", json.dumps([{"input": "2", "output": "4"}]), {"timeout": 2},
     "<answer>print(int(input()) * 2)</answer>", "<answer>print(0)</answer>"),
]  # fmt: skip


@pytest.fixture(scope="module")
def parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import datasets

    rows = []
    for i, (ptype, gt, extras, _, _) in enumerate(ROWS):
        rows.append(
            {
                "prompt": PROMPT,
                "data_source": "evr1_hosts",
                "problem_type": ptype,
                "solution": gt,
                "extras": extras,  # TRL's extras column: a struct over the union of keys, None where a row has none
                "reward_model": {"style": "rule", "ground_truth": gt},
                # verl's extra_info: per-row keys at the top level and in `extras`, None-filled by parquet
                "extra_info": {"index": i, "problem_type": ptype, **extras, "extras": extras},
            }
        )
    path = tmp_path_factory.mktemp("hosts") / "heterogeneous.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


@pytest.fixture(scope="module")
def tiny_lm(testenv):  # type: ignore[no-untyped-def]
    return testenv("tiny_text_lm").build_tiny_text_lm()


def test_the_file_really_is_heterogeneous(parquet: Path) -> None:
    import datasets

    ds = datasets.load_dataset("parquet", data_files=str(parquet), split="train")
    assert ds[0]["extras"]["rel_tol"] is None  # the MC row got the numerical row's key, as None
    assert ds[1]["extras"]["options"] is None
    assert ds[1]["extra_info"]["extras"]["official"] is None


# -- TRL --------------------------------------------------------------------------------------------------------------


class SpyReward(RewardFunction):
    """Records the extras TRL hands over (picklable, like its parent)."""

    seen: ClassVar[list[object]] = []

    def __call__(self, prompts=None, completions=(), **columns):  # type: ignore[no-untyped-def]
        SpyReward.seen.extend(columns.get("extras") or [])
        return super().__call__(prompts, completions, **columns)


def test_trl_grpo_trainer_trains_on_the_heterogeneous_file(parquet: Path, tiny_lm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    model, tok = tiny_lm
    ds = datasets.load_dataset("parquet", data_files=str(parquet), split="train")
    funcs = [SpyReward(name="evr1_overall", ground_truth_column="solution"), RewardFunction(component="format")]
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), per_device_train_batch_size=4, num_generations=2, max_completion_length=8,
        max_steps=2, learning_rate=1e-4, logging_steps=1, report_to="none", use_cpu=True, save_strategy="no",
        bf16=False, dataloader_num_workers=0, seed=0, temperature=1.0,
    )  # fmt: skip
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=args, train_dataset=ds, processing_class=tok)
    trainer.train()
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"rewards/evr1_overall/mean", "rewards/evr1_format/mean"} <= logged, sorted(logged)
    assert trainer.state.global_step == 2
    # what reached the reward function: dicts with the other rows' keys set to None (and it did not raise)
    assert any(isinstance(e, dict) and None in e.values() for e in SpyReward.seen)


def test_trl_columns_of_the_file_score_correct_answers_one(parquet: Path) -> None:
    import datasets

    ds = datasets.load_dataset("parquet", data_files=str(parquet), split="train")
    columns = {k: ds[k] for k in ds.column_names if k != "prompt"}
    f = RewardFunction(component="accuracy", ground_truth_column="solution")
    assert f(prompts=ds["prompt"], completions=[r[3] for r in ROWS], **columns) == [1.0] * len(ROWS)
    assert max(f(prompts=ds["prompt"], completions=[r[4] for r in ROWS], **columns)) < 1.0


def test_trl_reward_function_crosses_a_spawned_process() -> None:
    # TRL's AsyncRolloutWorker pickles reward_funcs into a spawned child (trl/experimental/async_grpo).
    from trl.trainer.utils import get_callable_name

    f = RewardFunction(problem_type="numerical", name="evr1_num")
    pickle.dumps(f)
    assert get_callable_name(f) == "evr1_num"
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        out = pool.submit(f, completions=["<answer>7</answer>", "<answer>8</answer>"], ground_truth=["7", "7"]).result(
            timeout=120
        )
    assert out == [1.0, pytest.approx(0.1)]


# -- verl -------------------------------------------------------------------------------------------------------------


def _reward_config(**reward_kwargs: object):  # type: ignore[no-untyped-def]
    return OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://evr1_rewards.integrations.verl",
                    "name": "compute_score",
                    "reward_kwargs": reward_kwargs,
                },
                "reward_manager": {"source": "register", "name": "naive"},
                "reward_kwargs": {},
            },
            "data": {"reward_fn_key": "data_source"},
        }
    )


def _proto(tok, item: dict, response: str):  # type: ignore[no-untyped-def]
    from verl import DataProto

    p = tok.encode("Q?", add_special_tokens=False)
    r = [*tok.encode(response, add_special_tokens=False), tok.convert_tokens_to_ids("<|im_end|>")]
    pad = 3  # right padding after the response, masked out
    return DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([p]),
            "responses": torch.tensor([r + [tok.pad_token_id] * pad]),
            "attention_mask": torch.tensor([[1] * (len(p) + len(r)) + [0] * pad]),
        },
        non_tensors={
            "data_source": np.array([item["data_source"]], dtype=object),
            "reward_model": np.array([item["reward_model"]], dtype=object),
            "extra_info": np.array([dict(item["extra_info"])], dtype=object),
        },
    )


@pytest.mark.parametrize("manager_name", ["naive", "dapo"])
def test_verl_rlhf_dataset_and_reward_managers_on_the_same_file(
    parquet: Path, tiny_lm, tmp_path: Path, manager_name: str
) -> None:  # type: ignore[no-untyped-def]
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset

    _, tok = tiny_lm
    data_cfg = OmegaConf.create(
        {"prompt_key": "prompt", "max_prompt_length": 256, "filter_overlong_prompts": False, "return_raw_chat": True,
         "cache_dir": str(tmp_path / "cache")}
    )  # fmt: skip
    ds = RLHFDataset(str(parquet), tok, data_cfg)
    assert len(ds) == len(ROWS)
    assert any(v is None for v in ds[0]["extra_info"].values())  # None-filled keys reach the reward manager
    config = _reward_config(accuracy_weight=0.9, format_weight=0.1)
    manager = get_reward_manager_cls(manager_name)(config, tok, get_custom_reward_fn(config))
    for i, (ptype, _, _, right, wrong) in enumerate(ROWS):
        good = manager.loop.run_until_complete(manager.run_single(_proto(tok, ds[i], right)))
        bad = manager.loop.run_until_complete(manager.run_single(_proto(tok, ds[i], wrong)))
        assert good["reward_score"] == pytest.approx(1.0), (ptype, good)
        assert bad["reward_score"] < 1.0, (ptype, bad)
        assert set(good["reward_extra_info"]) >= {"score", "accuracy", "format"}  # a fixed key set: verl stacks them


def test_reward_kwargs_from_the_config_reach_the_router(tiny_lm) -> None:  # type: ignore[no-untyped-def]
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo.reward import get_custom_reward_fn

    _, tok = tiny_lm
    config = _reward_config(mode="metric", accuracy_weight=1.0, format_weight=0.0)
    manager = get_reward_manager_cls("naive")(config, tok, get_custom_reward_fn(config))
    item = {"data_source": "tg", "reward_model": {"ground_truth": '{"time": [3, 5]}'},
            "extra_info": {"problem_type": "temporal_grounding"}}  # fmt: skip
    out = manager.loop.run_until_complete(manager.run_single(_proto(tok, item, '{"time": [5, 3]}')))
    assert out["reward_score"] == 1.0  # metric mode swapped the reversed span; weights 1/0 from the config


def test_verl_command_line_needs_the_plus_for_reward_kwargs() -> None:
    """What docs/rewards.md says: on verl's command line, reward kwargs need a leading `+` (verl's config does not
    declare `reward.custom_reward_function.reward_kwargs`). Checked on verl's own composed trainer config."""
    import verl
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    base = ["reward.custom_reward_function.path=pkg://evr1_rewards.integrations.verl"]
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        with pytest.raises(ConfigCompositionException, match="reward_kwargs"):
            compose("ppo_trainer", overrides=[*base, "reward.custom_reward_function.reward_kwargs.accuracy_weight=1.0"])
        cfg = compose(
            "ppo_trainer",
            overrides=[*base, "+reward.custom_reward_function.reward_kwargs.accuracy_weight=1.0",
                       "+reward.custom_reward_function.reward_kwargs.format_weight=0.0"],
        )  # fmt: skip
    fn = get_custom_reward_fn(cfg)
    out = fn(data_source="numerical", solution_str="3", ground_truth="3", extra_info={})
    assert out["score"] == 1.0  # untagged: format 0, but the weights from the + overrides make it count fully
