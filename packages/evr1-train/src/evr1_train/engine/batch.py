"""Prompt encoding and padding: rows' messages + pixels -> token ids and vision tensors, collated into model batches.

Why per-prompt encoding: a step mixes image, video and text-only prompts and slices them into PPO mini/micro-batches;
keeping each prompt's processor output separately lets any subset be collated (left-padded prompts, right-padded
responses, vision tensors concatenated in order) without running the processor again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from evr1_cache.families import hf_metadata

#: processor outputs that are per-image / per-video and concatenate along dim 0 when collating.
VISION_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts")


@dataclass(frozen=True)
class EncodedPrompt:
    """One prompt: unpadded token ids `[P]` and its vision tensors (empty dict for text-only prompts)."""

    input_ids: torch.Tensor
    vision: dict[str, torch.Tensor]
    token_types: torch.Tensor | None = None  # `mm_token_type_ids` (Qwen3-VL's M-RoPE needs it), per prompt token

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])


def encode_prompt(
    processor: Any,
    messages: list[dict[str, Any]],
    images: Sequence[Any],
    videos: Sequence[Any],
    family: Any = None,
) -> EncodedPrompt:
    """Chat template + processor for one prompt; videos are `(frames [T,H,W,3] uint8, metadata)` pairs (pre-sampled)."""
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return encode_text(processor, text, images, videos, family)


def encode_text(
    processor: Any, text: str, images: Sequence[Any], videos: Sequence[Any], family: Any = None
) -> EncodedPrompt:
    """The processor over rendered `text` and its media: ids, vision tensors and `mm_token_type_ids`.

    `family` (`evr1_cache.families`) supplies the processor arguments for cached media (no re-sampling, no
    re-sizing), as the eval backends and verl's `data.mm_processor_kwargs` pass them."""
    kwargs: dict[str, Any] = {"images": list(images)} if images else {}
    kwargs.update(video_kwargs(videos))
    if family is not None:
        kwargs.update(family.hf_kwargs([m for _, m in videos], images=bool(images)))
    out = processor(text=[text], return_tensors="pt", **kwargs)
    types = out.get("mm_token_type_ids")
    return EncodedPrompt(out["input_ids"][0], vision_tensors(out), None if types is None else types[0])


def vision_tensors(out: Any) -> dict[str, torch.Tensor]:
    """The per-image / per-video outputs (`VISION_KEYS`) of a processor call, as tensors."""
    return {k: torch.as_tensor(out[k]) for k in VISION_KEYS if out.get(k) is not None}


def video_kwargs(videos: Sequence[Any]) -> dict[str, Any]:
    """Processor keyword arguments for pre-sampled `(frames [T,H,W,3] uint8, metadata)` videos: the frames as they
    are (`do_sample_frames=False`) with their `VideoMetadata` (fps, frame indices -> Qwen3-VL's timestamps)."""
    import numpy as np

    if not videos:
        return {}
    return {
        "videos": [torch.from_numpy(np.ascontiguousarray(f)) if isinstance(f, np.ndarray) else f for f, _ in videos],
        "video_metadata": [hf_metadata(m) for _, m in videos],
        "do_sample_frames": False,
    }


def collate_vision(prompts: Sequence[EncodedPrompt], device: torch.device | str) -> dict[str, torch.Tensor]:
    """Concatenate the vision tensors of `prompts` in order (the processor's batch layout)."""
    out: dict[str, torch.Tensor] = {}
    for key in VISION_KEYS:
        parts = [p.vision[key] for p in prompts if key in p.vision]
        if parts:
            out[key] = torch.cat(parts, dim=0).to(device)
    return out


def collate_prompts(
    prompts: Sequence[EncodedPrompt], pad_id: int, device: torch.device | str
) -> dict[str, torch.Tensor]:
    """Left-padded `input_ids` / `attention_mask` `[B, P]` + vision tensors: what `generate` takes."""
    width = max(p.length for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    types = (
        torch.zeros((len(prompts), width), dtype=torch.long)
        if any(p.token_types is not None for p in prompts)
        else None
    )
    for i, p in enumerate(prompts):
        ids[i, width - p.length :] = p.input_ids
        mask[i, width - p.length :] = 1
        if types is not None and p.token_types is not None:
            types[i, width - p.length :] = p.token_types
    out = {"input_ids": ids.to(device), "attention_mask": mask.to(device), **collate_vision(prompts, device)}
    if types is not None:
        out["mm_token_type_ids"] = types.to(device)
    return out


def pad_responses(
    responses: Sequence[Sequence[int]], pad_id: int, width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded response ids and their mask `[B, R]` (R = longest response, at least 1)."""
    width = max(1, max((len(r) for r in responses), default=1)) if width is None else width
    ids = torch.full((len(responses), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(responses), width), dtype=torch.long)
    for i, r in enumerate(responses):
        r = list(r)[:width]
        if r:
            ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
    return ids, mask


def collate_sequences(
    prompts: Sequence[EncodedPrompt],
    responses: Sequence[Sequence[int]],
    pad_id: int,
    device: torch.device | str,
    width: int | None = None,
    response_types: Sequence[Sequence[int]] | None = None,
) -> dict[str, torch.Tensor]:
    """Prompt + response batch for log-prob/loss passes: `[left-padded prompt | right-padded response]`.

    Returns model inputs plus `responses` / `response_mask` `[B, R]`; the response tokens are the last R positions.
    `response_types`: the responses' `mm_token_type_ids` when they hold vision placeholders (a multi-turn episode's
    tool answers, `engine.agent`); otherwise response tokens are text (type 0).
    """
    batch = collate_prompts(prompts, pad_id, "cpu")
    resp, resp_mask = pad_responses(responses, pad_id, width)
    batch["input_ids"] = torch.cat([batch["input_ids"], resp], dim=1)
    batch["attention_mask"] = torch.cat([batch["attention_mask"], resp_mask], dim=1)
    if "mm_token_type_ids" in batch:
        kinds = torch.zeros_like(resp)
        if response_types is not None:
            kinds, _ = pad_responses(response_types, 0, resp.shape[1])
        batch["mm_token_type_ids"] = torch.cat([batch["mm_token_type_ids"], kinds], dim=1)
    out = {k: v.to(device) for k, v in batch.items()}
    out["responses"] = resp.to(device)
    out["response_mask"] = resp_mask.to(device)
    return out


def cut_at_eos(tokens: Sequence[int], eos_ids: Sequence[int], pad_id: int) -> list[int]:
    """A generated row up to and including its first EOS (the rest is padding)."""
    out: list[int] = []
    eos = {int(e) for e in eos_ids}
    for t in tokens:
        t = int(t)
        out.append(t)
        if t in eos:
            break
    # trailing pads (rows that stopped early in a batch) are never part of a response
    while out and out[-1] == pad_id and pad_id not in eos:
        out.pop()
    return out
