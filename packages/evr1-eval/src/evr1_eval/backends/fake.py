"""A scripted backend for unit tests of the runner only (never for numbers): fixed answers, delays, failures.

It records what it saw (requests, peak concurrency) so tests can check scheduling, media plumbing and resume.
Options come from `BackendConfig.engine_kwargs`: `response` (default "A"), `responses` ({request id: text}),
`fail_ids` (ids that raise), `delay_s` (seconds per request); any other key is refused.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from evr1_eval.backends.base import BackendConfig, BackendError, GenerationParams, Request
from evr1_eval.backends.registry import register
from evr1_eval.types import Generation


@dataclass(frozen=True, slots=True)
class Seen:
    """What the fake saw of a request, without keeping its frames alive (tests measure memory)."""

    id: str
    prompt: str
    system: str | None
    video_shapes: tuple[tuple[int, ...], ...]
    video_metadata: tuple[dict[str, Any], ...]
    image_shapes: tuple[tuple[int, ...], ...]


@register("fake")
class FakeBackend:
    name = "fake"

    def __init__(self, config: BackendConfig | None = None) -> None:
        self.config = config or BackendConfig(model="fake")
        opts = dict(self.config.engine_kwargs)
        self.response: str = str(opts.pop("response", "A"))
        self.responses: dict[str, str] = {str(k): str(v) for k, v in dict(opts.pop("responses", {})).items()}
        self.fail_ids: set[str] = {str(i) for i in opts.pop("fail_ids", ())}
        self.delay_s: float = float(opts.pop("delay_s", 0.0))
        if opts:
            raise BackendError(f"fake backend: unknown engine_kwargs {sorted(opts)}")
        self.started = False
        self.closed = False
        self.in_flight = 0
        self.max_in_flight = 0
        self.seen: list[Seen] = []

    async def start(self) -> None:
        self.started = True

    async def generate(self, request: Request, params: GenerationParams) -> Generation:
        if not self.started or self.closed:
            raise BackendError("fake backend used before start() or after close()")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self.seen.append(
                Seen(
                    id=request.id,
                    prompt=request.prompt,
                    system=request.system,
                    video_shapes=tuple(tuple(v.frames.shape) for v in request.videos),
                    video_metadata=tuple(dict(v.metadata) for v in request.videos),
                    image_shapes=tuple(tuple(i.pixels.shape) for i in request.images),
                )
            )
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            if request.id in self.fail_ids:
                raise BackendError(f"fake engine failure for request {request.id}")
            text = self.responses.get(request.id, self.response)[: params.max_tokens * 8]
            return Generation(
                text=text, prompt_tokens=len(request.prompt), completion_tokens=len(text), finish_reason="stop"
            )
        finally:
            self.in_flight -= 1

    async def close(self) -> None:
        self.closed = True

    def settings(self) -> dict[str, Any]:
        return {"backend": "fake", "model": self.config.model or "fake", "response": self.response}
