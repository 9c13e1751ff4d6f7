"""`evr1_train_protocol.json`: how a checkpoint's model was prompted, shown frames and sampled, in one JSON file.

Why: evaluation must reproduce training exactly — the same prompt text and answer format, the same frame sampling
and pixel budgets (the cache spec keys), the same chat template, and generation that stops where the trained model
stops (its EOS ids). The file sits in the run folder and in every `checkpoints/step_N/`, so a checkpoint describes
itself; docs/train.md documents every field.

Names (stable): PROTOCOL_FILE, PROTOCOL_FORMAT, training_protocol(...)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PROTOCOL_FILE = "evr1_train_protocol.json"
PROTOCOL_FORMAT = 1


def _tokens(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    return [str(tokenizer.convert_ids_to_tokens(int(i))) for i in ids]


def training_protocol(
    *,
    cfg: Any,
    data_opts: Any,
    processor: Any,
    eos_ids: Sequence[int],
    pad_id: int,
    suppressed_ids: Sequence[int],
    mode: str,
    adapter: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The protocol record of a local-engine run (`cfg`: LocalConfig, `data_opts`: DataOptions)."""
    import os

    from evr1_train.data.prompt import describe_prompts
    from evr1_train.model_path import resolve_model_path

    tokenizer = getattr(processor, "tokenizer", processor)
    video, image = data_opts.video_spec(), data_opts.image_spec()
    template = getattr(processor, "chat_template", None) or getattr(tokenizer, "chat_template", None)
    return {
        "format": "evr1-train-protocol",
        "version": PROTOCOL_FORMAT,
        "engine": "local",
        "mode": mode,
        "base_model": os.path.abspath(base) if os.path.isdir(base := resolve_model_path(cfg.model_path)) else base,
        "adapter": adapter,
        "prompt": describe_prompts(data_opts),
        "answer": {
            "tag": "answer",
            "think": cfg.reward_think,
            "reward_weights": dict(cfg.reward_weights),
            "scorer": "evr1_rewards.RewardRouter (by problem_type)",
        },
        "sampling": {
            "video": {**video.to_dict(), "key": video.key()},
            "image": {**image.to_dict(), "key": image.key()},
            "video_source": data_opts.video_source,
        },
        "chat_template": template,
        "add_generation_prompt": True,
        "generation": {
            "eos_token_ids": [int(i) for i in eos_ids],
            "eos_tokens": _tokens(tokenizer, eos_ids),
            "pad_token_id": int(pad_id),
            "stop": "after the first token in eos_token_ids (it is part of the response)",
            "suppressed_token_ids": [int(i) for i in suppressed_ids],
            "suppressed_tokens": _tokens(tokenizer, suppressed_ids),
            "max_new_tokens": cfg.max_response_length,
            "train": {"do_sample": True, "temperature": cfg.temperature, "top_p": cfg.top_p, "top_k": cfg.top_k},
            "validation": {"do_sample": cfg.val_do_sample},
        },
    }
