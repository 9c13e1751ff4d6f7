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


LORA_OPTIONS = ("language", "language_merger", "all")


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A tiny random model folder per model preset's family (Qwen2.5-VL, Qwen3-VL)."""
    from evr1_train.quickstart.model import TinyVLMSpec, save_tiny_vlm

    root = tmp_path_factory.mktemp("lora_models")
    return {
        "qwen2_5_vl_7b": save_tiny_vlm(root / "q25", TinyVLMSpec(arch="qwen2_5_vl")),
        "qwen3_vl_8b": save_tiny_vlm(root / "q3", TinyVLMSpec(arch="qwen3_vl")),
    }


@pytest.mark.parametrize("lora", LORA_OPTIONS)
@pytest.mark.parametrize("model", MODELS)
def test_lora_presets_configure_verls_own_lora_builder(model: str, lora: str, tiny_models: dict) -> None:
    """Every model preset x LoRA option: verl's HFModelConfig takes the keys, verl's own `_build_lora_module` (the FSDP
    actor's peft wrapping) puts adapters exactly where the option says, and the rollout mode is what verl's vLLM server
    decides from the same config (adapters for the language model, merged weights otherwise)."""
    from types import SimpleNamespace

    from omegaconf import OmegaConf
    from transformers import AutoModelForImageTextToText
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    from evr1_train.verl_config import prepare_verl_config

    cfg = _compose(
        [
            f"+experiment={model}_grpo",
            f"+evr1_lora={lora}",
            "data.evr1.cache_dir=c",
            "data.train_files=t.jsonl",
            f"actor_rollout_ref.model.path={tiny_models[model]}",
        ]
    )
    prepare_verl_config(cfg)
    prepare_verl_config(cfg)  # idempotent: the exclude regex is not appended twice
    node = cfg.actor_rollout_ref.model
    assert node.lora_rank == 32
    assert node.target_modules == "all-linear"
    hf_config = omega_conf_to_dataclass(OmegaConf.create(OmegaConf.to_container(node, resolve=True)))
    assert type(hf_config).__name__ == "HFModelConfig"
    assert hf_config.lora_rank == 32
    assert hf_config.lora_alpha == 64
    module = AutoModelForImageTextToText.from_pretrained(tiny_models[model])
    peft_model = FSDPEngine._build_lora_module(SimpleNamespace(model_config=hf_config), module)
    adapted = {n.split(".lora_A.")[0] for n, _ in peft_model.named_parameters() if ".lora_A." in n}
    tower = {n for n in adapted if ".visual." in n and ".merger" not in n and "deepstack_merger" not in n}
    merger = {n for n in adapted if ".merger" in n or "deepstack_merger" in n}
    language = {n for n in adapted if ".language_model.layers." in n}
    assert language, adapted
    assert bool(merger) == (lora in ("language_merger", "all")), merger
    assert bool(tower) == (lora == "all"), tower
    assert not any("lm_head" in n for n in adapted)
    trainable = {n for n, p in peft_model.named_parameters() if p.requires_grad}
    assert trainable
    assert all(".lora_" in n for n in trainable)
    # verl's vLLM server: `lora_as_adapter = lora_rank > 0 and not model.lora.merge` (vllm_async_server.py)
    as_adapter = hf_config.lora_rank > 0 and not hf_config.lora.get("merge", False)
    assert as_adapter == (lora == "language")
    assert cfg.actor_rollout_ref.rollout.load_format == ("safetensors" if lora == "language" else "dummy")


def test_frozen_modules_reach_verls_workers() -> None:
    """The patterns go into the Ray runtime env exactly as verl's main_ppo builds it for ray.init."""
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    from evr1_train.verl_config import prepare_verl_config
    from evr1_train.verl_hooks.freeze import ENV_VAR

    cfg = _compose(
        ["+experiment=qwen2_5_vl_7b_grpo", "data.evr1.cache_dir=c", "evr1.frozen_modules=[vision_tower,merger]"]
    )
    prepare_verl_config(cfg)
    runtime_env = OmegaConf.merge(get_ppo_ray_runtime_env(cfg), cfg.ray_kwargs.ray_init.runtime_env)
    assert runtime_env.env_vars[ENV_VAR] == '["vision_tower", "merger"]'
    with pytest.raises(ValueError, match="did you mean 'merger'"):
        prepare_verl_config(
            _compose(["+experiment=qwen2_5_vl_7b_grpo", "data.evr1.cache_dir=c", "evr1.frozen_modules=[mergr]"])
        )
    with pytest.raises(ValueError, match="use_orig_params=true"):
        prepare_verl_config(
            _compose(
                [
                    "+experiment=qwen2_5_vl_7b_grpo",
                    "data.evr1.cache_dir=c",
                    "evr1.frozen_modules=[vision_tower]",
                    "actor_rollout_ref.actor.strategy=fsdp",
                ]
            )
        )


def test_the_worker_side_freezing_wraps_the_module_verl_builds(tiny_vl) -> None:
    """The wrapper the plugin installs on FSDPEngine._build_module, around a builder returning the tiny model."""
    from transformers import AutoModelForImageTextToText

    from evr1_train.verl_hooks.freeze import freezing

    model = AutoModelForImageTextToText.from_pretrained(tiny_vl)
    built = freezing(lambda self: model, ["vision_tower", "merger"])(object())
    assert built is model
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen == {n for n, _ in model.named_parameters() if n.startswith("model.visual.")}


@pytest.mark.parametrize("preset", ["qwen2_5_vl_7b_grpo", "qwen3_vl_8b_dapo_hybrid"])
def test_the_evr1_trainer_mode_runs_as_verls_synchronous_trainer(preset: str) -> None:
    """verl's V1 base trainer treats any trainer_mode but "sync" as asynchronous (its replay buffer, one-prompt
    fetches, TransferQueue checkpoints); `evr1` must select Evr1Trainer yet build what verl's own `sync` mode builds."""
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync
    from verl.trainer.ppo.v1.trainer_base import get_trainer_cls
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    import evr1_train.verl_hooks.trainer  # noqa: F401  # registers the mode (the plugin does this in every process)
    from evr1_train.verl_config import prepare_verl_config

    cfg = _compose([f"+experiment={preset}", "data.evr1.cache_dir=c"])
    prepare_verl_config(cfg)
    assert cfg.trainer.v1.trainer_mode == "evr1"
    cls = get_trainer_cls(cfg.trainer.v1.trainer_mode)
    assert issubclass(cls, PPOTrainerSync)
    assert cls is not PPOTrainerSync

    def replay_buffer(trainer_cls: type, mode: str) -> tuple:
        trainer = trainer_cls.__new__(trainer_cls)  # only the config-driven pieces, no workers
        trainer.config = cfg
        trainer.trainer_mode = mode  # what verl's __init__ assigns
        return trainer, trainer._build_replay_buffer()

    ours, buffer = replay_buffer(cls, "evr1")
    _stock, stock_buffer = replay_buffer(PPOTrainerSync, "sync")
    assert ours.trainer_mode == "sync"
    assert type(buffer) is ReplayBuffer
    assert not isinstance(buffer, ReplayBufferAsync)
    assert type(buffer) is type(stock_buffer)
    for field in ("gen_batch_size", "train_batch_size", "max_inflight_gen_batches", "filter_groups_metric"):
        assert getattr(buffer, field) == getattr(stock_buffer, field), field


def test_a_verl_run_describes_itself_beside_every_checkpoint(
    tiny_models: dict, tmp_path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The verl protocol record equals what verl and evr1's dataset use (verl's own tokenizer/processor loaders, the
    dataset's DataOptions, the model's generation config); the evr1 trainer mode writes it into each global_step_N/."""
    import json
    import logging

    from transformers import AutoProcessor, AutoTokenizer, GenerationConfig
    from verl.trainer.ppo.v1.trainer_base import get_trainer_cls
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    import evr1_train.verl_hooks.trainer  # noqa: F401  # registers the evr1 trainer mode
    from evr1_cache import TRAIN_SETTINGS_FILE as PROTOCOL_FILE
    from evr1_train.cli import write_verl_protocol
    from evr1_train.data.dataset import _options
    from evr1_train.verl_config import prepare_verl_config

    path = str(tiny_models["qwen2_5_vl_7b"])
    cfg = _compose(
        [
            "+experiment=qwen2_5_vl_7b_grpo_hybrid",
            "+evr1_lora=language",
            "data.evr1.cache_dir=c",
            f"data.train_files={tmp_path / 'data' / 'train.evr1.jsonl'}",
            f"actor_rollout_ref.model.path={path}",
            f"trainer.default_local_dir={tmp_path / 'run'}",
            "+reward.custom_reward_function.reward_kwargs.think=required",
        ]
    )
    prepare_verl_config(cfg)
    write_verl_protocol(cfg)
    record = json.loads((tmp_path / "run" / PROTOCOL_FILE).read_text())
    tokenizer, processor = AutoTokenizer.from_pretrained(path), AutoProcessor.from_pretrained(path)
    generation = GenerationConfig.from_pretrained(path)
    want_eos = [generation.eos_token_id] if isinstance(generation.eos_token_id, int) else generation.eos_token_id
    assert record["engine"] == "verl"
    assert record["base_model"] == path
    assert record["chat_template"] == processor.chat_template
    assert record["generation"]["eos_token_ids"][: len(want_eos)] == want_eos
    assert tokenizer.eos_token_id in record["generation"]["eos_token_ids"]
    assert record["generation"]["pad_token_id"] == (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    assert record["generation"]["max_new_tokens"] == cfg.data.max_response_length
    assert record["generation"]["train"]["temperature"] == cfg.actor_rollout_ref.rollout.temperature
    opts = _options(cfg.data, cfg.data.train_files)  # what Evr1Dataset reads in every worker
    assert record["sampling"]["video"]["key"] == opts.video_spec().key()
    assert record["sampling"]["image"]["key"] == opts.image_spec().key()
    assert record["answer"]["think"] == "required"
    assert record["adapter"]["rank"] == cfg.actor_rollout_ref.model.lora_rank

    def verls_save(trainer) -> None:  # stands in for the actor/critic/dataloader writes
        (tmp_path / "run" / f"global_step_{trainer.global_steps}").mkdir()

    monkeypatch.setattr(PPOTrainerSync, "_save_checkpoint", verls_save)
    trainer = get_trainer_cls("evr1").__new__(get_trainer_cls("evr1"))
    trainer.config, trainer.global_steps = cfg, 5
    trainer._save_checkpoint()
    saved = json.loads((tmp_path / "run" / "global_step_5" / PROTOCOL_FILE).read_text())
    assert saved == {**record, "step": 5}
    trainer.global_steps, trainer._evr1_protocol = 6, None
    monkeypatch.setattr("evr1_train.engine.protocol.verl_training_protocol", lambda cfg: 1 / 0)
    with caplog.at_level(logging.WARNING):
        trainer._save_checkpoint()  # the checkpoint stands; the run goes on
    assert (tmp_path / "run" / "global_step_6").is_dir()
    assert not (tmp_path / "run" / "global_step_6" / PROTOCOL_FILE).exists()
    assert "could not write evr1_train_protocol.json" in caplog.text
