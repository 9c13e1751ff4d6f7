"""`LocalConfig`: the settings the single-process engine reads, taken from the same Hydra tree as the verl path.

Why one reader: a user switches `engine=verl` <-> `engine=local` without rewriting the experiment. The algorithm keys
are verl's own (`algorithm.*`, `actor_rollout_ref.actor.*`, `actor_rollout_ref.rollout.*`, `data.*`, `trainer.*`);
only what has no verl equivalent (device, threads, output folder, quickstart) lives under `engine.*`. Every value is
validated here, before a model is loaded, with the key name in the message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    """OmegaConf containers -> plain dict/list (resolved); other values unchanged."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, DictConfig | ListConfig):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - hydra-core (a dependency) brings omegaconf
        pass
    return value


@dataclass(frozen=True)
class LocalConfig:
    """Validated settings of one local run (see the module docstring for where each comes from)."""

    # data
    train_files: tuple[str, ...]
    val_files: tuple[str, ...]
    train_batch_size: int = 8
    val_batch_size: int = 64
    max_response_length: int = 16
    shuffle: bool = True
    seed: int = 0
    # model
    model_path: str = ""
    # rollout
    n: int = 4
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    val_do_sample: bool = False
    # algorithm
    adv_estimator: str = "grpo"
    norm_adv_by_std_in_grpo: bool = True
    use_kl_in_reward: bool = False
    kl_penalty: str = "kl"
    kl_ctrl_coef: float = 0.001
    # actor
    lr: float = 1e-6
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_steps: int = 0
    lr_scheduler: str = "constant"  # constant | cosine (verl's optim.lr_scheduler_type)
    min_lr_ratio: float = 0.0
    grad_clip: float = 1.0
    ppo_epochs: int = 1
    ppo_mini_batch_size: int = 8  # prompts per optimiser step (verl: multiplied by n)
    micro_batch_size: int = 16  # sequences per forward/backward
    loss_mode: str = "vanilla"
    loss_agg_mode: str = "token-mean"
    entropy_coeff: float = 0.0
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    # trainer
    total_steps: int = 100
    test_freq: int = 10
    save_freq: int = 50
    val_before_train: bool = True
    output_dir: str = "runs/local"
    experiment_name: str = "local"
    loggers: tuple[str, ...] = ("console", "jsonl", "tensorboard")
    resume: str = "auto"  # auto | disable | <checkpoint folder>
    max_checkpoints: int = 2
    # engine
    device: str = "auto"
    dtype: str = "auto"
    num_threads: int = 0
    plot: bool = True
    reward_weights: Mapping[str, float] = field(default_factory=lambda: {"accuracy": 0.9, "format": 0.1})
    reward_think: str = "optional"
    gdpo_reward_keys: tuple[str, ...] = ()
    filter_groups_metric: str | None = None  # DAPO dynamic sampling: drop groups whose metric is all-equal
    filter_groups_max_batches: int = 10
    # DAPO overlong reward shaping (verl's `dapo` reward manager: reward.reward_kwargs.overlong_buffer_cfg)
    overlong_buffer_len: int = 0  # 0 = off
    overlong_penalty_factor: float = 1.0
    overlong_max_resp_len: int = 0
    # raw nodes passed on to verl's functions / H6's helpers
    algorithm_node: Any = None
    actor_node: Any = None
    data_evr1_node: Any = None
    hybrid_node: Any = None
    #: data.max_prompt_length: rows over it are refused or filtered at start-up (evr1.plan.on_over_limit)
    max_prompt_length: int | None = None

    def __post_init__(self) -> None:
        if not self.train_files:
            raise ValueError("data.train_files is empty: give the dataset file(s) written by `evr1-cache build`")
        for name in ("train_batch_size", "val_batch_size", "max_response_length", "n", "ppo_epochs", "total_steps"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.ppo_mini_batch_size < 1 or self.train_batch_size % self.ppo_mini_batch_size:
            raise ValueError(
                f"actor_rollout_ref.actor.ppo_mini_batch_size ({self.ppo_mini_batch_size}) must divide "
                f"data.train_batch_size ({self.train_batch_size})"
            )
        if self.micro_batch_size < 1:
            raise ValueError(
                f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu must be >= 1, got {self.micro_batch_size}"
            )
        if self.adv_estimator in UNSUPPORTED_ESTIMATORS:
            raise ValueError(
                f"algorithm.adv_estimator={self.adv_estimator} is not available in the local engine: "
                f"{UNSUPPORTED_ESTIMATORS[self.adv_estimator]}"
            )
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"engine.device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        if self.dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"engine.dtype must be auto, float32 or bfloat16, got {self.dtype!r}")
        if self.lr_scheduler not in ("constant", "cosine"):
            raise ValueError(
                f"actor_rollout_ref.actor.optim.lr_scheduler_type must be constant or cosine, got {self.lr_scheduler!r}"
            )
        if self.overlong_buffer_len and not 0 < self.overlong_buffer_len <= self.overlong_max_resp_len:
            raise ValueError(
                "reward.reward_kwargs.overlong_buffer_cfg.len must be > 0 and <= reward.reward_kwargs.max_resp_len "
                f"(default data.max_response_length); got len={self.overlong_buffer_len}, "
                f"max_resp_len={self.overlong_max_resp_len}. To switch the penalty off set overlong_buffer_cfg.enable=false"
            )
        if self.temperature <= 0:
            raise ValueError(
                f"actor_rollout_ref.rollout.temperature must be > 0 for RL sampling, got {self.temperature}"
            )

    @property
    def mini_batches_per_step(self) -> int:
        return self.train_batch_size // self.ppo_mini_batch_size

    @classmethod
    def from_cfg(cls, cfg: Any) -> LocalConfig:
        """Read a composed `evr1-train` config (OmegaConf) or an equivalent nested dict."""
        actor = _get(cfg, "actor_rollout_ref.actor")
        rollout = _get(cfg, "actor_rollout_ref.rollout")
        algo = _get(cfg, "algorithm")
        engine = _get(cfg, "engine") or {}

        def files(key: str) -> tuple[str, ...]:
            v = plain(_get(cfg, key))
            if v is None:
                return ()
            return (v,) if isinstance(v, str) else tuple(str(x) for x in v)

        micro = _get(actor, "ppo_micro_batch_size_per_gpu") or _get(actor, "ppo_micro_batch_size") or 16
        betas = plain(_get(actor, "optim.betas")) or (0.9, 0.999)
        warmup = int(_get(actor, "optim.lr_warmup_steps", -1) or -1)
        total = int(_get(cfg, "trainer.total_training_steps") or _get(engine, "total_steps") or 100)
        if warmup < 0:
            ratio = float(_get(actor, "optim.lr_warmup_steps_ratio", 0.0) or 0.0)
            warmup = int(ratio * total)
        loggers = plain(_get(engine, "loggers")) or plain(_get(cfg, "trainer.logger")) or ["console", "jsonl"]
        loggers = [loggers] if isinstance(loggers, str) else list(loggers)
        return cls(
            train_files=files("data.train_files"),
            val_files=files("data.val_files"),
            train_batch_size=int(_get(cfg, "data.train_batch_size", 8)),
            val_batch_size=int(_get(engine, "val_batch_size", 64)),
            max_response_length=int(_get(cfg, "data.max_response_length", 16)),
            shuffle=bool(_get(cfg, "data.shuffle", True)),
            seed=int(_get(engine, "seed", _get(cfg, "data.seed", 0)) or 0),
            model_path=str(_get(cfg, "actor_rollout_ref.model.path", "")),
            n=int(_get(rollout, "n", 4)),
            temperature=float(_get(rollout, "temperature", 1.0)),
            top_p=float(_get(rollout, "top_p", 1.0)),
            top_k=int(_get(rollout, "top_k", -1)),
            val_do_sample=bool(_get(rollout, "val_kwargs.do_sample", False)),
            adv_estimator=str(_get(algo, "adv_estimator", "grpo")),
            norm_adv_by_std_in_grpo=bool(_get(algo, "norm_adv_by_std_in_grpo", True)),
            use_kl_in_reward=bool(_get(algo, "use_kl_in_reward", False)),
            kl_penalty=str(_get(algo, "kl_penalty", "kl")),
            kl_ctrl_coef=float(_get(algo, "kl_ctrl.kl_coef", 0.001)),
            lr=float(_get(actor, "optim.lr", 1e-6)),
            weight_decay=float(_get(actor, "optim.weight_decay", 0.01)),
            betas=(float(betas[0]), float(betas[1])),
            warmup_steps=max(0, warmup),
            lr_scheduler=str(_get(actor, "optim.lr_scheduler_type", "constant") or "constant"),
            min_lr_ratio=float(_get(actor, "optim.min_lr_ratio", 0.0) or 0.0),
            grad_clip=float(_get(actor, "optim.clip_grad", _get(actor, "grad_clip", 1.0))),
            ppo_epochs=int(_get(actor, "ppo_epochs", 1)),
            ppo_mini_batch_size=int(_get(actor, "ppo_mini_batch_size", _get(cfg, "data.train_batch_size", 8))),
            micro_batch_size=int(micro),
            loss_mode=str(_get(actor, "policy_loss.loss_mode", "vanilla")),
            loss_agg_mode=str(_get(actor, "loss_agg_mode", "token-mean")),
            entropy_coeff=float(_get(actor, "entropy_coeff", 0.0)),
            use_kl_loss=bool(_get(actor, "use_kl_loss", False)),
            kl_loss_coef=float(_get(actor, "kl_loss_coef", 0.001)),
            kl_loss_type=str(_get(actor, "kl_loss_type", "low_var_kl")),
            total_steps=total,
            test_freq=int(_get(cfg, "trainer.test_freq", 10) or 0),
            save_freq=int(_get(cfg, "trainer.save_freq", 50) or 0),
            val_before_train=bool(_get(cfg, "trainer.val_before_train", True)),
            output_dir=str(_get(engine, "output_dir", "runs/local")),
            experiment_name=str(_get(cfg, "trainer.experiment_name", "local")),
            loggers=tuple(str(x) for x in loggers),
            resume=str(_get(engine, "resume", "auto")),
            max_checkpoints=int(_get(engine, "max_checkpoints", 2)),
            device=str(_get(engine, "device", "auto")),
            dtype=str(_get(engine, "dtype", "auto")),
            num_threads=int(_get(engine, "num_threads", 0) or 0),
            plot=bool(_get(engine, "plot", True)),
            reward_weights=dict(plain(_get(engine, "reward.weights")) or {"accuracy": 0.9, "format": 0.1}),
            reward_think=str(_get(engine, "reward.think", "optional")),
            gdpo_reward_keys=tuple(plain(_get(algo, "gdpo_reward_keys")) or ()),
            filter_groups_metric=(
                str(_get(algo, "filter_groups.metric", "accuracy"))
                if _get(algo, "filter_groups.enable", False)
                else None
            ),
            filter_groups_max_batches=int(_get(algo, "filter_groups.max_num_gen_batches", 10) or 10),
            **_overlong(cfg),
            algorithm_node=algo,
            actor_node=actor,
            data_evr1_node=_get(cfg, "data.evr1"),
            hybrid_node=_get(cfg, "evr1.hybrid"),
            max_prompt_length=_get(cfg, "data.max_prompt_length"),
        )


def _overlong(cfg: Any) -> dict[str, Any]:
    """verl's `dapo` reward manager shapes rewards of responses longer than max_resp_len - len (a linear penalty up to
    -penalty_factor at max_resp_len); only that manager does, so the local engine follows the same switch."""
    kwargs = _get(cfg, "reward.reward_kwargs") or {}
    buffer = _get(kwargs, "overlong_buffer_cfg") or {}
    if str(_get(cfg, "reward.reward_manager.name", "naive")) != "dapo" or not _get(buffer, "enable", False):
        return {}
    max_len = _get(kwargs, "max_resp_len") or _get(cfg, "data.max_response_length", 16)
    length = int(_get(buffer, "len", 0) or 0)
    if length <= 0:
        raise ValueError(
            f"reward.reward_kwargs.overlong_buffer_cfg.len must be > 0 when the overlong penalty is enabled, got {length}"
        )
    return {
        "overlong_buffer_len": length,
        "overlong_penalty_factor": float(_get(buffer, "penalty_factor", 1.0)),
        "overlong_max_resp_len": int(max_len),
    }
