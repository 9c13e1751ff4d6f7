"""The backend contract: one async `generate` per request, engine-neutral inputs, a settings record.

The runner only talks to this protocol, so the production engine (vLLM), the debugging engine (transformers) and remote
servers (OpenAI-compatible) are interchangeable, and the runner's scheduling, resume and error handling can be unit
tested with a fake backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from evr1_eval.types import Generation


class BackendError(RuntimeError):
    """A backend could not start or answer; the message names the setting or input to fix."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One prompt for one sample: user text, media in order (videos first, then images), optional system turn."""

    id: str
    prompt: str
    videos: tuple[VideoInput, ...] = ()
    images: tuple[ImageInput, ...] = ()
    system: str | None = None

    def messages(self) -> list[dict[str, Any]]:
        """Chat messages in the Qwen/transformers content-part format (media placeholders before the text)."""
        parts: list[dict[str, Any]] = [{"type": "video"} for _ in self.videos]
        parts += [{"type": "image"} for _ in self.images]
        parts.append({"type": "text", "text": self.prompt})
        msgs: list[dict[str, Any]] = [{"role": "system", "content": self.system}] if self.system else []
        return [*msgs, {"role": "user", "content": parts}]


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationParams:
    """Sampling settings; the defaults are greedy decoding, which is what published numbers assume."""

    max_tokens: int = 1024
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int = 0
    stop: tuple[str, ...] = ()
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

    def to_dict(self) -> dict[str, Any]:
        out = {**asdict(self), "stop": list(self.stop)}
        for name in ("min_tokens", "ignore_eos"):  # recorded only when set: older runs' settings stay resumable
            if not out[name]:
                del out[name]
        return out


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
