"""Any OpenAI-compatible chat-completions server (`vllm serve`, SGLang, hosted APIs, LLM judges) over async HTTP.

Images travel as PNG data URLs. Videos travel as vLLM's `data:video/jpeg;base64,<frame>,<frame>...` list of the already
sampled frames, and their source timing (`VideoMeta.to_hf()`: fps, frames_indices, total_num_frames, duration) as the
request's `media_io_kwargs["video"]`, with `num_frames=-1`. Without it vLLM keeps only the first 32 frames of the list
and assumes 1 fps, which mis-times Qwen2.5-VL's temporal positions and Qwen3-VL's timestamps. vLLM accepts per-request
`media_io_kwargs` only from a server started with `--trust-request-mm-kwargs`; text-only requests (LLM judges) send
none, so any OpenAI-compatible server works for them.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
from collections.abc import Mapping
from typing import Any

from evr1_eval.backends.base import (
    BackendConfig,
    BackendError,
    GenerationParams,
    Request,
    check_video_metadata,
    engine_settings,
)
from evr1_eval.backends.registry import register
from evr1_eval.types import Generation

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_TRUST_HINT = (
    " (videos carry their frame timing as per-request media_io_kwargs, and --mm-processor-kwargs travel per request:"
    " start `vllm serve` with --trust-request-mm-kwargs)"
)


def _encode(pixels: Any, fmt: str) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format=fmt)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def video_media_io_kwargs(request: Request) -> dict[str, dict[str, Any]] | None:
    """vLLM's per-request `media_io_kwargs` for the request's videos (None without videos): read every frame sent and
    time them as the source did. vLLM applies one set to all videos of a request, so their timing must agree."""
    if not request.videos:
        return None
    sets = [_video_timing(v.metadata, len(v.frames)) for v in request.videos]
    if any(s != sets[0] for s in sets[1:]):
        raise BackendError(
            f"request {request.id}: the openai backend sends one video timing per request (vLLM's media_io_kwargs), "
            "but its videos differ in fps / frames_indices; use the in-process vllm backend for such samples"
        )
    return {"video": sets[0]}


def _video_timing(metadata: Mapping[str, Any], n_frames: int) -> dict[str, Any]:
    check_video_metadata(metadata)
    indices = [int(i) for i in metadata["frames_indices"]]
    if len(indices) != n_frames:
        raise BackendError(f"video metadata has {len(indices)} frames_indices for {n_frames} frames")
    timing: dict[str, Any] = {
        "num_frames": -1,  # all frames sent (vLLM's default keeps the first 32)
        "fps": float(metadata["fps"]),
        "frames_indices": indices,
        "total_num_frames": int(metadata["total_num_frames"]),
        "do_sample_frames": False,
    }
    if metadata.get("duration") is not None:
        timing["duration"] = float(metadata["duration"])
    return timing


def chat_messages(request: Request) -> list[dict[str, Any]]:
    """OpenAI chat messages for a request, its media and text in `Request.parts()` order (as `Request.messages`)."""
    parts: list[dict[str, Any]] = []
    for kind, value in request.parts():
        if kind == "video":
            frames = ",".join(_encode(f, "JPEG") for f in value.frames)
            parts.append({"type": "video_url", "video_url": {"url": f"data:video/jpeg;base64,{frames}"}})
        elif kind == "image":
            url = f"data:image/png;base64,{_encode(value.pixels, 'PNG')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append({"type": "text", "text": value})
    msgs: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
    content: Any = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
    return [*msgs, {"role": "user", "content": content}]


def sampling_extensions(params: GenerationParams, chat_template: str | None) -> dict[str, Any]:
    """The request fields for stop ids, suppressed ids, penalties and a chat template, sent only when set:
    `presence_penalty` and `logit_bias` are OpenAI's own (a suppressed id gets the strongest bias, -100);
    `stop_token_ids`, `repetition_penalty` and `chat_template` are vLLM's server extensions (`vllm serve`). The
    server stops on its model's EOS by itself."""
    out: dict[str, Any] = {}
    if params.stop_token_ids:
        out["stop_token_ids"] = list(params.stop_token_ids)
    if params.suppress_token_ids:
        out["logit_bias"] = {str(t): -100 for t in params.suppress_token_ids}
    if params.presence_penalty:
        out["presence_penalty"] = params.presence_penalty
    if params.repetition_penalty != 1.0:
        out["repetition_penalty"] = params.repetition_penalty
    if chat_template is not None:
        out["chat_template"] = chat_template
    if params.min_tokens or params.ignore_eos:  # vLLM's server extensions for forced answer lengths
        out.update(min_tokens=params.min_tokens, ignore_eos=params.ignore_eos)
    return out


@register("openai")
class OpenAIBackend:
    name = "openai"

    def __init__(self, config: BackendConfig, transport: Any = None) -> None:
        if not config.base_url:
            raise BackendError("openai backend: pass --base-url (e.g. http://localhost:8000/v1)")
        if not config.model:
            raise BackendError("openai backend: pass --model (the served model name)")
        self.config = config
        self.base_url: str = config.base_url
        self._transport = transport  # tests inject httpx.MockTransport
        self._client: Any = None
        self.max_attempts = int(dict(config.engine_kwargs).get("max_attempts", 4))

    async def start(self) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise BackendError(f"openai backend needs httpx: pip install 'evr1-eval[openai]' ({exc})") from exc
        key = os.environ.get(self.config.api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url.rstrip("/"),
            headers=headers,
            timeout=self.config.timeout_s,
            transport=self._transport,
        )

    def payload(self, request: Request, params: GenerationParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": chat_messages(request),
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": params.seed,
        }
        if params.top_k > 0:
            body["top_k"] = params.top_k
        if params.stop:
            body["stop"] = list(params.stop)
        body.update(sampling_extensions(params, self.config.chat_template))
        if self.config.mm_processor_kwargs:
            body["mm_processor_kwargs"] = dict(self.config.mm_processor_kwargs)
        media_io = video_media_io_kwargs(request)
        if media_io:
            body["media_io_kwargs"] = media_io
        return body

    async def generate(self, request: Request, params: GenerationParams) -> Generation:
        if self._client is None:
            raise BackendError("openai backend used before start()")
        import httpx

        body = self.payload(request, params)
        for attempt in range(1, self.max_attempts + 1):
            try:
                resp = await self._client.post("/chat/completions", json=body)
            except httpx.TransportError as exc:
                if attempt == self.max_attempts:
                    raise BackendError(f"{self.config.base_url}: {exc!r} after {attempt} attempts") from exc
            else:
                if resp.status_code == 200:
                    return _parse(resp.json(), request.id)
                if resp.status_code not in RETRY_STATUS or attempt == self.max_attempts:
                    hint = _TRUST_HINT if "trust-request-mm-kwargs" in resp.text else ""
                    raise BackendError(f"{self.config.base_url}: HTTP {resp.status_code}: {resp.text[:300]}{hint}")
            await asyncio.sleep(min(0.5 * 2 ** (attempt - 1), 8.0))
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def settings(self) -> dict[str, Any]:
        video_input = "jpeg frames + media_io_kwargs timing"
        return engine_settings("openai", self.config.base_url, self.config, video_input=video_input)


def _parse(data: Any, request_id: str) -> Generation:
    """Server answers are untrusted: a malformed body is an error for this request, not a crash."""
    try:
        choice = data["choices"][0]
        text = choice["message"]["content"] or ""
        usage = data.get("usage") or {}
        return Generation(
            text=str(text),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"),
        )
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise BackendError(f"malformed chat completion for request {request_id}: {str(data)[:300]}") from exc
