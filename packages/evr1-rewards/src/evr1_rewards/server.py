"""`evr1-rewards serve`: the OpenRLHF remote reward server on uvicorn + starlette (`pip install "evr1-rewards[serve]"`).

The stack OpenRLHF's own reward server uses, with what a training cluster needs from it:
- HTTP/1.1 with keep-alive (uvicorn; `keep_alive_s`), a deep listen backlog (`backlog`, default 4096) so a burst of
  connections from many rollout workers is queued, not reset;
- limits: bodies over `max_body_bytes` are refused (413) from their Content-Length or while streaming, and a body
  that does not arrive within `read_timeout_s` is refused (408), so a stuck client holds nothing;
- batched scoring: one request scores its whole batch (`RewardRouter.score_batch`; code and math in parallel);
  requests that run subprocesses are scored on a thread so the event loop keeps serving;
- every refusal answers a JSON body `{"error": reason}` (OpenRLHF logs the body when it retries) and is logged on
  the `evr1_rewards.server` logger with the reason, the path and the client.

Routes: `POST /get_reward` (any path but /health): OpenRLHF's `{"query", "prompts", "labels"}` -> `{"rewards",
"scores", "extra_logs"}` (see `evr1_rewards.integrations.openrlhf`); `GET /health` -> `{"status": "ok"}`.
Importing this module needs nothing beyond the standard library; the server packages load when an app is built.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evr1_rewards.errors import MissingExtraError, RewardError
from evr1_rewards.integrations.openrlhf import openrlhf_inputs, score_openrlhf
from evr1_rewards.registry import normalize_problem_type
from evr1_rewards.router import RewardRouter
from evr1_rewards.types import RewardInput

log = logging.getLogger(__name__)

_SLOW_TYPES = frozenset({"code", "math"})


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Request limits of the reward server."""

    max_body_bytes: int = 64 << 20
    read_timeout_s: float = 30.0
    keep_alive_s: float = 75.0
    backlog: int = 4096
    inline_samples: int = 16
    """Batches up to this size with no code/math sample are scored on the event loop (cheaper than a thread hop)."""


class _Reject(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def require_serve_extra() -> None:
    """MissingExtraError naming `pip install "evr1-rewards[serve]"` when uvicorn or starlette is missing."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise MissingExtraError("evr1-rewards serve", "serve", e.name or "uvicorn") from None


def create_app(router: RewardRouter, default_type: str | None = None, limits: ServerLimits | None = None) -> Any:
    """The starlette app (an ASGI callable). Raises MissingExtraError without the `serve` extra."""
    require_serve_extra()
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import Response
    from starlette.routing import Route

    lim = limits or ServerLimits()
    if default_type:
        normalize_problem_type(default_type)

    def reply(status: int, payload: Mapping[str, object]) -> Response:
        return Response(json.dumps(payload), status_code=status, media_type="application/json")

    def reject(request: Request, status: int, reason: str) -> Response:
        client = f"{request.client.host}:{request.client.port}" if request.client else "?"
        log.warning("evr1-rewards serve: rejected %s %s from %s (%d): %s", request.method, request.url.path, client,
                    status, reason)  # fmt: skip
        return reply(status, {"error": reason})

    async def read_body(request: Request) -> bytes:
        length = request.headers.get("content-length")
        if length is not None:
            try:
                n = int(length)
            except ValueError:
                raise _Reject(400, f"invalid Content-Length {length!r}") from None
            if n > lim.max_body_bytes:
                raise _Reject(413, f"body of {n} bytes is over the limit of {lim.max_body_bytes} bytes")
        chunks: list[bytes] = []
        size = 0

        async def pull() -> None:
            nonlocal size
            async for chunk in request.stream():
                size += len(chunk)
                if size > lim.max_body_bytes:
                    raise _Reject(413, f"body is over the limit of {lim.max_body_bytes} bytes")
                chunks.append(chunk)

        try:
            await asyncio.wait_for(pull(), lim.read_timeout_s)
        except asyncio.TimeoutError:
            raise _Reject(408, f"the body did not arrive within {lim.read_timeout_s:g} s") from None
        return b"".join(chunks)

    def parse(body: bytes) -> tuple[list[object], list[object] | None, list[object]]:
        if not body:
            raise _Reject(400, 'empty body: POST {"query": [...], "prompts": [...], "labels": [...]}')
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as e:
            raise _Reject(400, f"body is not valid JSON: {e}") from None
        if not isinstance(data, Mapping) or not isinstance(data.get("query"), list):
            raise _Reject(400, 'body must be {"query": [...], "prompts": [...], "labels": [...]}')
        labels = data.get("labels")
        if not isinstance(labels, list):
            raise _Reject(400, "body has no 'labels' list (set --data.label_key in OpenRLHF)")
        prompts = data.get("prompts")
        return data["query"], prompts if isinstance(prompts, list) else None, labels

    def slow(inputs: list[RewardInput]) -> bool:
        if len(inputs) > lim.inline_samples:
            return True
        for inp in inputs:
            try:
                if normalize_problem_type(inp.problem_type) in _SLOW_TYPES:
                    return True
            except RewardError:
                pass
        return False

    async def get_reward(request: Request) -> Response:
        try:
            queries, prompts, labels = parse(await read_body(request))
            inputs = openrlhf_inputs(queries, prompts, labels, default_type)

            def run() -> dict[str, object]:
                return score_openrlhf(router, queries, prompts, labels, default_type, inputs)

            out = await run_in_threadpool(run) if slow(inputs) else run()
        except _Reject as e:
            return reject(request, e.status, e.reason)
        except ClientDisconnect:
            log.warning("evr1-rewards serve: client disconnected while sending %s", request.url.path)
            return reply(400, {"error": "client disconnected"})
        except RewardError as e:
            return reject(request, 400, str(e))
        except Exception as e:  # a bug: answer with the reason, keep serving
            log.exception("evr1-rewards serve: scoring failed")
            return reply(500, {"error": f"{type(e).__name__}: {e}"})
        return reply(200, out)

    async def health(request: Request) -> Response:
        return reply(200, {"status": "ok"})

    async def not_found(request: Request) -> Response:
        return reject(request, 404, f"unknown path {request.url.path}; POST the OpenRLHF payload to /get_reward")

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/", health, methods=["GET"]),
        Route("/{path:path}", get_reward, methods=["POST"]),
        Route("/{path:path}", not_found, methods=["GET", "PUT", "DELETE", "PATCH"]),
    ]
    return Starlette(routes=routes)


def make_config(app: Any, host: str, port: int, limits: ServerLimits | None = None, *, log_level: str = "info") -> Any:
    """A `uvicorn.Config` with the server limits (HTTP/1.1 keep-alive, backlog), httptools/uvloop when present."""
    require_serve_extra()
    import importlib.util

    import uvicorn

    lim = limits or ServerLimits()
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        backlog=lim.backlog,
        timeout_keep_alive=int(lim.keep_alive_s),
        http="httptools" if importlib.util.find_spec("httptools") else "h11",
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        log_level=log_level,
        access_log=False,
        lifespan="off",
    )


def serve(
    host: str,
    port: int,
    router: RewardRouter,
    default_type: str | None = None,
    limits: ServerLimits | None = None,
    *,
    log_level: str = "info",
) -> None:
    """Run the server until interrupted (MissingExtraError without the `serve` extra)."""
    config = make_config(create_app(router, default_type, limits), host, port, limits, log_level=log_level)
    import uvicorn

    uvicorn.Server(config).run()
