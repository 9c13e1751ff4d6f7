"""transformers `generate` as a backend: for CPU machines, debugging and tiny models (not for throughput).

It feeds the processor the same pre-sampled frames and metadata as the vLLM backend (`do_sample_frames=False`), so a
disagreement between the two backends points at an engine, not at the inputs. `generate` is blocking, so requests run
one at a time in a worker thread while the runner keeps loading the next samples' frames.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from evr1_cache import explain_load_error, use_reference_mrope
from evr1_eval.backends.base import (
    BackendConfig,
    BackendError,
    GenerationParams,
    Request,
    checked_model,
    engine_settings,
    model_family,
    processor_media_kwargs,
    stop_token_ids_for,
)
from evr1_eval.backends.registry import register
from evr1_eval.manifest import version_of
from evr1_eval.types import Generation


@register("hf")
class HfBackend:
    name = "hf"

    def __init__(self, config: BackendConfig) -> None:
        if not config.model:
            raise BackendError("hf backend: no model given (pass --model PATH_OR_HF_ID)")
        self.config = config
        self._model: Any = None
        self._processor: Any = None
        self._device: str = "cpu"
        self._eos: list[int] = []
        self._family: Any = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evr1-hf")

    def check(self) -> None:
        """transformers + torch importable and `--model` a model folder or a Hub id (see `model_path`)."""
        import importlib.util

        missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            raise BackendError(f"the hf backend needs {' and '.join(missing)}: pip install 'evr1-eval[hf]'")
        checked_model("hf", self.config.model)

    async def start(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._pool, self._load)

    def _load(self) -> None:
        try:
            import torch
            from transformers import AutoModelForImageTextToText, AutoProcessor
        except ImportError as exc:
            raise BackendError(f"hf backend needs torch + transformers: pip install 'evr1-eval[hf]' ({exc})") from exc
        device = self.config.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self._device = device
        dtype: Any = self.config.dtype if self.config.dtype == "auto" else getattr(torch, self.config.dtype)
        model_id = checked_model("hf", self.config.model)
        try:
            self._processor = AutoProcessor.from_pretrained(model_id, **dict(self.config.mm_processor_kwargs))
            model = AutoModelForImageTextToText.from_pretrained(model_id, dtype=dtype, **self.config.engine_kwargs)
        except (OSError, ValueError) as exc:  # not a model folder / hub id: one line naming it, not a traceback
            raise BackendError(f"hf backend: {explain_load_error(self.config.model, '--model', exc)}") from None
        self._model = model.to(device).eval()
        use_reference_mrope(model)  # vLLM's (and the trainer's) Qwen2/2.5-VL video positions, not transformers 5's
        if device == "cpu":
            torch.set_num_threads(cpu_threads(self.config.threads, model))
        self._eos = stop_token_ids_for(
            self._processor.tokenizer, model.generation_config.eos_token_id, chat_template=self.config.chat_template
        )
        self._family = model_family(self.config.model, getattr(model.config, "model_type", None))

    def _inputs(self, request: Request) -> Any:
        text = self._processor.apply_chat_template(
            request.messages(), tokenize=False, add_generation_prompt=True, chat_template=self.config.chat_template
        )
        kwargs: dict[str, Any] = {
            "text": [text],
            "return_tensors": "pt",
            **processor_media_kwargs(self._family, request),
        }
        if request.videos:
            kwargs["videos"] = [v.frames for v in request.videos]
        if request.images:
            kwargs["images"] = [i.pixels for i in request.images]
        return self._processor(**kwargs).to(self._device)

    def _generate(self, request: Request, params: GenerationParams) -> Generation:
        import torch

        inputs = self._inputs(request)
        prompt_len = int(inputs["input_ids"].shape[1])
        limit = self.config.max_model_len
        if limit is not None and prompt_len + params.max_tokens > limit:
            raise BackendError(
                f"prompt of {prompt_len} tokens + max_tokens {params.max_tokens} exceeds max_model_len {limit} "
                "(fewer frames / smaller max_pixels, or a larger --max-model-len)"
            )
        eos = list(dict.fromkeys([*params.stop_token_ids, *self._eos]))
        with torch.inference_mode():
            out = self._model.generate(**inputs, **generate_kwargs(params, eos, self._processor.tokenizer))
        new = out[0, prompt_len:]
        finish = "stop" if len(new) and int(new[-1]) in set(eos) else "length"
        text = self._processor.tokenizer.decode(new, skip_special_tokens=True)
        return Generation(text=text, prompt_tokens=prompt_len, completion_tokens=len(new), finish_reason=finish)

    async def generate(self, request: Request, params: GenerationParams) -> Generation:
        if self._model is None:
            raise BackendError("hf backend used before start()")
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._generate, request, params)

    async def close(self) -> None:
        self._model = None
        self._pool.shutdown(wait=False, cancel_futures=True)

    def settings(self) -> dict[str, Any]:
        engine = f"transformers=={version_of('transformers')}"
        return engine_settings("hf", engine, self.config, dtype=self.config.dtype)


#: Below this many parameters a CPU forward is a string of tiny matrix products: extra threads only wait on each other
#: (measured: a 0.6 M-parameter Qwen2.5-VL answered 58x faster with 1 thread than with 2 on a busy 2-core machine).
TINY_MODEL_PARAMS = 20_000_000


def cpu_threads(requested: int, model: Any) -> int:
    """torch's CPU threads for this model: `requested` when > 0, else 1 for a tiny model, else torch's default."""
    import torch

    if requested > 0:
        return requested
    if sum(p.numel() for p in model.parameters()) < TINY_MODEL_PARAMS:
        return 1
    return int(torch.get_num_threads())


def generate_kwargs(params: GenerationParams, eos: list[int], tokenizer: Any) -> dict[str, Any]:
    """`model.generate` keyword arguments for `params` (greedy unless a temperature is set): EOS / end-of-turn ids,
    suppressed ids, and vLLM's presence / repetition penalties (the presence penalty as a logits processor:
    transformers has none)."""
    import torch

    greedy = params.temperature == 0
    out: dict[str, Any] = {"max_new_tokens": params.max_tokens, "do_sample": not greedy, "eos_token_id": eos}
    if tokenizer.pad_token_id is not None:
        out["pad_token_id"] = tokenizer.pad_token_id
    floor = params.max_tokens if params.ignore_eos else params.min_tokens  # EOS suppressed up to here
    if floor:
        out["min_new_tokens"] = floor
    if not greedy:
        torch.manual_seed(params.seed)
        out.update(temperature=params.temperature, top_p=params.top_p)
        if params.top_k > 0:
            out["top_k"] = params.top_k
    if params.stop:
        out.update(stop_strings=list(params.stop), tokenizer=tokenizer)
    if params.suppress_token_ids:
        out["suppress_tokens"] = list(params.suppress_token_ids)
    if params.repetition_penalty != 1.0:
        out["repetition_penalty"] = params.repetition_penalty
    if params.presence_penalty:
        from transformers import LogitsProcessorList

        out["logits_processor"] = LogitsProcessorList([_PresencePenalty(params.presence_penalty)])
    return out


class _PresencePenalty:
    """vLLM's presence penalty for transformers: every token already in the answer loses `penalty` from its logit
    once (the prompt's tokens are not counted). `start` is the prompt length, learnt on the first call."""

    def __init__(self, penalty: float) -> None:
        self.penalty = penalty
        self.start: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.start is None:
            self.start = int(input_ids.shape[1])
        answer = input_ids[:, self.start :]
        if answer.shape[1] == 0:
            return scores
        seen = scores.new_zeros(scores.shape, dtype=scores.dtype).scatter_(1, answer, 1.0)
        return scores - self.penalty * seen
