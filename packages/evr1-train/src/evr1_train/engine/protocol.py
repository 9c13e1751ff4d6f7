"""Write `evr1_train_protocol.json`: how a checkpoint's model was prompted, shown frames and sampled, in one JSON file.

Why: evaluation must reproduce training exactly — the same prompt text and answer format, the same frame sampling
and pixel budgets (the cache spec keys), the same chat template, and generation that stops where the trained model
stops (its EOS ids). The file sits in the run folder and in every checkpoint (local engine: `checkpoints/step_N/`, verl:
`global_step_N/`), so a checkpoint describes itself; docs/train.md documents every field. The file's schema is
`evr1_cache.TrainSettings`, the one evr1-eval reads it with.

Names (stable): protocol_record(...) (both engines; the local engine's `BaseTrainer.checkpoint_files` calls it),
verl_training_protocol(cfg), write_checkpoint_protocol(checkpoint, settings, step) (verl); each returns TrainSettings
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from evr1_cache import (
    TRAIN_SETTINGS_FILE,
    GenerationSettings,
    PromptSettings,
    TrainSettings,
    resolve_model_path,
    spec_record,
)


def _tokens(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    return [str(tokenizer.convert_ids_to_tokens(int(i))) for i in ids]


def protocol_record(
    *,
    engine: str,
    mode: str,
    base_model: str,
    adapter: dict[str, Any] | None,
    data_opts: Any,
    processor: Any,
    answer: dict[str, Any],
    eos_ids: Sequence[int],
    pad_id: int,
    suppressed_ids: Sequence[int],
    max_new_tokens: int,
    train_sampler: dict[str, Any],
    validation: dict[str, Any],
    agent: dict[str, Any] | None = None,
) -> TrainSettings:
    """The settings both engines write (`data_opts`: DataOptions; `processor`: the HF processor or tokenizer)."""
    from evr1_train.data.prompt import describe_prompts

    tokenizer = getattr(processor, "tokenizer", processor)
    video, image = data_opts.video_spec(), data_opts.image_spec()
    template = getattr(processor, "chat_template", None) or getattr(tokenizer, "chat_template", None)
    where = "evr1-train's prompt description"
    base = resolve_model_path(base_model)
    return TrainSettings(
        engine=engine,
        mode=mode,
        base_model=os.path.abspath(base) if os.path.isdir(base) else base,
        adapter=adapter,
        prompt=PromptSettings.from_json(describe_prompts(data_opts), where),
        answer={"tag": "answer", **answer, "scorer": "evr1_rewards.RewardRouter (by problem_type)"},
        video=spec_record(video),
        image=spec_record(image),
        video_source=data_opts.video_source,
        chat_template=template,
        add_generation_prompt=True,
        generation=GenerationSettings(
            eos_token_ids=tuple(int(i) for i in eos_ids),
            eos_tokens=tuple(_tokens(tokenizer, eos_ids)),
            pad_token_id=int(pad_id),
            suppressed_token_ids=tuple(int(i) for i in suppressed_ids),
            suppressed_tokens=tuple(_tokens(tokenizer, suppressed_ids)),
            max_new_tokens=int(max_new_tokens),
            train={"do_sample": True, **train_sampler},
            validation=validation,
        ),
        agent=agent,
    )


def _reward_answer(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Think mode and weights as `evr1_rewards.integrations.verl.compute_score` reads its reward kwargs."""
    weights = kwargs.get("weights")
    if isinstance(weights, dict):
        acc = float(weights.get("accuracy", 1.0 - float(weights.get("format", 0.1))))
        fmt = float(weights.get("format", round(1.0 - acc, 12)))
    else:
        acc = float(kwargs.get("accuracy_weight", 0.9))
        fmt = float(kwargs.get("format_weight", round(1.0 - acc, 12)))
    return {"think": str(kwargs.get("think", "optional")), "reward_weights": {"accuracy": acc, "format": fmt}}


def _verl_adapter(model: Any) -> dict[str, Any] | None:
    if int(model.get("lora_rank", 0) or 0) <= 0:
        return None
    target = model.get("target_modules")
    return {
        "type": "lora",
        "rank": int(model.lora_rank),
        "alpha": model.get("lora_alpha"),
        "target_modules": target if isinstance(target, str) or target is None else list(target),
        "exclude_modules": model.get("exclude_modules"),
        "base_model": str(model.path),
        "merge": "verl's model merger (docs/train.md, Checkpoints -> Hugging Face)",
    }


def verl_training_protocol(cfg: Any) -> TrainSettings:
    """The protocol record of a verl run, from its composed config (before Ray starts).

    The prompt and frame settings are `data.evr1` as `Evr1Dataset` reads them; generation is what verl's vLLM rollout
    does: it stops on the model's `generation_config.json` EOS ids plus the tokenizer's EOS (vLLM's defaults) and
    samples with `actor_rollout_ref.rollout.{temperature,top_p,top_k}`; validation uses `rollout.val_kwargs`.
    """
    from omegaconf import OmegaConf

    from evr1_train.data.options import DataOptions, data_folder
    from evr1_train.engine.config import plain

    def node(key: str, default: Any = None) -> Any:
        return plain(OmegaConf.select(cfg, key, default=default))

    data_opts = DataOptions.from_mapping(node("data.evr1"), base_dir=data_folder(node("data.train_files")))
    path = resolve_model_path(str(node("actor_rollout_ref.model.path")))
    processor, eos, pad_id = _verl_tokenizer(path, bool(node("actor_rollout_ref.model.trust_remote_code", False)))
    rollout = node("actor_rollout_ref.rollout", {}) or {}
    val = rollout.get("val_kwargs", {}) or {}
    return protocol_record(
        engine="verl",
        mode="rl",
        base_model=str(node("actor_rollout_ref.model.path")),
        adapter=_verl_adapter(cfg.actor_rollout_ref.model),
        data_opts=data_opts,
        processor=processor,
        answer=_reward_answer(dict(node("reward.custom_reward_function.reward_kwargs", {}) or {})),
        eos_ids=eos,
        pad_id=pad_id,
        suppressed_ids=[],
        max_new_tokens=int(node("data.max_response_length")),
        train_sampler={k: rollout.get(k) for k in ("temperature", "top_p", "top_k")},
        validation={
            "do_sample": bool(val.get("do_sample", False)),
            **{k: val.get(k) for k in ("temperature", "top_p")},
        },
    )


def _verl_tokenizer(path: str, trust_remote_code: bool) -> tuple[Any, list[int], int]:
    """The processor (or tokenizer) verl's own loaders give its workers, the EOS ids vLLM stops on (the model's
    generation config, then the tokenizer's EOS) and the pad id (verl sets a missing one to the EOS)."""
    from transformers import GenerationConfig
    from verl.utils import hf_processor, hf_tokenizer

    tokenizer = hf_tokenizer(path, trust_remote_code=trust_remote_code)
    processor = hf_processor(path, trust_remote_code=trust_remote_code) or tokenizer
    try:
        configured = GenerationConfig.from_pretrained(path).eos_token_id
    except OSError:  # no generation_config.json
        configured = None
    eos = [configured] if isinstance(configured, int) else list(configured or [])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in eos:
        eos.append(tokenizer.eos_token_id)
    return processor, [int(i) for i in eos], int(tokenizer.pad_token_id)


def write_checkpoint_protocol(checkpoint: str | os.PathLike[str], settings: TrainSettings, step: int) -> None:
    """Write `settings` with its `step` into a checkpoint folder (verl: `global_step_<step>/`)."""
    from pathlib import Path

    from evr1_cache.atomic import atomic_json

    atomic_json(Path(checkpoint) / TRAIN_SETTINGS_FILE, settings.with_step(step).to_json())
