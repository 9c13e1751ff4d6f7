"""The policy model on one device: loading, sampling with `generate`, and per-token log-probabilities.

Why a small module: rollout, old/ref log-prob and the update all need the exact same forward (same temperature
scaling as verl: logits / T before log-softmax), and the device/precision choice (fp32 on CPU, bf16 autocast on a
CUDA GPU with fp32 master weights) must be made once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from evr1_train.engine.batch import EncodedPrompt, collate_prompts, collate_sequences, cut_at_eos


@dataclass(frozen=True)
class Runtime:
    """Where and how the model runs."""

    device: torch.device
    autocast_dtype: torch.dtype | None  # None = plain fp32

    @property
    def label(self) -> str:
        prec = "fp32" if self.autocast_dtype is None else str(self.autocast_dtype).replace("torch.", "") + " autocast"
        return f"{self.device} ({prec})"

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        if self.autocast_dtype is None:
            yield
        else:
            with torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype):
                yield


def pick_runtime(device: str = "auto", dtype: str = "auto") -> Runtime:
    """CPU by default; one CUDA GPU with bf16 autocast when present (or when asked)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("engine.device=cuda but torch sees no CUDA device; use engine.device=cpu")
    if dtype == "auto":
        dtype = "bfloat16" if dev.type == "cuda" else "float32"
    return Runtime(dev, torch.bfloat16 if dtype == "bfloat16" else None)


def load_policy(path: str, runtime: Runtime, key: str = "actor_rollout_ref.model.path") -> tuple[Any, Any]:
    """`(model, processor)` from a Hugging Face folder (or Hub id); weights stay fp32 (the optimiser's master copy).

    `path` may also be an evr1 run folder or checkpoint (its newest `actor/` is used, e.g. RL from an SFT run), and
    an adapter folder (LoRA: merged into its base model). A path that is neither an existing folder nor a loadable
    Hub id is an error naming `key` and the path.
    """
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from transformers.utils import logging as hf_logging

    from evr1_cache import check_model_path, explain_load_error, resolve_model_path, use_reference_mrope
    from evr1_train.engine.lora import is_adapter_folder, load_merged

    path = resolve_model_path(path)
    check_model_path(path, key, adapter_ok=True)
    if os.path.isdir(path):  # recorded as the base of LoRA adapters and in the protocol: keep it valid from anywhere
        path = os.path.abspath(path)
    hf_logging.disable_progress_bar()  # "Loading weights" / "Writing model shards" bars drown the training bar
    try:
        processor = AutoProcessor.from_pretrained(path)
        if is_adapter_folder(path):
            model = load_merged(path, torch.float32)
        else:
            model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32)
    except OSError as exc:
        raise explain_load_error(path, key, exc) from exc
    model.to(runtime.device)
    model.config.use_cache = True
    use_reference_mrope(model)  # transformers 5's Qwen2/2.5-VL video positions are not vLLM's and verl's
    return model, processor


#: Tokens a response must never contain: one more placeholder than the prompt has pixels breaks the next forward
#: ("Image features and image tokens do not match"). A random or collapsing policy does sample them.
VISION_SPECIAL_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>")


def vision_token_ids(tokenizer: Any, family: Any = None) -> list[int]:
    """Ids of the vision special tokens (the model family's, `evr1_cache.families`; Qwen's without one)."""
    tokens = family.vision_tokens if family is not None else VISION_SPECIAL_TOKENS
    ids = [tokenizer.convert_tokens_to_ids(t) for t in tokens]
    return [int(i) for i in ids if isinstance(i, int) and i != tokenizer.unk_token_id and i >= 0]


def eos_ids(model: Any, tokenizer: Any) -> list[int]:
    ids = model.generation_config.eos_token_id
    ids = [ids] if isinstance(ids, int) else list(ids or [])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(int(tokenizer.eos_token_id))
    return [int(i) for i in ids]


def generate(
    model: Any,
    prompts: Sequence[EncodedPrompt],
    *,
    pad_id: int,
    eos: Sequence[int],
    max_new_tokens: int,
    do_sample: bool,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = -1,
    runtime: Runtime,
    suppress: Sequence[int] = (),
    chunk: int = 64,
) -> list[list[int]]:
    """One response per prompt (repeat a prompt to sample it n times), cut after the first EOS.

    `suppress`: token ids never sampled (the vision placeholders, see `VISION_SPECIAL_TOKENS`).
    """
    was_training = model.training
    model.eval()
    out: list[list[int]] = []
    try:
        for start in range(0, len(prompts), chunk):
            part = prompts[start : start + chunk]
            batch = collate_prompts(part, pad_id, runtime.device)
            kwargs: dict[str, Any] = {
                "max_new_tokens": max_new_tokens,
                "do_sample": do_sample,
                "pad_token_id": pad_id,
                "eos_token_id": list(eos),
            }
            if suppress:
                kwargs["suppress_tokens"] = list(suppress)
            if do_sample:
                kwargs.update(temperature=temperature, top_p=top_p, top_k=top_k if top_k > 0 else 0)
            with torch.no_grad(), runtime.autocast():
                seqs = model.generate(**batch, **kwargs)
            width = batch["input_ids"].shape[1]
            out += [cut_at_eos(row.tolist(), eos, pad_id) for row in seqs[:, width:]]
    finally:
        model.train(was_training)
    return out


def token_logprobs(
    model: Any,
    prompts: Sequence[EncodedPrompt],
    responses: Sequence[Sequence[int]],
    *,
    pad_id: int,
    temperature: float,
    runtime: Runtime,
    with_entropy: bool = False,
    width: int | None = None,
    response_types: Sequence[Sequence[int]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """log pi(response token | prefix) `[B, R]` (fp32), optional entropy `[B, R]`, and the response mask `[B, R]`.

    Only the last R+1 positions are projected to the vocabulary (`logits_to_keep`), so memory does not grow with
    the number of vision tokens in the prompt. `response_types`: see `batch.collate_sequences`.
    """
    batch = collate_sequences(prompts, responses, pad_id, runtime.device, width, response_types)
    resp = batch.pop("responses")
    mask = batch.pop("response_mask")
    width = resp.shape[1]
    with runtime.autocast():
        logits = model(**batch, use_cache=False, logits_to_keep=width + 1).logits
    logits = logits[:, :-1, :].float() / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = torch.gather(logp_all, -1, resp.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy, mask
