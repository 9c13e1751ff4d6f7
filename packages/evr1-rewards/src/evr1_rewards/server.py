"""`evr1-rewards serve`: the OpenRLHF remote reward server on uvicorn + starlette (`pip install "evr1-rewards[serve]"`).

The stack OpenRLHF's own reward server uses, with what a training cluster needs from it:
- HTTP/1.1 with keep-alive (uvicorn; `keep_alive_s`), a deep listen backlog (`backlog`, default 4096) so a burst of
  connections from many rollout workers is queued, not reset;
- limits: bodies over `max_body_bytes` are refused (413) from their Content-Length or while streaming, a body
  that does not arrive within `read_timeout_s` is refused (408), and so are headers that do not arrive within
  `header_timeout_s` (slowloris: uvicorn alone never times out a connection before its first request), so a stuck
  client holds nothing; a batch over `max_samples` is refused (413); a large body is decoded, scored and encoded on
  a worker thread, so it never stalls the event loop for the other connections;
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
    header_timeout_s: float = 10.0
    """A request whose headers have not all arrived this long after its first byte (or after the connection opened)
    is answered 408 and its connection closed: idle half-open connections (slowloris) cannot pile up. uvicorn itself
    only times out idle keep-alive connections."""
    max_samples: int = 65536
    """A request with more samples is refused (413): one request cannot occupy the scorer for hours."""
    inline_body_bytes: int = 256 << 10
    """Larger bodies are parsed, scored and answered on a worker thread, so decoding a big JSON body never stalls the
    event loop (every other connection's requests) for seconds."""


class _Reject(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


async def _within(awaitable: Any, seconds: float) -> Any:
    """`await awaitable` or TimeoutError after `seconds`, without a task per request where Python has
    `asyncio.timeout` (3.11+)."""
    timeout = getattr(asyncio, "timeout", None)
    if timeout is None:
        return await asyncio.wait_for(awaitable, seconds)
    async with timeout(seconds):
        return await awaitable


def require_serve_extra() -> None:
    """MissingExtraError naming `pip install "evr1-rewards[serve]"` when uvicorn or starlette is missing."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise MissingExtraError("evr1-rewards serve", "serve", e.name or "uvicorn") from None


def create_app(router: RewardRouter, default_type: str | None = None, limits: ServerLimits | None = None) -> Any:
    """The ASGI app: POSTs go straight to the scoring endpoint (the hot path, no routing or request objects), every
    other request to a starlette `Router` (health, 404). Raises MissingExtraError without the `serve` extra."""
    require_serve_extra()
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route, Router

    lim = limits or ServerLimits()
    if default_type:
        normalize_problem_type(default_type)
    endpoint = _ScoreEndpoint(router, default_type, lim)

    async def health(request: Request) -> Response:
        return Response(json.dumps({"status": "ok"}), media_type="application/json")

    async def not_found(request: Request) -> Response:
        reason = f"unknown path {request.url.path}; POST the OpenRLHF payload to /get_reward"
        _log_reject(request.scope, 404, reason)
        return Response(json.dumps({"error": reason}), status_code=404, media_type="application/json")

    others = Router(
        routes=[Route("/health", health, methods=["GET"]), Route("/", health, methods=["GET"]),
                Route("/{path:path}", not_found, methods=["GET", "PUT", "DELETE", "PATCH", "HEAD"])]
    )  # fmt: skip

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            await endpoint(scope, receive, send)
        else:
            await others(scope, receive, send)

    return app


def _log_reject(scope: Mapping[str, Any], status: int, reason: str) -> None:
    client = scope.get("client")
    who = f"{client[0]}:{client[1]}" if client else "?"
    log.warning("evr1-rewards serve: rejected %s %s from %s (%d): %s", scope.get("method"), scope.get("path"), who,
                status, reason)  # fmt: skip


class _ClientGone(Exception):
    pass


class _ScoreEndpoint:
    """POST {"query", "prompts", "labels"} -> {"rewards", "scores", "extra_logs"}, as a plain ASGI callable."""

    def __init__(self, router: RewardRouter, default_type: str | None, lim: ServerLimits) -> None:
        self.router, self.default_type, self.lim = router, default_type, lim

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body = await self.read_body(scope, receive)
            if len(body) > self.lim.inline_body_bytes:
                from starlette.concurrency import run_in_threadpool

                out = await run_in_threadpool(self.handle, body)
            else:
                queries, prompts, labels = self.parse(body, self.lim.max_samples)
                inputs = openrlhf_inputs(queries, prompts, labels, self.default_type)

                def run() -> dict[str, object]:
                    return score_openrlhf(self.router, queries, prompts, labels, self.default_type, inputs)

                if self.slow(inputs):
                    from starlette.concurrency import run_in_threadpool

                    out = await run_in_threadpool(run)
                else:
                    out = run()
        except _Reject as e:
            _log_reject(scope, e.status, e.reason)
            await _send_json(send, e.status, {"error": e.reason})
            return
        except _ClientGone:
            log.warning("evr1-rewards serve: client disconnected while sending %s", scope.get("path"))
            return
        except RewardError as e:
            _log_reject(scope, 400, str(e))
            await _send_json(send, 400, {"error": str(e)})
            return
        except Exception as e:  # a bug: answer with the reason, keep serving
            log.exception("evr1-rewards serve: scoring failed")
            await _send_json(send, 500, {"error": f"{type(e).__name__}: {e}"})
            return
        await _send_json(send, 200, out)

    def handle(self, body: bytes) -> bytes:
        """A large request, end to end on a worker thread: parse, score, encode the reply."""
        queries, prompts, labels = self.parse(body, self.lim.max_samples)
        inputs = openrlhf_inputs(queries, prompts, labels, self.default_type)
        return json.dumps(score_openrlhf(self.router, queries, prompts, labels, self.default_type, inputs)).encode()

    async def read_body(self, scope: Mapping[str, Any], receive: Any) -> bytes:
        limit = self.lim.max_body_bytes
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    n = int(value)
                except ValueError:
                    raise _Reject(400, f"invalid Content-Length {value!r}") from None
                if n > limit:
                    raise _Reject(413, f"body of {n} bytes is over the limit of {limit} bytes")
        first = await receive()  # usually the whole body: it arrived with the headers, no timer needed
        if first["type"] == "http.disconnect":
            raise _ClientGone()
        if not first.get("more_body", False):
            body: bytes = first.get("body", b"")
            if len(body) > limit:
                raise _Reject(413, f"body is over the limit of {limit} bytes")
            return body
        chunks: list[bytes] = [first.get("body", b"")]
        size = len(chunks[0])

        async def pull() -> None:
            nonlocal size
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _ClientGone()
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise _Reject(413, f"body is over the limit of {limit} bytes")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return

        try:
            await _within(pull(), self.lim.read_timeout_s)
        except asyncio.TimeoutError:
            raise _Reject(408, f"the body did not arrive within {self.lim.read_timeout_s:g} s") from None
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    @staticmethod
    def parse(body: bytes, max_samples: int = 1 << 62) -> tuple[list[object], list[object] | None, list[object]]:
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
        if len(data["query"]) > max_samples:
            raise _Reject(413, f"{len(data['query'])} samples in one request is over the limit of {max_samples}: split "
                          "the batch (or raise serve --max-samples)")  # fmt: skip
        return data["query"], prompts if isinstance(prompts, list) else None, labels

    def slow(self, inputs: list[RewardInput]) -> bool:
        """Batches that would hold the event loop (many samples, or code/math subprocesses) go to a thread."""
        if len(inputs) > self.lim.inline_samples:
            return True
        for inp in inputs:
            try:
                if normalize_problem_type(inp.problem_type) in _SLOW_TYPES:
                    return True
            except RewardError:
                pass
        return False


async def _send_json(send: Any, status: int, payload: Mapping[str, object] | bytes) -> None:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def make_config(app: Any, host: str, port: int, limits: ServerLimits | None = None, *, log_level: str = "info") -> Any:
    """A `uvicorn.Config` with the server limits (HTTP/1.1 keep-alive, backlog), httptools/uvloop when present."""
    require_serve_extra()
    import importlib.util

    import uvicorn

    lim = limits or ServerLimits()
    if importlib.util.find_spec("httptools"):
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    else:
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        backlog=lim.backlog,
        timeout_keep_alive=int(lim.keep_alive_s),
        http=header_deadline_protocol(base, lim.header_timeout_s),
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        log_level=log_level,
        access_log=False,
        lifespan="off",
    )


def header_deadline_protocol(base: type[Any], seconds: float) -> type[Any]:
    """uvicorn's HTTP protocol (`base`: h11 or httptools) with a deadline for each request's headers (see
    `ServerLimits.header_timeout_s`): a connection still waiting for them after `seconds` is answered 408 (a JSON
    body with the reason) and closed, and the refusal is logged."""

    class HeaderDeadline(base):  # type: ignore[misc]  # uvicorn is analysed as Any (follow_imports=skip)
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._evr1_seen: Any = None
            self._evr1_timer: Any = self.loop.call_later(seconds, self._evr1_expire)

        def data_received(self, data: bytes) -> None:
            if self._evr1_timer is None and self._evr1_waiting():
                self._evr1_timer = self.loop.call_later(seconds, self._evr1_expire)  # a new request is arriving
            super().data_received(data)
            if self.cycle is not None and self.cycle is not self._evr1_seen:  # its headers are complete
                self._evr1_seen = self.cycle
                if self._evr1_timer is not None:
                    self._evr1_timer.cancel()
                    self._evr1_timer = None

        def connection_lost(self, exc: Exception | None) -> None:
            if self._evr1_timer is not None:
                self._evr1_timer.cancel()
                self._evr1_timer = None
            super().connection_lost(exc)

        def _evr1_waiting(self) -> bool:
            cycle: Any = self.cycle
            return cycle is None or (cycle is self._evr1_seen and bool(cycle.response_complete))

        def _evr1_expire(self) -> None:
            self._evr1_timer = None
            if not self._evr1_waiting() or self.transport.is_closing():
                return
            reason = f"the request headers did not arrive within {seconds:g} s"
            client = self.client
            _log_reject({"client": client, "method": "?", "path": "?"}, 408, reason)
            body = json.dumps({"error": reason}).encode()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
                + f"content-length: {len(body)}\r\n\r\n".encode() + body
            )  # fmt: skip
            self.transport.close()

    HeaderDeadline.__name__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline


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
