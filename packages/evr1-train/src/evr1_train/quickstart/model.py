"""Build a tiny, randomly initialised Qwen2.5-VL or Qwen3-VL (model + processor) in-process, with no download.

Why: the quickstart and the tests need a real Qwen-VL architecture (vision tower, mRoPE, the real processors and chat
template) that fits a CPU and a few minutes. The folder it writes is an ordinary Hugging Face checkpoint
(`config.json`, `model.safetensors`, tokenizer and processor files), so the local engine loads it exactly like a real
model, and any other tool can too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evr1_cache.registry import check_fields

ARCHS = ("qwen2_5_vl", "qwen3_vl")


@dataclass(frozen=True)
class TinyVLMSpec:
    """Size of the tiny model and the pixel budgets of its processor (per image / per video frame)."""

    arch: str = "qwen2_5_vl"
    hidden_size: int = 128
    intermediate_size: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    vision_depth: int = 2
    vision_hidden_size: int = 64
    vision_num_heads: int = 4
    vocab_size: int = 512
    init_std: float = 0.02  # initializer_range of the random weights (Qwen's default 0.02)
    image_min_pixels: int = 56 * 56
    image_max_pixels: int = 56 * 56
    video_min_pixels: int = 56 * 56
    video_max_pixels: int = 56 * 56
    seed: int = 0
    dtype: str = "float32"  # of the random weights: "float32" (training) or "bfloat16" (vLLM on CPU in the tests)

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"unknown tiny model arch {self.arch!r}; choose one of {list(ARCHS)}")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"tiny model dtype must be 'float32' or 'bfloat16', got {self.dtype!r}")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads}), and num_heads "
                f"by num_kv_heads ({self.num_kv_heads})"
            )
        head_dim = self.hidden_size // self.num_heads
        if head_dim % 8:
            raise ValueError(
                f"head_dim = hidden_size / num_heads = {head_dim} must be a multiple of 8 (mRoPE sections)"
            )

    @classmethod
    def from_mapping(cls, mapping: Any) -> TinyVLMSpec:
        data = dict(mapping.items()) if mapping is not None else {}
        check_fields("tiny-model", data, cls)
        return cls(**data)


def _mrope_sections(head_dim: int, interleaved: bool) -> list[int]:
    half = head_dim // 2  # sections (t, h, w) sum to head_dim / 2
    t = half // 2 if interleaved else half // 4  # Qwen3-VL (interleaved): temporal gets the largest share
    h = (half - t) // 2
    return [t, h, half - t - h]


def build_tiny_vlm(spec: TinyVLMSpec, extra_corpus: Iterable[str] = ()) -> tuple[Any, Any]:
    """Return `(model, processor)`, random weights seeded by `spec.seed`, on the CPU in `spec.dtype`."""
    from evr1_train.quickstart.tokenizer import QWEN2_5_VL_CHAT_TEMPLATE, QWEN3_VL_CHAT_TEMPLATE, train_tiny_tokenizer

    template = QWEN2_5_VL_CHAT_TEMPLATE if spec.arch == "qwen2_5_vl" else QWEN3_VL_CHAT_TEMPLATE
    tok = train_tiny_tokenizer(extra_corpus, vocab_size=spec.vocab_size, chat_template=template)
    return tiny_vlm_model(spec, tok), _processor(spec, tok, template)


def tiny_vlm_model(spec: TinyVLMSpec, tok: Any) -> Any:
    """The tiny model over the tokenizer `tok` (its vocabulary and vision token ids): the one tiny Qwen-VL builder,
    used by the quickstart and by the test environment's checkpoints (which bring their own tokenizer/processor)."""
    import torch
    from transformers import AutoModelForImageTextToText, Qwen2_5_VLConfig, Qwen3VLConfig

    vocab = (len(tok) + 63) // 64 * 64
    head_dim = spec.hidden_size // spec.num_heads
    text: dict[str, Any] = {
        "vocab_size": vocab,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "max_position_embeddings": 4096,
        "bos_token_id": tok.pad_token_id,
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id,
        "tie_word_embeddings": True,
        "initializer_range": spec.init_std,
    }
    token_ids = {
        "image_token_id": tok.convert_tokens_to_ids("<|image_pad|>"),
        "video_token_id": tok.convert_tokens_to_ids("<|video_pad|>"),
        "vision_start_token_id": tok.convert_tokens_to_ids("<|vision_start|>"),
        "vision_end_token_id": tok.convert_tokens_to_ids("<|vision_end|>"),
    }
    vision: dict[str, Any] = {
        "depth": spec.vision_depth,
        "hidden_size": spec.vision_hidden_size,
        "intermediate_size": 2 * spec.vision_hidden_size,
        "num_heads": spec.vision_num_heads,
        "out_hidden_size": spec.hidden_size,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "initializer_range": spec.init_std,
    }
    qwen3 = spec.arch == "qwen3_vl"  # Qwen3-VL: interleaved M-RoPE sections, a larger rope theta
    rope = {
        "rope_type": "default",
        "rope_theta": 5e6 if qwen3 else 1e6,
        "mrope_section": _mrope_sections(head_dim, qwen3),
    }
    if not qwen3:
        config_cls = Qwen2_5_VLConfig
        text["rope_parameters"] = rope
        vision.update(
            patch_size=14, window_size=112, fullatt_block_indexes=[spec.vision_depth - 1], tokens_per_second=2
        )
    else:
        config_cls = Qwen3VLConfig
        text["head_dim"] = head_dim
        text["rope_parameters"] = {**rope, "mrope_interleaved": True}
        vision.update(patch_size=16, num_position_embeddings=144, deepstack_visual_indexes=[0, spec.vision_depth - 1])
    config = config_cls(
        text_config=text, vision_config=vision, tie_word_embeddings=True, initializer_range=spec.init_std, **token_ids
    )
    state = torch.random.get_rng_state()
    torch.manual_seed(spec.seed)
    try:
        model = AutoModelForImageTextToText.from_config(config, dtype=getattr(torch, spec.dtype))
    finally:
        torch.random.set_rng_state(state)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = tok.pad_token_id
    return model


def _processor(spec: TinyVLMSpec, tok: Any, template: str) -> Any:
    """The quickstart's processor: `spec`'s pixel budgets, frames already sampled (evr1 samples them)."""
    from transformers import (
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    frames: dict[str, Any] = {"do_sample_frames": False, "min_frames": 4, "max_frames": 64}
    if spec.arch == "qwen2_5_vl":
        processor_cls = Qwen2_5_VLProcessor
        image_proc = Qwen2VLImageProcessor(min_pixels=spec.image_min_pixels, max_pixels=spec.image_max_pixels)
        video_proc = Qwen2VLVideoProcessor(
            min_pixels=spec.video_min_pixels, max_pixels=spec.video_max_pixels, fps=2.0, **frames
        )
    else:
        processor_cls = Qwen3VLProcessor
        norm = {"image_mean": [0.5] * 3, "image_std": [0.5] * 3}
        image_proc = Qwen2VLImageProcessor(
            patch_size=16,
            merge_size=2,
            temporal_patch_size=2,
            size={"shortest_edge": spec.image_min_pixels, "longest_edge": spec.image_max_pixels},
            **norm,
        )
        video_proc = Qwen3VLVideoProcessor(
            size={"shortest_edge": spec.video_min_pixels, "longest_edge": spec.video_max_pixels * 64},
            fps=2,
            cap_pixels_per_frame=True,
            **frames,
            **norm,
        )
    return processor_cls(image_processor=image_proc, video_processor=video_proc, tokenizer=tok, chat_template=template)


def save_tiny_vlm(out_dir: str | os.PathLike[str], spec: TinyVLMSpec, extra_corpus: Iterable[str] = ()) -> Path:
    """Build and write the tiny model folder atomically; an existing complete folder is reused (resume-safe)."""
    import json

    out = Path(out_dir)
    marker = out / "evr1_tiny_vlm.json"
    if marker.exists():
        # (a folder written before `vision_num_heads` / `dtype` existed was built with their defaults)
        saved = {"vision_num_heads": 4, "dtype": "float32", **json.loads(marker.read_text())}
        if saved != asdict(spec):
            raise ValueError(
                f"{out} holds a tiny model built with different settings ({saved}); delete the folder or choose "
                "another output directory"
            )
        return out
    from evr1_cache.atomic import atomic_folder

    model, processor = build_tiny_vlm(spec, extra_corpus)
    with atomic_folder(out) as tmp:  # replaces an incomplete folder from a killed build
        model.save_pretrained(tmp, safe_serialization=True)
        processor.save_pretrained(tmp)
        (tmp / "evr1_tiny_vlm.json").write_text(json.dumps(asdict(spec), indent=1))
    return out
