"""`LocalConfig`: the settings the single-process engine reads, taken from the same Hydra tree as the verl path.

Why one reader: a user switches `engine=verl` <-> `engine=local` without rewriting the experiment. The algorithm keys
are verl's own (`algorithm.*`, `actor_rollout_ref.actor.*`, `actor_rollout_ref.rollout.*`, `data.*`, `trainer.*`);
only what has no verl equivalent (device, threads, output folder, quickstart) lives under `engine.*`. Every value is
validated here, before a model is loaded, with the key name in the message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

from evr1_train.errors import ConfigError

#: advantage estimators the local engine cannot run, with the reason (everything else in verl's registry works).
UNSUPPORTED_ESTIMATORS: dict[str, str] = {
    "gae": "GAE needs a critic (value model); the local engine trains only the actor. Use grpo, rloo, reinforce_plus_plus, remax, ...",
    "optimal_token_baseline": "needs actor.calculate_sum_pi_squared from verl's FSDP actor; use grpo or rloo locally",
    "tir_optimal_token_baseline": "needs actor.calculate_sum_pi_squared from verl's FSDP actor; use grpo or rloo locally",
}


def _get(node: Any, dotted: str, default: Any = None) -> Any:
    """`node.a.b.c` for dicts and OmegaConf nodes alike; `default` when any part is missing or None."""
    cur = node
    for part in dotted.split("."):
        if cur is None:
            return default
        if isinstance(cur, Mapping) or hasattr(cur, "get"):
            try:
                cur = cur.get(part)
            except Exception:
                return default
        else:
            cur = getattr(cur, part, None)
    return default if cur is None else cur


def plain(value: Any) -> Any:
    """OmegaConf containers -> plain dict/list (resolved); other values unchanged. Works without omegaconf: the
    parity sides run in evr1-eval's vLLM venv, which holds evr1-train without its dependencies (`nox -s eval_engines`)."""
    try:
        from omegaconf import OmegaConf
    except ImportError:
        return value  # no omegaconf, no OmegaConf container
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _strings(value: Any) -> tuple[str, ...]:
    return (str(value),) if isinstance(value, str) else tuple(str(x) for x in value)


def _targets(value: Any) -> str | tuple[str, ...]:
    """LoRA target modules: "all-linear" (peft's keyword) or a list of module names."""
    return str(value) if isinstance(value, str) else tuple(str(x) for x in value)


def _pair(value: Any) -> tuple[float, float]:
    return (float(value[0]), float(value[1]))


def _freq(value: Any) -> int:
    """verl's test/save frequencies: <= 0 means never."""
    return max(0, int(value))


def _resume(value: Any) -> str:
    """engine.resume: auto | true (resume even if the settings differ) | disable (false) | a checkpoint folder."""
    if isinstance(value, bool):
        return "true" if value else "disable"
    text = str(value)
    lowered = text.lower()
    return {"false": "disable", "no": "disable", "yes": "true"}.get(
        lowered, lowered if lowered in ("auto", "true", "disable") else text
    )


def _positive(value: Any) -> int | None:
    """A count where verl writes 0 for "unset": None falls back to the field's default."""
    return int(value) if int(value) > 0 else None


@dataclass(frozen=True)
class Source:
    """Where one `LocalConfig` field is read from: dotted keys (the first one set wins) and a converter."""

    field: str
    keys: tuple[str, ...]
    convert: Callable[[Any], Any]


_T = TypeVar("_T")
_A = "actor_rollout_ref.actor."
_R = "actor_rollout_ref.rollout."


def source(convert: Callable[[Any], Any], *keys: str) -> dict[str, Any]:
    """A `LocalConfig` field's metadata: the dotted keys it is read from (the first one set wins) and a converter."""
    return {"keys": keys, "convert": convert}


def read(default: _T, convert: Callable[[Any], Any], *keys: str) -> _T:
    """A `LocalConfig` field with its default, read from `keys` through `convert` (see `source`)."""
    return field(default=default, metadata=source(convert, *keys))


@dataclass(frozen=True)
class LocalConfig:
    """Validated settings of one local run (see the module docstring for where each comes from)."""

    # data
    train_files: tuple[str, ...] = field(metadata=source(_strings, "data.train_files"))
    val_files: tuple[str, ...] = field(metadata=source(_strings, "data.val_files"))
    train_batch_size: int = read(8, int, "data.train_batch_size")
    val_batch_size: int = read(64, int, "engine.val_batch_size")
    max_response_length: int = read(16, int, "data.max_response_length")
    shuffle: bool = read(True, bool, "data.shuffle")
    seed: int = read(0, int, "engine.seed", "data.seed")
    # model
    model_path: str = read("", str, "actor_rollout_ref.model.path")
    #: evr1.frozen_modules: module groups or regexes (evr1_train.modules)
    frozen_modules: tuple[str, ...] = read((), _strings, "evr1.frozen_modules")
    #: > 0: LoRA through peft (verl's actor_rollout_ref.model.lora_* keys)
    lora_rank: int = read(0, int, "actor_rollout_ref.model.lora_rank")
    lora_alpha: int = read(16, int, "actor_rollout_ref.model.lora_alpha")
    lora_target_modules: str | tuple[str, ...] = read("all-linear", _targets, "actor_rollout_ref.model.target_modules")
    lora_exclude_modules: str | None = None  # one regex (verl's exclude_modules + evr1.lora.exclude groups)
    #: continue training this adapter
    lora_adapter_path: str | None = read(None, str, "actor_rollout_ref.model.lora_adapter_path")
    # supervised warm start (evr1.sft)
    sft: bool = read(False, bool, "evr1.sft.enable")
    sft_response_key: str = read("offline_output", str, "evr1.sft.response_key")
    # multi-turn agent episodes with the evr1.agent tools (engine.agent; evr1_train.engine.agent_trainer)
    agent: bool = read(False, bool, "engine.agent")
    # rollout
    n: int = read(4, int, _R + "n")
    temperature: float = read(1.0, float, _R + "temperature")
    top_p: float = read(1.0, float, _R + "top_p")
    top_k: int = read(-1, int, _R + "top_k")
    val_do_sample: bool = read(False, bool, _R + "val_kwargs.do_sample")
    # algorithm
    adv_estimator: str = read("grpo", str, "algorithm.adv_estimator")
    norm_adv_by_std_in_grpo: bool = read(True, bool, "algorithm.norm_adv_by_std_in_grpo")
    use_kl_in_reward: bool = read(False, bool, "algorithm.use_kl_in_reward")
    kl_penalty: str = read("kl", str, "algorithm.kl_penalty")
    kl_ctrl_coef: float = read(0.001, float, "algorithm.kl_ctrl.kl_coef")
    # actor
    lr: float = read(1e-6, float, _A + "optim.lr")
    weight_decay: float = read(0.01, float, _A + "optim.weight_decay")
    betas: tuple[float, float] = read((0.9, 0.999), _pair, _A + "optim.betas")
    warmup_steps: int = 0
    #: constant | cosine (verl's optim.lr_scheduler_type)
    lr_scheduler: str = read("constant", str, _A + "optim.lr_scheduler_type")
    min_lr_ratio: float = read(0.0, float, _A + "optim.min_lr_ratio")
    grad_clip: float = read(1.0, float, _A + "optim.clip_grad", _A + "grad_clip")
    ppo_epochs: int = read(1, int, _A + "ppo_epochs")
    #: prompts per optimiser step (verl: multiplied by n)
    ppo_mini_batch_size: int = read(8, int, _A + "ppo_mini_batch_size", "data.train_batch_size")
    #: sequences per forward/backward
    micro_batch_size: int = read(16, int, _A + "ppo_micro_batch_size_per_gpu", _A + "ppo_micro_batch_size")
    loss_mode: str = read("vanilla", str, _A + "policy_loss.loss_mode")
    loss_agg_mode: str = read("token-mean", str, _A + "loss_agg_mode")
    entropy_coeff: float = read(0.0, float, _A + "entropy_coeff")
    use_kl_loss: bool = read(False, bool, _A + "use_kl_loss")
    kl_loss_coef: float = read(0.001, float, _A + "kl_loss_coef")
    kl_loss_type: str = read("low_var_kl", str, _A + "kl_loss_type")
    # trainer
    total_steps: int = read(100, int, "trainer.total_training_steps", "engine.total_steps")
    test_freq: int = read(10, _freq, "trainer.test_freq")
    save_freq: int = read(50, _freq, "trainer.save_freq")
    val_before_train: bool = read(True, bool, "trainer.val_before_train")
    output_dir: str = read("runs/local", str, "engine.output_dir")
    experiment_name: str = read("local", str, "trainer.experiment_name")
    loggers: tuple[str, ...] = read(("console", "jsonl", "tensorboard"), _strings, "engine.loggers", "trainer.logger")
    #: auto | true | disable | <checkpoint folder> (see evr1_train.runs)
    resume: str = read("auto", _resume, "engine.resume")
    max_checkpoints: int = read(2, int, "engine.max_checkpoints")
    # engine
    device: str = read("auto", str, "engine.device")
    dtype: str = read("auto", str, "engine.dtype")
    num_threads: int = read(0, int, "engine.num_threads")
    #: glibc: serve large allocations from mmap at a fixed 128 KiB threshold, so freed tensors go back to the OS
    #: (engine.memory.return_freed_memory); false keeps glibc's default (the threshold grows, RSS keeps the heap)
    return_freed_memory: bool = read(True, bool, "engine.return_freed_memory")
    plot: bool = read(True, bool, "engine.plot")
    reward_weights: Mapping[str, float] = field(
        default_factory=lambda: {"accuracy": 0.9, "format": 0.1}, metadata=source(dict, "engine.reward.weights")
    )
    reward_think: str = read("optional", str, "engine.reward.think")
    gdpo_reward_keys: tuple[str, ...] = read((), _strings, "algorithm.gdpo_reward_keys")
    filter_groups_metric: str | None = None  # DAPO dynamic sampling: drop groups whose metric is all-equal
    filter_groups_max_batches: int = read(10, _positive, "algorithm.filter_groups.max_num_gen_batches")
    # DAPO overlong reward shaping (verl's `dapo` reward manager: reward.reward_kwargs.overlong_buffer_cfg)
    overlong_buffer_len: int = 0  # 0 = off
    overlong_penalty_factor: float = 1.0
    overlong_max_resp_len: int = 0
    # raw nodes passed on to verl's functions and evr1's data / hybrid helpers
    algorithm_node: Any = None
    actor_node: Any = None
    data_evr1_node: Any = None
    hybrid_node: Any = None
    agent_node: Any = None
    #: data.max_prompt_length: rows over it are refused or filtered at start-up (evr1.plan.on_over_limit)
    max_prompt_length: int | None = None

    def __post_init__(self) -> None:
        if not self.train_files:
            raise ConfigError("data.train_files is empty: give the dataset file(s) written by `evr1-cache build`")
        for name in ("train_batch_size", "val_batch_size", "max_response_length", "n", "ppo_epochs", "total_steps"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.ppo_mini_batch_size < 1 or self.train_batch_size % self.ppo_mini_batch_size:
            raise ConfigError(
                f"actor_rollout_ref.actor.ppo_mini_batch_size ({self.ppo_mini_batch_size}) must divide "
                f"data.train_batch_size ({self.train_batch_size})"
            )
        if self.micro_batch_size < 1:
            raise ConfigError(
                f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu must be >= 1, got {self.micro_batch_size}"
            )
        if self.adv_estimator in UNSUPPORTED_ESTIMATORS:
            raise ConfigError(
                f"algorithm.adv_estimator={self.adv_estimator} is not available in the local engine: "
                f"{UNSUPPORTED_ESTIMATORS[self.adv_estimator]}"
            )
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ConfigError(f"engine.device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        if self.dtype not in ("auto", "float32", "bfloat16"):
            raise ConfigError(f"engine.dtype must be auto, float32 or bfloat16, got {self.dtype!r}")
        if self.lr_scheduler not in ("constant", "cosine"):
            raise ConfigError(
                f"actor_rollout_ref.actor.optim.lr_scheduler_type must be constant or cosine, got {self.lr_scheduler!r}"
            )
        if self.overlong_buffer_len and not 0 < self.overlong_buffer_len <= self.overlong_max_resp_len:
            raise ConfigError(
                "reward.reward_kwargs.overlong_buffer_cfg.len must be > 0 and <= reward.reward_kwargs.max_resp_len "
                f"(default data.max_response_length); got len={self.overlong_buffer_len}, "
                f"max_resp_len={self.overlong_max_resp_len}. To switch the penalty off set overlong_buffer_cfg.enable=false"
            )
        if self.lora_rank < 0 or (self.lora_rank and self.lora_alpha <= 0):
            raise ConfigError(
                f"actor_rollout_ref.model.lora_rank must be >= 0 (0 = off) and lora_alpha > 0, got "
                f"{self.lora_rank} / {self.lora_alpha}"
            )
        if self.temperature <= 0:
            raise ConfigError(
                f"actor_rollout_ref.rollout.temperature must be > 0 for RL sampling, got {self.temperature}"
            )

    @property
    def mini_batches_per_step(self) -> int:
        return self.train_batch_size // self.ppo_mini_batch_size

    @classmethod
    def from_cfg(cls, cfg: Any) -> LocalConfig:
        """Read a composed `evr1-train` config (OmegaConf) or an equivalent nested dict.

        Every plain field comes from the dotted keys its definition names (`read`, `SOURCES`; first set one wins) and
        falls back to its own default, so each key and default is written once: in the dataclass (and, for `engine.*`,
        mirrored in `conf/engine/local.yaml`, which a test keeps equal). Only settings derived from several keys are
        computed below.
        """
        defaults = {f.name: _default(f) for f in fields(cls)}
        values: dict[str, Any] = {}
        for src in SOURCES:
            raw = next((v for v in (plain(_get(cfg, k)) for k in src.keys) if v is not None), None)
            value = None if raw is None else src.convert(raw)
            values[src.field] = defaults[src.field] if value is None else value
        total = values["total_steps"]
        warmup = int(_get(cfg, "actor_rollout_ref.actor.optim.lr_warmup_steps", -1))
        if warmup < 0:  # verl: a negative step count means "use lr_warmup_steps_ratio"
            warmup = int(float(_get(cfg, "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", 0.0)) * total)
        values["warmup_steps"] = max(0, warmup)
        algo = _get(cfg, "algorithm")
        if _get(algo, "filter_groups.enable", False):
            values["filter_groups_metric"] = str(_get(algo, "filter_groups.metric", "accuracy"))
        values.update(_overlong(cfg, values["max_response_length"]))
        values["lora_exclude_modules"] = lora_exclude(cfg)
        values.update(
            algorithm_node=algo,
            actor_node=_get(cfg, "actor_rollout_ref.actor"),
            data_evr1_node=_get(cfg, "data.evr1"),
            hybrid_node=_get(cfg, "evr1.hybrid"),
            agent_node=_get(cfg, "evr1.agent"),
            max_prompt_length=_get(cfg, "data.max_prompt_length"),
        )
        return cls(**values)


def _default(f: Any) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return ()  # train_files / val_files: "not given"


#: The one table of (field, keys), from the fields' metadata: verl's own keys for everything verl has, `engine.*` for
#: the rest.
SOURCES: tuple[Source, ...] = tuple(
    Source(f.name, f.metadata["keys"], f.metadata["convert"]) for f in fields(LocalConfig) if "keys" in f.metadata
)


def lora_exclude(cfg: Any) -> str | None:
    """verl's `actor_rollout_ref.model.exclude_modules` (a regex, or a list of module names) joined with the module
    groups of `evr1.lora.exclude`, as one regex (peft full-matches it against module names)."""
    import re

    from evr1_train.modules import exclude_regex

    verl_value = plain(_get(cfg, "actor_rollout_ref.model.exclude_modules"))
    parts: list[str] = []
    if isinstance(verl_value, str) and verl_value:
        parts.append(f"(?:{verl_value})")
    elif verl_value:  # peft's list form: exact names or dotted suffixes
        parts += [rf"(?:(?:.*\.)?{re.escape(str(x))})" for x in verl_value]
    groups = exclude_regex(_strings(plain(_get(cfg, "evr1.lora.exclude")) or ()))
    if groups:
        parts.append(groups)
    return "|".join(parts) or None


def _overlong(cfg: Any, max_response_length: int) -> dict[str, Any]:
    """verl's `dapo` reward manager shapes rewards of responses longer than max_resp_len - len (a linear penalty up to
    -penalty_factor at max_resp_len); only that manager does, so the local engine follows the same switch."""
    kwargs = _get(cfg, "reward.reward_kwargs") or {}
    buffer = _get(kwargs, "overlong_buffer_cfg") or {}
    if str(_get(cfg, "reward.reward_manager.name", "naive")) != "dapo" or not _get(buffer, "enable", False):
        return {}
    max_len = _get(kwargs, "max_resp_len") or max_response_length
    length = int(_get(buffer, "len", 0) or 0)
    if length <= 0:
        raise ConfigError(
            f"reward.reward_kwargs.overlong_buffer_cfg.len must be > 0 when the overlong penalty is enabled, got {length}"
        )
    return {
        "overlong_buffer_len": length,
        "overlong_penalty_factor": float(_get(buffer, "penalty_factor", 1.0)),
        "overlong_max_resp_len": int(max_len),
    }
