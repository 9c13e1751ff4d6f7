"""Test env only: tiny, randomly initialised checkpoints of every evr1 model family, from transformers' real classes.

No weights can be downloaded in CI, yet every family must be run through the real transformers processors and model
classes (and vLLM's, where it runs on CPU). Each builder writes an ordinary Hugging Face folder (config, safetensors
weights, tokenizer, processor, chat template) of ~1-3 MB, in about a second after imports:

| kind | config / model class | processor |
|---|---|---|
| qwen2_5_vl, qwen3_vl | see tiny_qwen.py | Qwen2_5_VLProcessor, Qwen3VLProcessor |
| qwen3_vl_moe | Qwen3VLMoeConfig / ...ForConditionalGeneration | Qwen3VLProcessor |
| qwen3_5, qwen3_5_moe | Qwen3_5(Moe)Config (Gated DeltaNet + attention layers) | Qwen3VLProcessor |
| glm4v, glm4v_moe | Glm4v(Moe)Config | Glm4vProcessor (GLM's special tokens and template) |
| internvl | InternVLConfig (Qwen3 LM) | InternVLProcessor (56-px tiles: 4 tokens each) |

Constraints: vLLM's CPU attention needs head_dim in {32, 64, ...}; mRoPE sections sum to the rotary half-dimension.
The tokenizer is a byte-level BPE trained in-process carrying the family's special tokens, so prompts render and
expand exactly as they would for the real checkpoints.

Usage: python testenv/tiny_vlm.py OUT_DIR [KIND ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


def _tiny_qwen() -> Any:
    spec = importlib.util.spec_from_file_location("evr1_testenv_tiny_qwen", _HERE / "tiny_qwen.py")
    assert spec is not None
    assert spec.loader is not None
    module = sys.modules.get(spec.name) or importlib.util.module_from_spec(spec)
    if spec.name not in sys.modules:
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


tiny_qwen = _tiny_qwen()

KINDS = ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "glm4v", "glm4v_moe", "internvl")
#: the evr1 model family each kind belongs to (evr1_cache.families)
FAMILY = {
    "qwen2_5_vl": "qwen2_5_vl",
    "qwen3_vl": "qwen3_vl",
    "qwen3_vl_moe": "qwen3_vl",
    "qwen3_5": "qwen3_5",
    "qwen3_5_moe": "qwen3_5",
    "glm4v": "glm4v",
    "glm4v_moe": "glm4v",
    "internvl": "internvl",
}
HEAD_DIM = 32
#: InternVL tile side of the tiny checkpoint: 56 px = 4 x 4 patches of 14 -> 2 x 2 after pixel shuffle = 4 tokens.
INTERNVL_TILE = 56

# -- tokenizers ---------------------------------------------------------------------------------------------------

GLM_SPECIAL = (
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|image|>",
    "<|video|>",
)
#: GLM-4.1V's chat template reduced to what evr1 needs (text / image / video parts, optional system turn).
GLM_TEMPLATE = (
    "[gMASK]<sop>{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|begin_of_image|><|image|><|end_of_image|>"
    "{% elif part['type'] == 'video' %}<|begin_of_video|><|video|><|end_of_video|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
INTERNVL_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>")
#: InternVL3.5-HF's template shape: Qwen turns, `<IMG_CONTEXT>\n` per image and `<video>\n` per video.
INTERNVL_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<IMG_CONTEXT>\n"
    "{% elif part['type'] == 'video' %}<video>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tokenizer(special: tuple[str, ...], eos: str, pad: str, template: str, extra: dict[str, str] | None = None):
    """A byte-level BPE with `special` tokens (trained on a tiny corpus) and the family's chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=list(special),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(tiny_qwen._CORPUS) * 10 + ["Frame1: Frame2: seconds\n"] * 10, trainer)
    kwargs: dict[str, Any] = {"tokenizer_object": tok, "eos_token": eos, "pad_token": pad, "unk_token": None}
    if extra:
        kwargs["extra_special_tokens"] = extra
    fast = PreTrainedTokenizerFast(**kwargs)
    fast.chat_template = template
    return fast


def qwen_tokenizer():
    return tiny_qwen.build_tokenizer()


def glm_tokenizer():
    return build_tokenizer(GLM_SPECIAL, "<|user|>", "<|endoftext|>", GLM_TEMPLATE)


def internvl_tokenizer():
    extra = {
        "start_image_token": "<img>",
        "end_image_token": "</img>",
        "context_image_token": "<IMG_CONTEXT>",
        "video_token": "<video>",
    }
    return build_tokenizer(INTERNVL_SPECIAL, "<|im_end|>", "<|endoftext|>", INTERNVL_TEMPLATE, extra)


def _ids(tok, names: tuple[str, ...]) -> dict[str, int]:
    return {t: tok.convert_tokens_to_ids(t) for t in names}


# -- shared config pieces -----------------------------------------------------------------------------------------


def _text(tok, eos: str, pad: str, **extra: Any) -> dict[str, Any]:
    ids = _ids(tok, (eos, pad))
    return {
        "vocab_size": (len(tok) + 63) // 64 * 64,
        "hidden_size": 2 * HEAD_DIM,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
        "bos_token_id": ids[pad],
        "eos_token_id": ids[eos],
        "pad_token_id": ids[pad],
        **extra,
    }


def _save(model, processor, out: Path, eos_ids: list[int], pad_id: int) -> None:
    model.generation_config.eos_token_id = eos_ids if len(eos_ids) > 1 else eos_ids[0]
    model.generation_config.pad_token_id = pad_id
    model.save_pretrained(out)
    processor.save_pretrained(out)
    model.generation_config.save_pretrained(out)


def _random(model_cls, cfg):
    """Seeded random bf16 weights: the same tiny model on every run (as tiny_qwen)."""
    return tiny_qwen._random_model(model_cls, cfg)


# -- Qwen3-VL MoE and Qwen3.5 -------------------------------------------------------------------------------------

#: `norm_topk_prob` as the real Qwen3-VL-30B-A3B config.json carries it (transformers 5.19 dropped the attribute,
#: vLLM 0.32 still reads it).
_MOE = {
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 48,  # no square expert matrix: transformers' layout check cannot tell a square one's side
    "decoder_sparse_step": 1,
    "norm_topk_prob": True,
}


def qwen3_processor(tok=None):
    """Qwen3-VL's processor (Qwen3-VL dense / MoE and Qwen3.5 all use it) over the tiny Qwen tokenizer."""
    return tiny_qwen.qwen3_processor(tok or qwen_tokenizer())


def _qwen3_vision(out_hidden: int) -> dict[str, Any]:
    return tiny_qwen._vision_config(HEAD_DIM, 16, num_position_embeddings=64, deepstack_visual_indexes=[0]) | {
        "out_hidden_size": out_hidden
    }


def build_qwen3_vl_moe(out: Path) -> None:
    from transformers import Qwen3VLMoeConfig, Qwen3VLMoeForConditionalGeneration

    tok = qwen_tokenizer()
    half = HEAD_DIM // 2
    mrope = [half - 2 * (half * 3 // 8), half * 3 // 8, half * 3 // 8]
    rope = {"rope_type": "default", "rope_theta": 5_000_000.0, "mrope_section": mrope, "mrope_interleaved": True}
    text = _text(tok, "<|im_end|>", "<|endoftext|>", rope_parameters=rope, **_MOE)
    cfg = tiny_qwen._vl_config(Qwen3VLMoeConfig, tok, text, _qwen3_vision(text["hidden_size"]))
    model = _random(Qwen3VLMoeForConditionalGeneration, cfg)
    _save(model, qwen3_processor(tok), out, [text["eos_token_id"]], text["pad_token_id"])
    _published_expert_layout(out / "model.safetensors")


def _published_expert_layout(path: Path) -> None:
    """Rewrite fused expert weights in the layout of the published Qwen3-VL-MoE checkpoints ([E, in, out]).

    transformers >= 5 saves them as [E, out, in] and loads either (it converts the published one); vLLM 0.32 reads only
    the published layout, so a checkpoint saved by transformers 5 is refused by vLLM (a known gap, docs/families.md).
    """
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(path))
    for name, value in tensors.items():
        if name.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
            tensors[name] = value.transpose(1, 2).contiguous()
    save_file(tensors, str(path), metadata={"format": "pt"})


def _qwen3_5(out: Path, moe: bool) -> None:
    import transformers

    tok = qwen_tokenizer()
    # Qwen3.5 rotates a quarter of each head (partial_rotary_factor 0.25): mRoPE sections sum to head_dim / 8.
    rope = {
        "rope_type": "default",
        "rope_theta": 10_000_000.0,
        "mrope_section": [2, 1, 1],
        "mrope_interleaved": True,
        "partial_rotary_factor": 0.25,
    }
    linear = {
        "layer_types": ["linear_attention", "full_attention"],
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,  # vLLM's CPU Gated DeltaNet kernel supports the real checkpoints' 128 only
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 2,
    }
    moe_keys = (
        {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64}
        if moe
        else {}
    )
    text = _text(tok, "<|im_end|>", "<|endoftext|>", rope_parameters=rope, **linear, **moe_keys)
    name = "Qwen3_5Moe" if moe else "Qwen3_5"
    config_cls = getattr(transformers, f"{name}Config")
    model_cls = getattr(transformers, f"{name}ForConditionalGeneration")
    vision = tiny_qwen._vision_config(HEAD_DIM, 16, num_position_embeddings=64) | {"out_hidden_size": 2 * HEAD_DIM}
    vision.pop("deepstack_visual_indexes", None)
    cfg = tiny_qwen._vl_config(config_cls, tok, text, vision)
    model = _random(model_cls, cfg)
    _save(model, qwen3_processor(tok), out, [text["eos_token_id"]], text["pad_token_id"])


def build_qwen3_5(out: Path) -> None:
    _qwen3_5(out, moe=False)


def build_qwen3_5_moe(out: Path) -> None:
    _qwen3_5(out, moe=True)


# -- GLM-4.1V / GLM-4.5V ------------------------------------------------------------------------------------------


def _glm(out: Path, moe: bool) -> None:
    import transformers

    tok = glm_tokenizer()
    ids = _ids(tok, GLM_SPECIAL)
    # GLM rotates half of each head (partial_rotary_factor 0.5): sections sum to head_dim / 4.
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3], "partial_rotary_factor": 0.5}
    moe_keys = (
        {
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "moe_intermediate_size": 48,  # no square expert matrix (see _MOE)
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
            "use_qk_norm": False,  # GLM-4.5V's config.json carries it; transformers 5.19 dropped it, vLLM 0.32 reads it
        }
        if moe
        else {}
    )
    text = _text(tok, "<|user|>", "<|endoftext|>", rope_parameters=rope, **moe_keys)
    text["eos_token_id"] = [ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]]
    vision = {
        "depth": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 2,
        "image_size": 56,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "out_hidden_size": 2 * HEAD_DIM,
    }
    name = "Glm4vMoe" if moe else "Glm4v"
    cfg = getattr(transformers, f"{name}Config")(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image|>"],
        video_token_id=ids["<|video|>"],
        image_start_token_id=ids["<|begin_of_image|>"],
        image_end_token_id=ids["<|end_of_image|>"],
        video_start_token_id=ids["<|begin_of_video|>"],
        video_end_token_id=ids["<|end_of_video|>"],
        tie_word_embeddings=True,
    )
    model = _random(getattr(transformers, f"{name}ForConditionalGeneration"), cfg)
    _save(model, glm_processor(tok), out, text["eos_token_id"], ids["<|endoftext|>"])


def glm_processor(tok=None):
    from transformers import Glm4vImageProcessor, Glm4vProcessor, Glm4vVideoProcessor

    common = {"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2}
    return Glm4vProcessor(
        image_processor=Glm4vImageProcessor(
            size={"shortest_edge": 56 * 56, "longest_edge": 2 * 28 * 28 * 64}, **common
        ),
        video_processor=Glm4vVideoProcessor(
            size={"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 2 * 64}, fps=2, **common
        ),
        tokenizer=tok or glm_tokenizer(),
        chat_template=GLM_TEMPLATE,
    )


def build_glm4v(out: Path) -> None:
    _glm(out, moe=False)


def build_glm4v_moe(out: Path) -> None:
    _glm(out, moe=True)


# -- InternVL3.5 ------------------------------------------------------------------------------------------------


def build_internvl(out: Path) -> None:
    from transformers import InternVLConfig, InternVLForConditionalGeneration

    tok = internvl_tokenizer()
    ids = _ids(tok, INTERNVL_SPECIAL)
    text = _text(tok, "<|im_end|>", "<|endoftext|>", model_type="qwen3", rope_parameters={"rope_type": "default"})
    vision = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "image_size": [INTERNVL_TILE, INTERNVL_TILE],
        "patch_size": [14, 14],
    }
    seq = (INTERNVL_TILE // 14) ** 2 // 4
    cfg = InternVLConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=ids["<IMG_CONTEXT>"],
        image_seq_length=seq,
        downsample_ratio=0.5,
        tie_word_embeddings=True,
    )
    model = _random(InternVLForConditionalGeneration, cfg)
    _save(model, internvl_processor(tok), out, [ids["<|im_end|>"]], ids["<|endoftext|>"])


def internvl_processor(tok=None):
    from transformers import GotOcr2ImageProcessor, InternVLProcessor, InternVLVideoProcessor

    tile = {"height": INTERNVL_TILE, "width": INTERNVL_TILE}
    return InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size=tile, crop_to_patches=True, min_patches=1, max_patches=12),
        video_processor=InternVLVideoProcessor(size=tile),
        tokenizer=tok or internvl_tokenizer(),
        image_seq_length=(INTERNVL_TILE // 14) ** 2 // 4,
        chat_template=INTERNVL_TEMPLATE,
    )


def qwen2_5_processor(tok=None):
    return tiny_qwen.qwen2_5_processor(tok or qwen_tokenizer())


#: A processor per family (no model weights): the prompt-expansion parity tests need only these.
PROCESSORS = {
    "qwen2_5_vl": qwen2_5_processor,
    "qwen3_vl": qwen3_processor,
    "qwen3_5": qwen3_processor,
    "glm4v": glm_processor,
    "internvl": internvl_processor,
}

# -- entry points -------------------------------------------------------------------------------------------------

_BUILDERS = {
    "qwen3_vl_moe": build_qwen3_vl_moe,
    "qwen3_5": build_qwen3_5,
    "qwen3_5_moe": build_qwen3_5_moe,
    "glm4v": build_glm4v,
    "glm4v_moe": build_glm4v_moe,
    "internvl": build_internvl,
}


def build_tiny_vlm(out_dir: str | Path, kind: str) -> Path:
    """Write a tiny `kind` checkpoint into `out_dir/<kind>` and return that folder (reused when complete)."""
    if kind in tiny_qwen.KINDS:
        return tiny_qwen.build_tiny_qwen(out_dir, kind, head_dim=HEAD_DIM)
    if kind not in _BUILDERS:
        raise ValueError(f"unknown tiny model kind {kind!r}; choose one of {', '.join(KINDS)}")
    out = Path(out_dir) / f"{kind}-hd{HEAD_DIM}"
    marker = out / "evr1_tiny.json"
    if marker.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    _BUILDERS[kind](out)
    marker.write_text(json.dumps({"kind": kind, "head_dim": HEAD_DIM, "family": FAMILY[kind]}))  # last
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("kinds", nargs="*", help=f"any of {', '.join(KINDS)} (default: all)")
    args = parser.parse_args(argv)
    for kind in args.kinds or KINDS:
        print(build_tiny_vlm(args.out_dir, kind))


if __name__ == "__main__":
    main()
