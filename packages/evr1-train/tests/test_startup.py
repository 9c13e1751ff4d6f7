"""Start-up checks (evr1_train.startup): a misspelt key or value is refused in seconds, naming the fix, starting nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evr1_train.errors import ConfigError
from evr1_train.startup import EXTENSION_POINTS, check_overrides, check_values, suggest, verl_adv_estimators

QUICKSTART = ["+experiment=quickstart"]


def _refused(argv: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        check_overrides(argv)
    return str(info.value)


def test_a_misspelt_key_names_the_right_one() -> None:
    msg = _refused([*QUICKSTART, "trainer.total_trainng_steps=5"])
    assert "did you mean trainer.total_training_steps" in msg
    assert "nothing was started" in msg


def test_a_misspelt_key_with_a_plus_is_refused_too() -> None:
    """Hydra's advice ("use +KEY") would add a key nothing reads and start the full run."""
    msg = _refused([*QUICKSTART, "+trainer.total_trainng_steps=5"])
    assert "`+trainer.total_trainng_steps=5` adds trainer.total_trainng_steps, which nothing reads" in msg
    assert "did you mean trainer.total_training_steps" in msg
    assert "reward.custom_reward_function.reward_kwargs" in msg  # where `+` may add keys


def test_every_problem_is_reported_at_once() -> None:
    msg = _refused([*QUICKSTART, "trainr.total_training_steps=5", "~foo.bar", "algorithm.adv_estimator=grpo"])
    assert "trainer.total_training_steps" in msg
    assert "no key foo.bar" in msg
    assert "adv_estimator" not in msg


def test_valid_keys_groups_and_extension_points_pass() -> None:
    check_overrides(
        [
            "+experiment=qwen2_5_vl_7b_grpo",
            "data.train_files=t.jsonl",
            "trainer.total_training_steps=5",
            "+reward.custom_reward_function.reward_kwargs.accuracy_weight=1.0",
            "+data.evr1.video.family=glm4v",
            "+actor_rollout_ref.model.override_config.attn_implementation=eager",
            "--cfg",
            "job",
        ]
    )


def test_a_plus_may_set_a_field_of_the_dataclass_a_node_builds() -> None:
    """verl builds `actor_rollout_ref.rollout` into its `RolloutConfig`; the YAML leaves `enable_sleep_mode` out."""
    from dataclasses import fields

    from verl.workers.config import RolloutConfig

    assert "enable_sleep_mode" in {f.name for f in fields(RolloutConfig)}  # what the source reading must find
    check_overrides(["+actor_rollout_ref.rollout.enable_sleep_mode=False"])
    with pytest.raises(ConfigError, match="enable_sleep_mode"):  # a typo of it is still refused, with the name
        check_overrides(["+actor_rollout_ref.rollout.enable_sleep_mod=False"])


def test_an_unset_key_under_an_extension_point_gets_the_plus_spelled_out() -> None:
    msg = _refused([*QUICKSTART, "reward.custom_reward_function.reward_kwargs.x=2"])
    assert "`+reward.custom_reward_function.reward_kwargs.x=2`" in msg


@pytest.mark.parametrize("extra", [[], ["trainer.total_training_steps=5"]])
def test_a_preset_typo_lists_the_presets(extra: list[str]) -> None:
    msg = _refused(["+experiment=quickstrat", *extra])
    assert "no experiment named quickstrat; did you mean quickstart" in msg
    assert "quickstart_lora" in msg  # the available presets are listed
    assert "engine named locl; did you mean local?" in _refused(["engine=locl"])


def test_suggestions_fall_back_to_the_last_part() -> None:
    known = ["trainer.total_training_steps", "actor_rollout_ref.actor.optim.lr", "data.train_files"]
    assert suggest("optim.lrr", known) == ["actor_rollout_ref.actor.optim.lr"]
    assert suggest("zzz.qqq", known) == []


def test_extension_points_exist_or_are_documented() -> None:
    """Each extension point is named in docs/train.md, where a user finds it."""
    docs = (Path(__file__).resolve().parents[3] / "docs" / "train.md").read_text(encoding="utf-8")
    missing = [p for p in EXTENSION_POINTS if f"`{p}`" not in docs]
    assert not missing, missing


def _cfg(overrides: list[str]):
    from hydra import compose, initialize_config_module

    from evr1_train.startup import searchpath_override

    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        return compose("evr1_trainer", overrides=[*QUICKSTART, *overrides, searchpath_override()])


@pytest.mark.parametrize(
    ("overrides", "needles"),
    [
        (["algorithm.adv_estimator=rlo"], ["did you mean rloo?", "grpo", "reinforce_plus_plus"]),
        (["engine.name=locl"], ["did you mean local?", "valid: local, verl"]),
        (["algorithm.adv_estimator=gae"], ["not available in the local engine"]),
        (["actor_rollout_ref.actor.policy_loss.loss_mode=gpso"], ["did you mean gspo?", "evr1_hybrid", "vanilla"]),
        (["+data.evr1.video.family=glm4vv"], ["glm4v", "qwen2_5_vl"]),
        (["+data.evr1.video.famly=glm4v"], ["did you mean data.evr1.video.family?"]),
        (["data.evr1.video_source=cache"], ["prefer_cache", "cache_only"]),
        (["+data.evr1.video.timeline=presentaton"], ["did you mean 'presentation'?"]),
    ],
)
def test_enumerated_values_are_checked_with_the_valid_names(overrides: list[str], needles: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        check_values(_cfg(overrides))
    for needle in needles:
        assert needle in str(info.value)


def test_the_quickstart_values_pass() -> None:
    check_values(_cfg([]))
    check_values(_cfg(["+data.evr1.video.timeline=presentation"]))  # docs/spec.md "Timelines"


def test_the_estimators_read_from_verls_source_are_its_registry() -> None:
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY

    from evr1_train.losses import register_with_verl
    from evr1_train.startup import verl_policy_losses

    assert verl_adv_estimators() == tuple(sorted(ADV_ESTIMATOR_REGISTRY))
    register_with_verl()  # what a run does before training
    assert verl_policy_losses() == tuple(sorted(POLICY_LOSS_REGISTRY))


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["trainer.total_trainng_steps=5"], "did you mean trainer.total_training_steps"),
        (["+trainer.total_trainng_steps=5"], "did you mean trainer.total_training_steps"),
        (["algorithm.adv_estimator=rlo"], "did you mean rloo?"),
    ],
)
def test_the_command_refuses_before_any_work(tmp_path: Path, argv: list[str], needle: str) -> None:
    """The real console entry: exit status 2, the fix on stderr, and no run folder (nothing was started)."""
    code = "import sys; from evr1_train.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert list(tmp_path.iterdir()) == []
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("argv", [["trainer.total_training_steps=5", "--cfg", "job"], ["--cfg", "job"]])
def test_hydras_own_options_still_work(tmp_path: Path, argv: list[str]) -> None:
    """The verl search path the command line adds sits next to the other overrides, never after an option."""
    code = "import sys; from evr1_train.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    steps = "5" if "trainer.total_training_steps=5" in argv else "300"
    assert f"total_training_steps: {steps}" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_the_sft_command_is_checked_before_torchrun(capsys: pytest.CaptureFixture[str]) -> None:
    from evr1_train.verl_sft import main as sft_main

    documented = ["+sft_experiment=qwen2_5_vl_7b", "data.train_files=cache/train.evr1.jsonl",
                  "data.val_files=cache/val.evr1.jsonl", "data.evr1.cache_dir=cache/"]  # docs/train.md  # fmt: skip
    check_overrides(documented, "evr1_sft")
    assert sft_main([*documented, "trainer.total_trainng_steps=5"]) == 2
    err = capsys.readouterr().err
    assert "evr1-train sft: error:" in err
    assert "did you mean trainer.total_training_steps" in err


def test_presets_of_ones_own_config_dir_are_checked_too(tmp_path: Path) -> None:
    (tmp_path / "experiment").mkdir()
    preset = "# @package _global_\ndefaults:\n  - quickstart\ntrainer:\n  total_training_steps: 3\n"
    (tmp_path / "experiment" / "mine.yaml").write_text(preset)
    check_overrides(["--config-dir", str(tmp_path), "+experiment=mine", "trainer.test_freq=1"])
    msg = _refused([f"--config-dir={tmp_path}", "+experiment=mine", "trainer.tst_freq=1"])
    assert "did you mean trainer.test_freq" in msg
    assert "did you mean mine" in _refused(["-cd", str(tmp_path), "+experiment=mien"])


def _presets() -> list[str]:
    from evr1_train.cli import _group_names

    return _group_names("experiment")


@pytest.mark.parametrize("name", _presets())
def test_every_shipped_preset_passes_the_start_up_checks(name: str) -> None:
    """No false refusal: each preset, with the data keys a user gives, composes and passes both checks."""
    from hydra import compose, initialize_config_module

    from evr1_train.startup import searchpath_override

    argv = [f"+experiment={name}", "data.train_files=t.jsonl", "data.val_files=v.jsonl", "data.evr1.cache_dir=c"]
    check_overrides(argv)
    with initialize_config_module(config_module="evr1_train.conf", version_base=None):
        check_values(compose("evr1_trainer", overrides=[*argv, searchpath_override()]))
