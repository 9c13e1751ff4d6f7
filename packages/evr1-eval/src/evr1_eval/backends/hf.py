"""transformers `generate` as a backend: for CPU machines, debugging and tiny models (not for throughput).

It feeds the processor the same pre-sampled frames and metadata as the vLLM backend (`do_sample_frames=False`), so a
disagreement between the two backends points at an engine, not at the inputs. `generate` is blocking, so requests run
one at a time in a worker thread while the runner keeps loading the next samples' frames.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata as importlib_metadata
from typing import Any

from evr1_eval.backends.base import (
    BackendConfig,
    BackendError,
    GenerationParams,
    Request,
    model_family,
    processor_media_kwargs,
)
from evr1_eval.backends.registry import register
from evr1_eval.types import Generation


def _version(dist: str) -> str | None:
    try:
        return importlib_metadata.version(dist)
    except importlib_metadata.PackageNotFoundError:
        return None


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
        self._family: Any = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evr1-hf")

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
        self._processor = AutoProcessor.from_pretrained(self.config.model, **dict(self.config.mm_processor_kwargs))
        model = AutoModelForImageTextToText.from_pretrained(self.config.model, dtype=dtype, **self.config.engine_kwargs)
        self._model = model.to(device).eval()
        self._family = model_family(self.config.model, getattr(model.config, "model_type", None))

    def _inputs(self, request: Request) -> Any:
        text = self._processor.apply_chat_template(request.messages(), tokenize=False, add_generation_prompt=True)
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
        greedy = params.temperature == 0
        gen_kwargs: dict[str, Any] = {"max_new_tokens": params.max_tokens, "do_sample": not greedy}
        floor = params.max_tokens if params.ignore_eos else params.min_tokens  # EOS suppressed up to here
        if floor:
            gen_kwargs["min_new_tokens"] = floor
        if not greedy:
            torch.manual_seed(params.seed)
            gen_kwargs.update(temperature=params.temperature, top_p=params.top_p)
            if params.top_k > 0:
                gen_kwargs["top_k"] = params.top_k
        if params.stop:
            gen_kwargs.update(stop_strings=list(params.stop), tokenizer=self._processor.tokenizer)
        with torch.inference_mode():
            out = self._model.generate(**inputs, **gen_kwargs)
        new = out[0, prompt_len:]
        eos = self._model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos])
        finish = "stop" if len(new) and int(new[-1]) in eos_ids else "length"
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
        return {
            "backend": "hf",
            "engine": f"transformers=={_version('transformers')}",
            "model": self.config.model,
            "dtype": self.config.dtype,
            "mm_processor_kwargs": dict(self.config.mm_processor_kwargs),
        }
