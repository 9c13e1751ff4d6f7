"""End-of-turn tokens: what chat templates append after an answer, stripped before format and answer parsing.

A rollout decoded with special tokens kept ends with its template's end-of-turn marker (`…</answer><|im_end|>`);
the format check ("nothing after the answer") must not cost it the format score, and no extractor may read the
marker as part of an answer. The list is data:

- `END_OF_TURN_TOKENS`: the built-in tokens of the model families people train (the constant below, by family).
- `add_end_of_turn_tokens(*tokens)`: register more for the whole process (evr1's model-family adapters declare their
  family's tokens this way; a test checks every declared token is covered).
- `EVR1_END_OF_TURN_TOKENS`: more tokens from the environment, whitespace-separated.
- `RewardRouter(end_of_turn_tokens=[...])`: more for one router (the verl / TRL / serve options pass them through).

Only a *trailing* run of these tokens (with whitespace between them) is removed; the same text elsewhere stays.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence

END_OF_TURN_TOKENS: tuple[str, ...] = (
    # Qwen 1.5-3 / Qwen-VL (ChatML), also InternLM2 / InternVL, Yi, Phi-4
    "<|im_end|>",
    "<|endoftext|>",
    # Llama 3 / 3.1 / 3.2-Vision / 4
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|eot|>",
    # Gemma 1-3
    "<end_of_turn>",
    "<eos>",
    # DeepSeek V2 / V3 / R1 / VL2 (full-width bars and the ▁ block), DeepSeek-Coder
    "<｜end▁of▁sentence｜>",
    "<|end▁of▁sentence|>",
    "<|EOT|>",
    # Mistral / Mixtral / Pixtral, Llama 2, InternLM 1, other SentencePiece models
    "</s>",
    # Phi-3 / 3.5 (-vision)
    "<|end|>",
    # GLM-4 / GLM-4V / GLM-4.1V / GLM-4.5V (generation stops at the next role token)
    "<|user|>",
    "<|observation|>",
    # InternLM2 / InternLM3 tool turns
    "<|action_end|>",
)
"""Built-in end-of-turn tokens of Qwen, Llama 3, Gemma, DeepSeek, Mistral, Phi, GLM and InternLM chat templates."""

_EXTRA: list[str] = []
VERSION = 0
"""Bumped whenever tokens are registered (routers re-read the list when it changes)."""
_LOCK = threading.Lock()
_CACHE: dict[tuple[str, ...], tuple[str, ...]] = {}


def add_end_of_turn_tokens(*tokens: str) -> None:
    """Register more end-of-turn tokens for this process (idempotent; empty strings are refused)."""
    for t in tokens:
        if not isinstance(t, str) or not t.strip():
            raise ValueError(f"an end-of-turn token must be a non-empty string, got {t!r}")
    global VERSION
    with _LOCK:
        for t in tokens:
            if t not in _EXTRA and t not in END_OF_TURN_TOKENS:
                _EXTRA.append(t)
        _CACHE.clear()
        VERSION += 1


def end_of_turn_tokens(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Every token in force: built-in, registered, `EVR1_END_OF_TURN_TOKENS` (read when first needed), then `extra`;
    longest first (so `<|end|>` never shadows a longer token ending the same way)."""
    key = tuple(extra)
    hit = _CACHE.get(key)
    if hit is None:
        env = os.environ.get("EVR1_END_OF_TURN_TOKENS", "").split()
        tokens = dict.fromkeys([*END_OF_TURN_TOKENS, *_EXTRA, *env, *key])
        hit = tuple(sorted((t for t in tokens if t), key=len, reverse=True))
        with _LOCK:
            if len(_CACHE) >= 64:
                _CACHE.clear()
            _CACHE[key] = hit
    return hit


def strip_end_of_turn(text: str, tokens: Sequence[str] | None = None) -> str:
    """`text` without its trailing run of end-of-turn tokens (and the whitespace between them); else unchanged."""
    toks = tuple(tokens) if tokens is not None else end_of_turn_tokens()
    if not text:
        return text
    last = _last_chars(toks)
    if text[-1] not in last and not text[-1].isspace():  # the common case: no copy, two lookups
        return text
    end = len(text.rstrip())
    if not end or text[end - 1] not in last:
        return text
    stripped = text[:end]
    while stripped.endswith(toks):
        t = next(t for t in toks if stripped.endswith(t))  # longest first: "<|end|>" never shadows a longer token
        stripped = stripped[: -len(t)].rstrip()
    return stripped if len(stripped) < end else text


_LAST_CHARS: dict[tuple[str, ...], frozenset[str]] = {}


#: The last (tokens, last characters) pair asked for, as a one-slot list.
_LAST_SEEN: list[tuple[tuple[str, ...] | None, frozenset[str]]] = [(None, frozenset())]


def _last_chars(toks: tuple[str, ...]) -> frozenset[str]:
    seen, seen_chars = _LAST_SEEN[0]
    if toks is seen:  # the same tuple every call (a router's): skip hashing it
        return seen_chars
    chars = _LAST_CHARS.get(toks)
    if chars is None:
        chars = frozenset(t[-1] for t in toks)
        if len(_LAST_CHARS) < 64:
            _LAST_CHARS[toks] = chars
    _LAST_SEEN[0] = (toks, chars)
    return chars
