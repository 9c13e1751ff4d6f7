"""Every experiment preset composes on top of verl's real ppo_trainer config and passes evr1's and verl's checks."""

from __future__ import annotations

from importlib import resources

import pytest

pytestmark = pytest.mark.verl

MODELS = ("qwen2_5_vl_7b", "qwen3_vl_8b")
ALGOS = ("grpo", "dapo", "gspo", "cispo", "rloo", "reinforce_pp", "remax", "gdpo")
#: checkpoint presets of the other model families (evr1_cache.families): GRPO and hybrid GRPO each
FAMILY_MODELS = ("qwen3_5_9b", "qwen3_5_35b_a3b", "qwen3_vl_30b_a3b", "glm4_1v_9b", "internvl3_5_8b")
EXPECTED = sorted(
    [f"{m}_{a}{h}" for m in MODELS for a in ALGOS for h in ("", "_hybrid")]
    + [f"{m}_grpo{h}" for m in FAMILY_MODELS for h in ("", "_hybrid")]
)
#: model path -> (family, video size factor) every preset of that model must carry
GEOMETRY = {
    "Qwen/Qwen2.5-VL-7B-Instruct": ("qwen2_5_vl", 28),
    "Qwen/Qwen3-VL-8B-Instruct": ("qwen3_vl", 32),
    "Qwen/Qwen3.5-9B": ("qwen3_5", 32),
    "Qwen/Qwen3.5-35B-A3B": ("qwen3_5", 32),
    "Qwen/Qwen3-VL-30B-A3B-Instruct": ("qwen3_vl", 32),
    "zai-org/GLM-4.1V-9B-Thinking": ("glm4v", 28),
    "OpenGVLab/InternVL3_5-8B-HF": ("internvl", 448),
}


def _presets() -> list[str]:
    folder = resources.files("evr1_train.conf") / "experiment"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if not p.name.startswith("quickstart"))


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        return compose(config_name="evr1_trainer", overrides=overrides)


def test_the_preset_grid_is_complete() -> None:
    assert _presets() == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_preset_composes_and_validates(name: str) -> None:
    from omegaconf import OmegaConf
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
    from verl.utils.config import omega_conf_to_dataclass

    from evr1_train.verl_config import prepare_verl_config

    cfg = _compose([f"+experiment={name}", "data.evr1.cache_dir=cache", "data.train_files=t.jsonl"])
    prepare_verl_config(cfg)
    assert cfg.engine.name == "verl"
    assert cfg.trainer.experiment_name == name
    assert cfg.data.custom_cls.name == "Evr1Dataset"
    assert cfg.reward.custom_reward_function.path == "pkg://evr1_rewards.integrations.verl"
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "evr1_hybrid"
    assert cfg.evr1.hybrid.enable == name.endswith("_hybrid")
    assert cfg.evr1.rollout_dump.enable is False  # rollout dumps: off in the 7B/8B presets (on in the quickstart)
    assert cfg.algorithm.adv_estimator in ADV_ESTIMATOR_REGISTRY
    assert cfg.actor_rollout_ref.actor.policy_loss.loss_mode in POLICY_LOSS_REGISTRY
    OmegaConf.resolve(cfg)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    algo = omega_conf_to_dataclass(cfg.algorithm)
    assert rollout.n >= 2
    assert actor.ppo_mini_batch_size > 0
    model = cfg.actor_rollout_ref.model.path
    family, factor = GEOMETRY[model]
    assert cfg.data.evr1.video.size_factor == factor
    from evr1_cache.families import family_for_model
    from evr1_train.data import DataOptions

    opts = DataOptions.from_mapping(cfg.data.evr1)
    fam = family_for_model(model)  # the preset's specs are the ones its model family accepts
    assert fam.name == family
    fam.check_fits(opts.video_spec(), "data.evr1.video")
    fam.check_fits(opts.image_spec(), "data.evr1.image")
    if "_dapo" in name:
        assert algo.filter_groups.enable
        assert algo.filter_groups.metric == "accuracy"
        assert actor.clip_ratio_high == pytest.approx(0.28)
    if "_gdpo" in name:
        assert list(algo.gdpo_reward_keys) == ["accuracy", "format"]
    if "_remax" in name:
        assert cfg.trainer.use_v1 is False
    else:
        assert cfg.trainer.v1.trainer_mode == "evr1"


def test_off_policy_hybrid_wraps_the_algorithms_own_loss() -> None:
    from evr1_train.verl_config import prepare_verl_config

    cfg = _compose(
        ["+experiment=qwen3_vl_8b_gspo_hybrid", "data.evr1.cache_dir=c", "evr1.hybrid.offline_handling=off_policy"]
    )
    prepare_verl_config(cfg)
    assert cfg.actor_rollout_ref.actor.policy_loss.loss_mode == "evr1_hybrid"
    assert cfg.evr1.hybrid.base_loss_mode == "gspo"


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["+experiment=qwen2_5_vl_7b_grpo_hybrid"], "data.evr1.cache_dir is not set"),
        (
            [
                "+experiment=qwen2_5_vl_7b_remax_hybrid",
                "data.evr1.cache_dir=c",
                "evr1.hybrid.offline_handling=off_policy",
            ],
            "needs verl's V1 trainer",
        ),
        (["+experiment=qwen2_5_vl_7b_grpo_hybrid", "data.evr1.cache_dir=c", "actor_rollout_ref.rollout.n=1"], "n > k"),
        (
            ["+experiment=qwen2_5_vl_7b_grpo_hybrid", "data.evr1.cache_dir=c", "evr1.hybrid.mode=below_accuracy"],
            "accuracy_threshold",
        ),
        (
            [
                "+experiment=qwen2_5_vl_7b_grpo",
                "data.evr1.cache_dir=c",
                "actor_rollout_ref.actor.policy_loss.loss_mode=evr1_hybrid",
            ],
            "only meaningful",
        ),
    ],
)
def test_bad_combinations_fail_before_ray_starts(overrides: list[str], needle: str) -> None:
    from evr1_train.verl_config import prepare_verl_config

    with pytest.raises(ValueError, match=needle):
        prepare_verl_config(_compose(overrides))


def test_cli_defaults_to_the_quickstart() -> None:
    from evr1_train.cli import _with_default_experiment

    assert _with_default_experiment([]) == ["+experiment=quickstart"]
    assert _with_default_experiment(["trainer.total_training_steps=2"]) == [
        "+experiment=quickstart",
        "trainer.total_training_steps=2",
    ]
    # overrides stay contiguous around an option (argparse refuses `a=b --cfg job +experiment=...`)
    assert _with_default_experiment(["a.b=1", "--cfg", "job"]) == ["+experiment=quickstart", "a.b=1", "--cfg", "job"]
    assert _with_default_experiment(["--cfg", "job"]) == ["--cfg", "job", "+experiment=quickstart"]
    assert _with_default_experiment(["+experiment=qwen3_vl_8b_grpo"]) == ["+experiment=qwen3_vl_8b_grpo"]
    assert _with_default_experiment(["engine=verl", "x=1"]) == ["engine=verl", "x=1"]
    assert _with_default_experiment(["--help"]) == ["--help"]


def test_unknown_engine_is_named() -> None:
    from omegaconf import OmegaConf

    from evr1_train.cli import run

    with pytest.raises(ValueError, match="did you mean 'verl'"):
        run(OmegaConf.create({"engine": {"name": "verk"}}))
