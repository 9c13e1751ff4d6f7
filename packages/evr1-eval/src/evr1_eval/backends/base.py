"""The backend contract: one async `generate` per request, engine-neutral inputs, a settings record.

The runner only talks to this protocol, so the production engine (vLLM), the debugging engine (transformers) and remote
servers (OpenAI-compatible) are interchangeable, and the runner's scheduling, resume and error handling can be unit
tested with a fake backend.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from evr1_cache import PromptRecord

if TYPE_CHECKING:
    import numpy as np

    from evr1_eval.types import Generation


class BackendError(RuntimeError):
    """A backend could not start or answer; the message names the setting or input to fix."""


def checked_model(backend: str, model: str) -> str:
    """`--model` as the engine should get it, checked by evr1-cache's model-path checker (one line, no traceback)."""
    from evr1_cache import ModelPathError, check_model_path

    try:
        return check_model_path(model, "--model")
    except ModelPathError as exc:
        raise BackendError(f"{backend} backend: {exc}") from None


class EngineDead(BackendError):
    """The engine itself is gone (not one bad request): the runner stops instead of writing error rows forever."""


@dataclass(frozen=True, slots=True)
class VideoInput:
    """Pre-sampled frames plus the metadata Qwen-VL needs (`VideoMeta.to_hf()`: fps, frames_indices, ...)."""

    frames: np.ndarray  # uint8 [T, H, W, 3]
    metadata: Mapping[str, Any]
    #: Stable id of this exact frame set (cache key), lets engines reuse processed media across questions.
    key: str | None = None


#: What Qwen-VL's processors need to time pre-sampled frames (`VideoMeta.to_hf()` provides them).
REQUIRED_VIDEO_METADATA = frozenset({"fps", "frames_indices", "total_num_frames"})


def check_video_metadata(metadata: Mapping[str, Any]) -> None:
    """Refuse frames whose metadata cannot time them, naming what is missing and where it comes from."""
    missing = REQUIRED_VIDEO_METADATA - set(metadata)
    if missing:
        raise BackendError(f"video metadata lacks {sorted(missing)}: pass VideoMeta.to_hf() from evr1-cache")


def model_family(model: str, model_type: str | None = None) -> Any:
    """The evr1 model family (`evr1_cache.families`) of a checkpoint, by its config's `model_type` or its path / id;
    None for a model no family serves (its processor then gets the generic pre-sampled-video arguments)."""
    from evr1_cache.families import family_or_none

    return family_or_none(model_type) if model_type else family_or_none(model)


def processor_media_kwargs(family: Any, request: Request) -> dict[str, Any]:
    """The transformers processor's keyword arguments for a request's media, as the model family prescribes:
    cached frames are neither re-sampled (`do_sample_frames=False` + metadata) nor re-sized."""
    for v in request.videos:
        check_video_metadata(v.metadata)
    if family is not None:
        out: dict[str, Any] = family.hf_kwargs([dict(v.metadata) for v in request.videos], images=bool(request.images))
        return out
    from evr1_cache.families import hf_metadata

    if not request.videos:
        return {}
    return {"video_metadata": [hf_metadata(dict(v.metadata)) for v in request.videos], "do_sample_frames": False}


@dataclass(frozen=True, slots=True)
class ImageInput:
    pixels: np.ndarray  # uint8 [H, W, 3]
    key: str | None = None


_MEDIA_MARKER = re.compile(r"(<video>|<image>)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One prompt for one sample: user text, media in order (videos first, then images), optional system turn.

    inline_media: the prompt holds `<video>` / `<image>` markers where its media go (the evr1 protocol keeps a
        question's markers where training had them); media without a marker go before the text, as they always do
        otherwise, and a marker without media (a run `--without-video`) is dropped.
    """

    id: str
    prompt: str
    videos: tuple[VideoInput, ...] = ()
    images: tuple[ImageInput, ...] = ()
    system: str | None = None
    inline_media: bool = False
    #: Earlier turns of a tool-using episode (`evr1_eval.agent`): each the model's text and the tools' answer as
    #: chat content items; their media are the last ones of `videos` / `images` (in conversation order).
    history: tuple[tuple[str, tuple[Mapping[str, Any], ...]], ...] = ()

    def _later_media(self) -> tuple[int, int]:
        """How many videos and images the history's tool answers hold (the last ones of `videos` / `images`)."""
        items = [c.get("type") for _, answer in self.history for c in answer]
        return items.count("video"), items.count("image")

    def parts(self) -> list[tuple[str, Any]]:
        """The user turn in order: `("video", VideoInput)`, `("image", ImageInput)` and `("text", str)` parts."""
        segments = _MEDIA_MARKER.split(self.prompt) if self.inline_media else [self.prompt]
        later_videos, later_images = self._later_media()
        videos = list(self.videos[: len(self.videos) - later_videos])
        images = list(self.images[: len(self.images) - later_images])
        placed: list[tuple[str, Any]] = []
        for seg in segments:
            if seg == "<video>" and len(segments) > 1:
                if videos:
                    placed.append(("video", videos.pop(0)))
            elif seg == "<image>" and len(segments) > 1:
                if images:
                    placed.append(("image", images.pop(0)))
            elif seg:
                placed.append(("text", seg))
        first: list[tuple[str, Any]] = [("video", v) for v in videos] + [("image", i) for i in images]
        return first + placed if placed else [*first, ("text", "")]

    def record(self, video_sources: Sequence[str], image_sources: Sequence[str]) -> PromptRecord:
        """The prompt record of this request (what the model is sent, in `parts()` order), media named by their
        sources (the sample's `videos` / `images`, in the order of `self.videos` / `self.images`)."""
        names = {id(v): s for v, s in zip(self.videos, video_sources, strict=False)}
        names.update((id(i), s) for i, s in zip(self.images, image_sources, strict=False))
        parts = tuple((k, v if k == "text" else names.get(id(v), f"{k}#?")) for k, v in self.parts())
        return PromptRecord(parts, self.system)

    def messages(self) -> list[dict[str, Any]]:
        """Chat messages in the Qwen/transformers content-part format (media where `parts()` puts them)."""
        content = [{"type": kind, "text": value} if kind == "text" else {"type": kind} for kind, value in self.parts()]
        msgs: list[dict[str, Any]] = [{"role": "system", "content": self.system}] if self.system else []
        msgs.append({"role": "user", "content": content})
        for said, answer in self.history:
            msgs += [{"role": "assistant", "content": said}, {"role": "user", "content": [dict(c) for c in answer]}]
        return msgs


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationParams:
    """Sampling settings; the defaults are greedy decoding, which is what published numbers assume."""

    max_tokens: int = 1024
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int = 0
    stop: tuple[str, ...] = ()
    #: Token ids that end an answer, besides the model's EOS and its chat template's end-of-turn token, which every
    #: backend stops on anyway (`stop_token_ids_for`); a checkpoint's training record lists its own.
    stop_token_ids: tuple[int, ...] = ()
    #: Token ids never generated (evr1-train suppresses the vision placeholders in its rollouts).
    suppress_token_ids: tuple[int, ...] = ()
    #: vLLM / OpenAI semantics: `presence_penalty` is subtracted from the logits of tokens already generated,
    #: `repetition_penalty` divides (multiplies, when negative) the logits of tokens in the prompt or the answer.
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    #: Load testing only (forced answer lengths, e.g. `benchmarks/eval_pipeline.py`): no EOS before `min_tokens`, and
    #: with `ignore_eos` none at all, so the answer runs to `max_tokens` (vLLM's `min_tokens` / `ignore_eos`).
    min_tokens: int = 0
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 <= self.min_tokens <= self.max_tokens:
            raise ValueError(f"min_tokens must be in [0, max_tokens={self.max_tokens}], got {self.min_tokens}")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        for name in ("stop", "stop_token_ids", "suppress_token_ids"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def to_dict(self) -> dict[str, Any]:
        out = {**asdict(self), "stop": list(self.stop)}
        # recorded only when set, so the settings of runs made before these fields existed stay resumable
        for name, default in _QUIET_DEFAULTS.items():
            if out[name] == default:
                del out[name]
            elif isinstance(out[name], tuple):
                out[name] = list(out[name])
        return out


_QUIET_DEFAULTS: dict[str, Any] = {
    "stop_token_ids": (),
    "suppress_token_ids": (),
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
    "min_tokens": 0,
    "ignore_eos": False,
}


def stop_token_ids_for(
    tokenizer: Any, eos: Any, extra: tuple[int, ...] = (), chat_template: str | None = None
) -> list[int]:
    """Every token id an answer ends on: `extra`, the model's EOS (`generation_config.eos_token_id`, an int or a list),
    the tokenizer's EOS and the chat template's end-of-turn token (what the template writes right after an assistant
    turn, e.g. Qwen's `<|im_end|>`), in that order, without repeats. Models whose generation config names only
    `<|endoftext|>` then still stop at the end of their turn instead of running to `max_tokens`."""
    eos_ids = eos if isinstance(eos, (list, tuple)) else [eos]
    ids = [*extra, *eos_ids, getattr(tokenizer, "eos_token_id", None), end_of_turn_id(tokenizer, chat_template)]
    return list(dict.fromkeys(int(i) for i in ids if i is not None))


_SENTINEL = "evr1-answer-sentinel"


def end_of_turn_id(tokenizer: Any, chat_template: str | None = None) -> int | None:
    """The single special token a chat template writes right after an assistant turn's text (None when it writes
    none, or the template cannot be rendered)."""
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _SENTINEL}]
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, chat_template=chat_template)
    except Exception:  # a template that needs other arguments: no end-of-turn token is known
        return None
    if not isinstance(text, str) or _SENTINEL not in text:
        return None
    after = text.split(_SENTINEL, 1)[1].lstrip()
    special = [str(t) for t in getattr(tokenizer, "all_special_tokens", [])]
    added = [str(t) for t in getattr(tokenizer, "get_added_vocab", dict)()]
    for token in sorted({*special, *added}, key=len, reverse=True):
        if token and after.startswith(token):
            tid = tokenizer.convert_tokens_to_ids(token)
            return int(tid) if isinstance(tid, int) and tid != getattr(tokenizer, "unk_token_id", None) else None
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendConfig:
    """Everything a backend may need; each backend reads the fields that apply to it.

    Fields under "numbers" change results and are part of a run's recorded settings; the rest only change speed.
    """

    model: str = ""
    # numbers
    dtype: str = "auto"
    max_model_len: int | None = None
    mm_processor_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # speed / scale-out (vLLM)
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    enforce_eager: bool = False
    limit_mm_per_prompt: Mapping[str, int] = field(default_factory=lambda: {"image": 1, "video": 1})
    engine_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # remote (openai)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 600.0
    # hf
    device: str = "auto"
    #: torch CPU threads (0: one for a model under 20 M parameters, else torch's default); speed only.
    threads: int = 0
    #: The Jinja chat template prompts are rendered with (None: the tokenizer's own); a checkpoint trained by
    #: evr1-train records the one it was trained with.
    chat_template: str | None = None


def engine_settings(backend: str, engine: str | None, config: BackendConfig, **numbers: Any) -> dict[str, Any]:
    """A backend's `settings()`: its name, engine and model, its own `numbers`, the processor kwargs and the chat
    template, recorded by its hash (the text can be many KB)."""
    import hashlib

    template = config.chat_template
    return {
        "backend": backend,
        "engine": engine,
        "model": config.model,
        **numbers,
        "mm_processor_kwargs": dict(config.mm_processor_kwargs),
        **({"chat_template": "sha256:" + hashlib.sha256(template.encode()).hexdigest()[:16]} if template else {}),
    }


@runtime_checkable
class Backend(Protocol):
    """An engine that turns a `Request` into a `Generation`; safe to call concurrently once started."""

    name: str

    async def start(self) -> None: ...

    async def generate(self, request: Request, params: GenerationParams) -> Generation: ...

    async def close(self) -> None: ...

    def settings(self) -> dict[str, Any]:
        """What changes numbers (model, backend + version, dtype, processor kwargs): recorded in run.json."""
        ...
