"""Activation-memory estimate for one training micro-batch: what the backward pass must keep, per GPU.

Why: on long videos the activations, not the weights, run out of memory, and they scale with the prompt the planner
measures. The estimate answers "does micro-batch 2 at 16k tokens with sequence parallel 4 fit?" before a run.

The formula (bytes, per GPU) counts the tensors autograd saves in transformers' decoder layers (Qwen2/Qwen2.5/Llama
style: RMSNorm computed in float32, GQA attention with RoPE, SwiGLU MLP) in bf16 training, read off the saved-tensor
hooks of the real modules (`test_plan_parity.py` measures them and states the tolerance). With
`T = micro_batch * seq_len / sp` tokens on a GPU, `h` hidden, `f` MLP width (MoE: `top_k * expert_width + shared`),
`q = heads * head_dim`, `kv = kv_heads * head_dim`, `p` bytes per element (2 for bf16):

    per layer  A = T * [p * (4h + 2q + 2kv + 4f) + 4 * 2h + 4 * heads + 8]      (fp32 norm inputs, attention LSE)
    eager attention adds  micro_batch * heads/sp * s^2 * (4 + p)                  (float32 softmax + its cast)
    final norm + head F = T * (4h + 2ph + 4) ; log-probs L = T * vocab * 4        (float32 log_softmax, as verl)
    no checkpointing:    layers * A + F + L
    full checkpointing:  layers * T * p * h  (each layer's input)  + A (one layer recomputed) + F + L

The vision tower (ViT on `vision_tokens * merge**2` patches) uses the same per-layer form with its own sizes and
multi-head attention; it is counted separately and is not checked against a measurement. Assumptions: every sequence is
`seq_len` long (padding-free packing makes the real figure smaller), Ulysses sequence parallelism divides every
activation by `sp` (verl shards the sequence, then the heads), no entropy term, no activation offload, and no
weights, gradients, optimiser states or allocator fragmentation (those come on top).

Names (stable): ModelShape, ModelShape.from_config(path_or_dict), ModelShape.preset(name), PRESETS,
MemoryEstimate, activation_memory(shape, seq_len, micro_batch=1, sp=1, ...).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PRESETS", "MemoryEstimate", "ModelShape", "VisionShape", "activation_memory"]


@dataclass(frozen=True)
class VisionShape:
    """The vision tower's sizes (the patch encoder before the merger)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    merge: int = 2


@dataclass(frozen=True)
class ModelShape:
    """The language model's sizes that activation memory depends on (and, optionally, the vision tower's)."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    vision: VisionShape | None = None
    name: str = "model"

    @classmethod
    def from_config(cls, config: str | os.PathLike[str] | Mapping[str, Any]) -> ModelShape:
        """From a checkpoint folder / `config.json` path / its parsed dict (VLM configs: `text_config` + `vision_config`)."""
        if isinstance(config, Mapping):
            data, name = dict(config), str(config.get("model_type", "model"))
        else:
            path = Path(config)
            path = path / "config.json" if path.is_dir() else path
            if not path.is_file():
                raise FileNotFoundError(f"model config {path} not found (give a checkpoint folder or its config.json)")
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise ValueError(f"{path}: not a JSON model config ({exc})") from exc
            name = str(data.get("model_type", path.parent.name))
        text = data.get("text_config") or data.get("llm_config") or data
        need = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
        missing = [k for k in need if k not in text and k not in data]
        if missing:
            raise ValueError(f"model config {name!r} lacks {missing}: not a decoder language model config")

        def get(key: str, default: Any = None) -> Any:
            return text.get(key, data.get(key, default))

        hidden, heads = int(get("hidden_size")), int(get("num_attention_heads"))
        width = int(get("intermediate_size", 4 * hidden))
        if get("num_experts_per_tok") and get("moe_intermediate_size"):
            shared = int(get("shared_expert_intermediate_size") or 0) or int(get("n_shared_experts") or 0) * int(
                get("moe_intermediate_size")
            )
            width = int(get("num_experts_per_tok")) * int(get("moe_intermediate_size")) + shared
        vision = None
        vc = data.get("vision_config")
        if isinstance(vc, Mapping) and (vc.get("depth") or vc.get("num_hidden_layers")):
            vh = int(vc.get("hidden_size") or vc.get("embed_dim") or 0)
            if vh:
                vision = VisionShape(
                    layers=int(vc.get("depth") or vc.get("num_hidden_layers") or 0),
                    hidden=vh,
                    intermediate=int(vc.get("intermediate_size") or 4 * vh),
                    heads=int(vc.get("num_heads") or vc.get("num_attention_heads") or 1),
                    merge=int(vc.get("spatial_merge_size") or 2),
                )
        return cls(
            hidden=hidden,
            intermediate=width,
            layers=int(get("num_hidden_layers")),
            heads=heads,
            kv_heads=int(get("num_key_value_heads") or heads),
            head_dim=int(get("head_dim") or hidden // heads),
            vocab=int(get("vocab_size")),
            vision=vision,
            name=name,
        )

    @classmethod
    def preset(cls, name: str) -> ModelShape:
        """A named published size (see `PRESETS`); unknown names list the known ones."""
        from evr1_cache.registry import lookup

        return lookup(PRESETS, name, "model size preset")


_QWEN25_VIT = VisionShape(layers=32, hidden=1280, intermediate=3420, heads=16)
#: Sizes from the checkpoints' published config.json files (a local config.json is always preferred).
PRESETS: dict[str, ModelShape] = {
    "qwen2_5_vl_3b": ModelShape(2048, 11008, 36, 16, 2, 128, 151936, _QWEN25_VIT, "qwen2_5_vl_3b"),
    "qwen2_5_vl_7b": ModelShape(3584, 18944, 28, 28, 4, 128, 152064, _QWEN25_VIT, "qwen2_5_vl_7b"),
    "qwen3_vl_8b": ModelShape(4096, 12288, 36, 32, 8, 128, 151936, VisionShape(27, 1152, 4304, 16), "qwen3_vl_8b"),
}


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per GPU, by part; `total` is what the backward pass holds at its start (see the module docstring)."""

    tokens_per_gpu: int
    layers: int
    per_layer: int
    final: int
    logprobs: int
    vision: int
    checkpointing: bool

    @property
    def language(self) -> int:
        return self.layers + self.final + self.logprobs

    @property
    def total(self) -> int:
        return self.language + self.vision

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "language": self.language, "total": self.total}

    def describe(self) -> str:
        gib = 2**30
        return (
            f"activations per GPU: {self.total / gib:.2f} GiB = layers {self.layers / gib:.2f} + final norm/head "
            f"{self.final / gib:.2f} + log-probs {self.logprobs / gib:.2f} + vision tower {self.vision / gib:.2f} "
            f"({self.tokens_per_gpu} tokens per GPU, gradient checkpointing {'on' if self.checkpointing else 'off'})"
        )


def _layer_bytes(tokens: int, h: int, q: int, kv: int, f: int, heads: int, p: int) -> int:
    return tokens * (p * (4 * h + 2 * q + 2 * kv + 4 * f) + 4 * 2 * h + 4 * heads + 8)


def activation_memory(
    shape: ModelShape,
    seq_len: int,
    micro_batch: int = 1,
    sp: int = 1,
    *,
    checkpointing: bool = False,
    attention: str = "flash",
    vision_tokens: int = 0,
    bytes_per_element: int = 2,
) -> MemoryEstimate:
    """The formula of the module docstring for `micro_batch` sequences of `seq_len` tokens, sequence parallel `sp`.

    `attention`: "flash" / "sdpa" (no s^2 term) or "eager". `vision_tokens`: merged vision tokens per sequence (the
    planner's count), for the vision tower's share."""
    for name, value in (("seq_len", seq_len), ("micro_batch", micro_batch), ("sp", sp)):
        if isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if attention not in ("flash", "sdpa", "eager"):
        raise ValueError(f"attention must be flash, sdpa or eager, got {attention!r}")
    if shape.heads % sp:
        raise ValueError(f"sequence parallel {sp} must divide the {shape.heads} attention heads (Ulysses)")
    p = bytes_per_element
    tokens = -(-micro_batch * seq_len // sp)
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    per_layer = _layer_bytes(tokens, shape.hidden, q, kv, shape.intermediate, shape.heads, p)
    if attention == "eager":
        per_layer += micro_batch * (shape.heads // sp) * seq_len * seq_len * (4 + p)
    layers = shape.layers * tokens * p * shape.hidden + per_layer if checkpointing else shape.layers * per_layer
    final = tokens * (4 * shape.hidden + 2 * p * shape.hidden + 4)
    logprobs = tokens * shape.vocab * 4
    vision = 0
    if shape.vision is not None and vision_tokens > 0:
        v = shape.vision
        patches = -(-micro_batch * vision_tokens * v.merge * v.merge // sp)
        vl = _layer_bytes(patches, v.hidden, v.hidden, v.hidden, v.intermediate, v.heads, p)
        vision = (v.layers * patches * p * v.hidden + vl) if checkpointing else v.layers * vl
    return MemoryEstimate(tokens, layers, per_layer, final, logprobs, vision, checkpointing)
