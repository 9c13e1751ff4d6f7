"""A tiny byte-level BPE tokenizer with Qwen's special tokens and chat template, trained in-process (no download).

Why: the quickstart must run on a machine that cannot reach a model hub. The ids of the special tokens differ from the
real Qwen vocabulary, which is fine because the tiny model's config takes every id from this tokenizer. The corpus
holds the quickstart's own prompts and answers, so a prompt is a few dozen tokens and an answer such as
`<answer>B</answer>` only five.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

#: Qwen2.5 / Qwen3 special tokens (in the real vocabulary they start at id 151643, in this order).
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
#: Added, non-special tokens that follow them in Qwen's vocabulary.
QWEN_ADDED_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)

#: The media/text loop of a user turn, shared by both templates: an image or video becomes
#: <|vision_start|><|image_pad|>/<|video_pad|><|vision_end|> (with "Picture N: " / "Video N: " under add_vision_id).
_CONTENT_LOOP = (
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}"
)
_COUNTERS = "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"

#: Qwen2.5-VL's chat template (default system prompt; one vision_start/pad/end triple per image or video).
QWEN2_5_VL_CHAT_TEMPLATE = (
    _COUNTERS + "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}" + _CONTENT_LOOP + "<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: Qwen3-VL-style template (no default system prompt; empty think block when enable_thinking is false).
QWEN3_VL_CHAT_TEMPLATE = (
    _COUNTERS + "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}" + _CONTENT_LOOP + "{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)

_BASE_CORPUS = (
    "You are a helpful assistant. Watch the video carefully. Examine the image carefully.",
    "Answer with the option letter inside <answer></answer>. Put the final answer inside <answer></answer>.",
    "<answer>A</answer> <answer>B</answer> <answer>C</answer> <answer>D</answer>",
    "<answer>1</answer> <answer>2</answer> <answer>3</answer>",
    '<answer>{"time": [0, 2]}</answer> <answer>{"time": [1, 3]}</answer> <answer>{"time": [2, 4]}</answer>',
    "Options: A. red B. green C. blue D. yellow A. left B. right C. up D. down",
    "What colour is the moving square? Which way does the square move? How many squares are there?",
    "When is the square visible? What colour is the square?",
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 seconds, frames, timestamps <0.5 seconds>. The quick brown fox.",
)


def train_tiny_tokenizer(
    extra_corpus: Iterable[str] = (), vocab_size: int = 512, chat_template: str = QWEN2_5_VL_CHAT_TEMPLATE
) -> PreTrainedTokenizerBase:
    """Train a byte-level BPE on the quickstart corpus and wrap it as a transformers `Qwen2Tokenizer`.

    Same pre-tokenizer regex, NFC normaliser and byte-level decoder as Qwen's real tokenizer; Qwen's special and added
    tokens are appended after the learned vocabulary; `eos` is `<|im_end|>`, `pad` is `<|endoftext|>`.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    corpus = list(_BASE_CORPUS) * 20 + [str(t) for t in extra_corpus]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(corpus, trainer=trainer)
    model: dict[str, Any] = json.loads(bpe.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    tok = Qwen2Tokenizer(vocab=model["vocab"], merges=merges)
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS], special_tokens=True)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN_ADDED_TOKENS])
    tok.eos_token = "<|im_end|>"
    tok.pad_token = "<|endoftext|>"
    tok.chat_template = chat_template
    return tok
