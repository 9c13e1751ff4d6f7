"""Test env only: a tiny, randomly initialised Qwen2 causal LM with the Qwen-style tokenizer of `tiny_qwen.py`.

For host tests that need a text policy (TRL's GRPOTrainer): 2 layers, hidden 64, builds in well under a second,
generates on CPU. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any


def _tiny_qwen() -> Any:
    spec = importlib.util.spec_from_file_location("evr1_testenv_tiny_qwen", Path(__file__).with_name("tiny_qwen.py"))
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_tiny_text_lm(seed: int = 0) -> tuple[Any, Any]:
    """(model, tokenizer): a random Qwen2ForCausalLM whose vocabulary is the tiny tokenizer's."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = _tiny_qwen().build_tokenizer()
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = Qwen2ForCausalLM(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok
