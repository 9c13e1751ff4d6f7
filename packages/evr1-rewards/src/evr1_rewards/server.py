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
  the `evr1_rewards.server` logger with the reason, the path and the client; malformed input of any shape or depth
  is a 4xx with its reason, never a 500;
- trust: with tokens (`tokens=`, `serve --token` / `EVR1_REWARDS_TOKEN`) every scoring request must present one
  (`Authorization: Bearer T`, or `?token=T` in the URL, which is what OpenRLHF's `--reward.remote_url` can carry),
  compared in constant time; binding a non-loopback address without a token is refused. A request's extras may
  lower the sandbox limits (`timeout`, `memory_mb`, `max_tests`, `math_timeout`), never raise them above the
  server's ceilings (`ServerLimits.ceilings`). Code answers take sandbox slots through a fair gate: the client
  (its token, else its address) with the fewest slots in use goes first, so two clients that saturate the sandbox
  delay a third one's answer by at most one answer's time limit; a client's queue and the whole queue are bounded,
  and a request over them is answered 429 / 503 with `Retry-After`.

Routes: `POST /get_reward` (any path but /health): OpenRLHF's `{"query", "prompts", "labels"}` -> `{"rewards",
"scores", "extra_logs"}` (see `evr1_rewards.integrations.openrlhf`); `GET /health` -> `{"status": "ok"}`.
Importing this module needs nothing beyond the standard library; the server packages load when an app is built.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import math
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs

from evr1_rewards.errors import MissingExtraError, RewardConfigError, RewardError
from evr1_rewards.integrations.openrlhf import openrlhf_inputs, openrlhf_reply
from evr1_rewards.registry import normalize_problem_type
from evr1_rewards.router import RewardRouter
from evr1_rewards.types import RewardInput, RewardResult
from evr1_rewards.vocabulary import CODE

log = logging.getLogger(__name__)

_SLOW_TYPES = frozenset({"code", "math"})
_TOO_DEEP = "input nested too deeply to score (a label, ground truth or extras value)"
"""The reason for a RecursionError while scoring: a ground truth or label nested deeper than any scorer reads."""
TOKEN_ENV = "EVR1_REWARDS_TOKEN"
"""Environment variable with the server's token(s), comma-separated (preferred to `--token`: not in `ps`)."""

DEFAULT_CEILINGS: Mapping[str, float] = {"timeout": 5.0, "memory_mb": 1024.0, "max_tests": 1000.0, "math_timeout": 5.0}
"""Server-side ceilings on the limits a request's extras can set: the code scorer's CPU seconds per test, memory per
program and tests per answer, the math scorer's worker timeout (the scorers' own defaults)."""


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
    ceilings: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_CEILINGS))
    """The most each limit-setting extra may be (see DEFAULT_CEILINGS): a larger value is lowered to it."""
    code_slots: int | None = None
    """Code answers scored at once (default: the sandbox's workers); each holds a slot of the fair gate."""
    client_queue: int = 256
    """Code answers one client may have waiting or running; more is refused (429)."""
    total_queue: int = 1024
    """Code answers all clients together may have waiting or running; more is refused (503)."""


def capped_extras(extras: Mapping[str, object], ceilings: Mapping[str, float]) -> dict[str, object]:
    """`extras` with every limit lowered to its ceiling; an absent limit is set to the ceiling (the scorers' defaults
    equal the default ceilings, and a lower ceiling must hold for requests that do not name the limit)."""
    out = dict(extras)
    for key, ceiling in ceilings.items():
        v = out.get(key)
        if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > ceiling):
            out[key] = ceiling
    return out


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, `localhost`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def server_tokens(cli_tokens: Sequence[str] = (), env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The tokens from the command line and `EVR1_REWARDS_TOKEN` (comma-separated), empty ones dropped."""
    env = os.environ if env is None else env
    found = [t.strip() for t in cli_tokens] + [t.strip() for t in env.get(TOKEN_ENV, "").split(",")]
    return tuple(dict.fromkeys(t for t in found if t))


def check_bind(host: str, tokens: Sequence[str]) -> None:
    """RewardConfigError when `host` is reachable from other machines and no token protects the server."""
    if not tokens and not is_loopback(host):
        raise RewardConfigError(
            f"binding {host} exposes the reward server (and its code sandbox) to the network: set a token with "
            f"{TOKEN_ENV}=SECRET (or --token SECRET) and give clients the URL "
            "http://HOST:PORT/get_reward?token=SECRET, or bind 127.0.0.1"
        )


class FairGate:
    """Slots for code answers, shared fairly between clients: a free slot goes to the waiting client with the fewest
    slots in use, among equals to the one served longest ago. Admission is bounded per client and in total.
    """

    def __init__(self, slots: int, client_queue: int, total_queue: int) -> None:
        self.slots, self.client_queue, self.total_queue = max(1, slots), client_queue, total_queue
        self._cond = threading.Condition()
        self._free = self.slots
        self._in_use: dict[str, int] = {}
        self._admitted: dict[str, int] = {}
        self._total = 0
        self._waiters: list[tuple[int, str]] = []
        self._ticket = 0
        self._served: dict[str, int] = {}
        self._grants = 0

    def admit(self, client: str, n: int) -> str | None:
        """Reserve `n` answers for `client`; None, or "client" / "server" when that queue is full (nothing reserved)."""
        with self._cond:
            if self._admitted.get(client, 0) + n > self.client_queue:
                return "client"
            if self._total + n > self.total_queue:
                return "server"
            self._admitted[client] = self._admitted.get(client, 0) + n
            self._total += n
            return None

    def done(self, client: str, n: int = 1) -> None:
        """Give back `n` admitted answers (scored, or never run)."""
        with self._cond:
            self._admitted[client] = self._admitted.get(client, 0) - n
            if self._admitted[client] <= 0:
                del self._admitted[client]
            self._total -= n

    def _first(self) -> tuple[int, str]:
        """Fewest slots in use, then the client served longest ago (round robin: a newcomer never waits behind a
        client that was just served), then first come."""
        return min(self._waiters, key=lambda w: (self._in_use.get(w[1], 0), self._served.get(w[1], -1), w[0]))

    @contextmanager
    def slot(self, client: str) -> Iterator[None]:
        """Hold one slot while scoring one answer (blocks until this client's turn)."""
        with self._cond:
            self._ticket += 1
            me = (self._ticket, client)
            self._waiters.append(me)
            while not (self._free > 0 and self._first() == me):
                self._cond.wait()
            self._waiters.remove(me)
            self._grants += 1
            if len(self._served) >= 4096:  # forget clients that hold and want nothing
                busy = set(self._in_use) | {w[1] for w in self._waiters}
                self._served = {k: v for k, v in self._served.items() if k in busy}
            self._served[client] = self._grants
            self._free -= 1
            self._in_use[client] = self._in_use.get(client, 0) + 1
            self._cond.notify_all()  # another slot may be free for the next waiter
        try:
            yield
        finally:
            with self._cond:
                self._free += 1
                self._in_use[client] -= 1
                if not self._in_use[client]:
                    del self._in_use[client]
                self._cond.notify_all()


class _Reject(Exception):
    def __init__(self, status: int, reason: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = tuple(headers)


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


def create_app(
    router: RewardRouter,
    default_type: str | None = None,
    limits: ServerLimits | None = None,
    *,
    tokens: Sequence[str] = (),
) -> Any:
    """The ASGI app: POSTs go straight to the scoring endpoint (the hot path, no routing or request objects), every
    other request to a starlette `Router` (health, 404). With `tokens`, a POST must present one of them (401
    otherwise). Raises MissingExtraError without the `serve` extra."""
    require_serve_extra()
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route, Router

    lim = limits or ServerLimits()
    if default_type:
        normalize_problem_type(default_type)
    endpoint = _ScoreEndpoint(router, default_type, lim, tuple(tokens))

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

    def __init__(
        self, router: RewardRouter, default_type: str | None, lim: ServerLimits, tokens: tuple[str, ...]
    ) -> None:
        self.router, self.default_type, self.lim = router, default_type, lim
        self.tokens = tuple(t.encode() for t in tokens)
        self.gate = FairGate(lim.code_slots or _sandbox_workers(router), lim.client_queue, lim.total_queue)
        ceiling = lim.ceilings.get("timeout", DEFAULT_CEILINGS["timeout"])
        self.retry_after = str(max(1, math.ceil(2 * ceiling + 2)))
        """One code answer's wall limit per test (the code scorer's): when a slot frees up again at the latest."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        from starlette.concurrency import run_in_threadpool

        try:
            client = self.authorize(scope)
            body = await self.read_body(scope, receive)
            big = len(body) > self.lim.inline_body_bytes
            inputs = await run_in_threadpool(self.inputs, body) if big else self.inputs(body)
            admitted = self.admit(client, inputs)
            try:
                if big:  # the reply is large too: encode it off the event loop
                    out: Mapping[str, object] | bytes = await run_in_threadpool(
                        lambda: json.dumps(self.run(inputs, client)).encode()
                    )
                elif self.slow(inputs):
                    out = await run_in_threadpool(self.run, inputs, client)
                else:
                    out = self.run(inputs, client)
            finally:
                self.gate.done(client, admitted)
        except _Reject as e:
            _log_reject(scope, e.status, e.reason)
            await _send_json(send, e.status, {"error": e.reason}, e.headers)
            return
        except _ClientGone:
            log.warning("evr1-rewards serve: client disconnected while sending %s", scope.get("path"))
            return
        except (RewardError, RecursionError) as e:
            reason = str(e) if isinstance(e, RewardError) else _TOO_DEEP
            _log_reject(scope, 400, reason)
            await _send_json(send, 400, {"error": reason})
            return
        except Exception as e:  # a bug: answer with the reason, keep serving
            log.exception("evr1-rewards serve: scoring failed")
            await _send_json(send, 500, {"error": f"{type(e).__name__}: {e}"})
            return
        await _send_json(send, 200, out)

    def authorize(self, scope: Mapping[str, Any]) -> str:
        """The client's fairness key (its token's index, else its address); 401 without a valid token."""
        if not self.tokens:
            client = scope.get("client")
            return str(client[0]) if client else "?"
        presented = b""
        for name, value in scope["headers"]:
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                presented = value[7:].strip()
        if not presented and scope.get("query_string"):
            values = parse_qs(scope["query_string"].decode("latin-1")).get("token")
            presented = values[-1].encode("latin-1", "replace") if values else b""
        match = -1
        for i, token in enumerate(self.tokens):  # every token compared, in constant time
            if hmac.compare_digest(presented, token):
                match = i
        if match < 0:
            raise _Reject(401, "a token is required: send 'Authorization: Bearer TOKEN' or POST to "
                          "/get_reward?token=TOKEN", [(b"www-authenticate", b"Bearer")])  # fmt: skip
        return f"token{match}"

    def inputs(self, body: bytes) -> list[RewardInput]:
        """The request's samples, with their limit-setting extras lowered to the server's ceilings."""
        queries, prompts, labels = self.parse(body, self.lim.max_samples)
        try:
            inputs = openrlhf_inputs(queries, prompts, labels, self.default_type)
        except RecursionError:
            raise _Reject(400, "a label is nested too deeply") from None
        return [replace(i, extras=capped_extras(i.extras or {}, self.lim.ceilings)) for i in inputs]

    def admit(self, client: str, inputs: Sequence[RewardInput]) -> int:
        """Reserve the request's code answers in the fair gate (429 / 503 with Retry-After when a queue is full)."""
        n = sum(1 for i in inputs if _type_of(i) == CODE)
        if n:
            full = self.gate.admit(client, n)
            if full is not None:
                headers = [(b"retry-after", self.retry_after.encode())]
                if full == "client":
                    raise _Reject(429, f"this client already has {self.lim.client_queue} code answers queued or "
                                  "running: retry later", headers)  # fmt: skip
                raise _Reject(503, f"the code sandbox queue is full ({self.lim.total_queue} answers): retry later",
                              headers)  # fmt: skip
        return n

    def run(self, inputs: list[RewardInput], client: str) -> dict[str, object]:
        """Score one request: code answers through the fair gate (in parallel), the rest as one batch."""
        code = [i for i, inp in enumerate(inputs) if _type_of(inp) == CODE]
        if not code:
            return openrlhf_reply(self.router.score_batch(inputs))

        def gated(i: int) -> RewardResult:
            with self.gate.slot(client):
                return self.router.score(inputs[i])

        # A pool per request, never a shared one: a shared pool's FIFO queue would make a newcomer's answer wait
        # behind every queued answer of the saturating clients before it even reached the fair gate.
        with ThreadPoolExecutor(max_workers=min(len(code), self.gate.slots), thread_name_prefix="evr1-code") as pool:
            futures = {i: pool.submit(gated, i) for i in code}
            rest = [i for i in range(len(inputs)) if i not in futures]
            results = dict(zip(rest, self.router.score_batch([inputs[i] for i in rest]), strict=True))
        return openrlhf_reply([results[i] if i in results else futures[i].result() for i in range(len(inputs))])

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
        chunks: list[bytes] = []
        size = 0

        def take(message: Mapping[str, Any]) -> bool:
            """Keep one message's chunk of the body; whether more is coming."""
            nonlocal size
            if message["type"] == "http.disconnect":
                raise _ClientGone()
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                raise _Reject(413, f"body is over the limit of {limit} bytes")
            return bool(message.get("more_body", False))

        async def pull() -> None:
            while take(await receive()):
                pass

        # Usually the whole body is the first message: it arrived with the headers, no timer needed.
        if take(await receive()):
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

    def slow(self, inputs: Sequence[RewardInput]) -> bool:
        """Batches that would hold the event loop (many samples, or code/math subprocesses) go to a thread."""
        return len(inputs) > self.lim.inline_samples or any(_type_of(i) in _SLOW_TYPES for i in inputs)


def _type_of(inp: RewardInput) -> str | None:
    """The canonical problem type, or None for an unknown one (scoring reports it)."""
    try:
        return normalize_problem_type(inp.problem_type)
    except RewardError:
        return None


def _sandbox_workers(router: RewardRouter) -> int:
    """How many programs the router's sandbox runs at once (1 when there is none: code is refused anyway)."""
    from evr1_rewards.sandbox import SandboxUnavailableError, backend_for

    try:
        return max(1, int(getattr(backend_for(router.sandbox), "workers", 1)))
    except SandboxUnavailableError:
        return 1


async def _send_json(
    send: Any, status: int, payload: Mapping[str, object] | bytes, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})  # fmt: skip
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

    class HeaderDeadline(base):  # type: ignore[misc]  # uvicorn is Any to mypy (follow_imports=skip); its protocol class is picked at run time
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
            _log_reject({"client": self.client, "method": "?", "path": "?"}, 408, reason)
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
    tokens: Sequence[str] = (),
) -> None:
    """Run the server until interrupted (MissingExtraError without the `serve` extra; RewardConfigError for a
    non-loopback `host` without `tokens`)."""
    check_bind(host, tokens)
    app = create_app(router, default_type, limits, tokens=tokens)
    config = make_config(app, host, port, limits, log_level=log_level)
    import uvicorn

    uvicorn.Server(config).run()
