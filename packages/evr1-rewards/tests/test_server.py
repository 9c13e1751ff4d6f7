"""`evr1-rewards serve` (uvicorn + starlette) over real HTTP: OpenRLHF's payload, HTTP/1.1 keep-alive, body-size and
read-time limits, JSON error bodies with the reason, and every refusal logged. Load figures: benchmarks/serve_load.py.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("uvicorn", reason="the serve extra is installed by the rewards test group")

from evr1_rewards import RewardRouter
from evr1_rewards.server import ServerLimits, create_app, make_config

PROMPT = "<|im_start|>user\nColour?<|im_end|>\n<|im_start|>assistant\n"
PAYLOAD = {
    "query": [PROMPT + "<answer>B</answer><|im_end|>", PROMPT + "<answer>3</answer><|im_end|>"],
    "prompts": [PROMPT, PROMPT],
    "labels": [json.dumps({"problem_type": "multiple choice", "ground_truth": "B"}), "4"],
}
LIMITS = ServerLimits(
    max_body_bytes=64 << 10, read_timeout_s=1.0, header_timeout_s=1.0, max_samples=8, inline_body_bytes=2048
)


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    import uvicorn

    app = create_app(RewardRouter(), default_type="numerical", limits=LIMITS)
    srv = uvicorn.Server(make_config(app, "127.0.0.1", _free_port(), LIMITS, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield srv.config.port
    srv.should_exit = True
    thread.join(timeout=10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None):  # type: ignore[no-untyped-def]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    return resp.status, data


def test_openrlhf_payload(server: int) -> None:
    status, body = _request(server, "POST", "/get_reward", json.dumps(PAYLOAD).encode())
    assert status == 200
    assert body["rewards"] == [1.0, pytest.approx(0.1)]
    assert body["scores"] == body["rewards"]
    assert body["extra_logs"] == {"accuracy": [1.0, 0.0], "format": [1.0, 1.0]}
    assert _request(server, "GET", "/health") == (200, {"status": "ok"})


def test_code_samples_are_scored_off_the_event_loop(server: int) -> None:
    label = json.dumps({"problem_type": "code", "ground_truth": [{"input": "2", "output": "4"}]})
    payload = {"query": ["<answer>print(int(input()) * 2)</answer>"], "labels": [label]}
    status, body = _request(server, "POST", "/get_reward", json.dumps(payload).encode())
    assert (status, body["rewards"]) == (200, [1.0])


def test_keep_alive_over_http_1_1(server: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
    conn.connect()
    sock = conn.sock
    for _ in range(5):
        conn.request("POST", "/get_reward", body=json.dumps(PAYLOAD).encode())
        resp = conn.getresponse()
        assert resp.version == 11
        assert resp.status == 200
        assert resp.getheader("connection", "").lower() != "close"
        resp.read()
        assert conn.sock is sock  # the same TCP connection served every request
    conn.close()


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"{not json", 400, "not valid JSON"),
        (json.dumps({"query": ["x"], "prompts": ["p"]}).encode(), 400, "labels"),
        (json.dumps({"query": ["x"], "labels": ['{"problem_type": "mcq", "ground_truth": "Q"}']}).encode(), 400,
         "option letters"),
        (json.dumps({"query": ["x"], "labels": ['{"problem_type": "rec", "ground_truth": "3"}']}).encode(), 400,
         "ambiguous"),
        (json.dumps({"query": ["x", "y"], "labels": ["1"]}).encode(), 400, "lengths differ"),
        (b"", 400, "empty body"),
        (b"x" * (65 << 10), 413, "over the limit"),
    ],
)  # fmt: skip
def test_refusals_say_why_and_are_logged(server: int, body: bytes, status: int, reason: str, caplog) -> None:  # type: ignore[no-untyped-def]
    with caplog.at_level(logging.WARNING, logger="evr1_rewards.server"):
        got_status, got = _request(server, "POST", "/get_reward", body)
    assert got_status == status
    assert reason in got["error"]
    assert any(reason in r.getMessage() and "rejected POST /get_reward" in r.getMessage() for r in caplog.records)


def test_streamed_body_over_the_limit_is_refused(server: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
    chunks = (b"x" * 8192 for _ in range(20))  # chunked transfer: no Content-Length to check up front
    conn.request("POST", "/get_reward", body=chunks, encode_chunked=True)
    resp = conn.getresponse()
    assert resp.status == 413
    assert "over the limit" in json.loads(resp.read())["error"]


def test_slow_body_is_refused_after_the_read_timeout(server: int, caplog) -> None:  # type: ignore[no-untyped-def]
    with socket.create_connection(("127.0.0.1", server), timeout=30) as s, caplog.at_level(logging.WARNING):
        s.sendall(
            b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        start = time.monotonic()
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        elapsed = time.monotonic() - start
    assert data.startswith(b"HTTP/1.1 408")
    assert b"did not arrive within 1 s" in data
    assert elapsed < 20
    assert any("408" in r.getMessage() for r in caplog.records)


def _read_reply(s: socket.socket) -> tuple[bytes, float]:
    start = time.monotonic()
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            return data, time.monotonic() - start
        data += chunk


@pytest.mark.parametrize("sent", [b"", b"POST /get_reward HTTP/1.1\r\nHost: x\r\n"], ids=["idle", "half-headers"])
def test_slowloris_connections_are_closed_after_the_header_timeout(server: int, sent: bytes, caplog) -> None:  # type: ignore[no-untyped-def]
    """uvicorn alone keeps a connection that never completes its headers open forever (slowloris): 100 such sockets
    would hold 100 file descriptors and parser states. Here each is answered 408 and closed."""
    with caplog.at_level(logging.WARNING, logger="evr1_rewards.server"):
        socks = [socket.create_connection(("127.0.0.1", server), timeout=30) for _ in range(20)]
        try:
            for s in socks:
                s.sendall(sent)
            replies = [_read_reply(s) for s in socks]
        finally:
            for s in socks:
                s.close()
    for data, elapsed in replies:
        assert data.startswith(b"HTTP/1.1 408"), data[:80]
        assert b"request headers did not arrive within 1 s" in data
        assert elapsed < 20
    assert any("408" in r.getMessage() and "headers" in r.getMessage() for r in caplog.records)
    # the server still serves: a fresh request on a new connection, and keep-alive requests after an idle pause
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
    for _ in range(2):
        conn.request("POST", "/get_reward", body=json.dumps(PAYLOAD).encode())
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()
        time.sleep(0.3)
    conn.close()


def test_slow_headers_within_the_deadline_are_served(server: int) -> None:
    body = json.dumps(PAYLOAD).encode()
    head = f"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server), timeout=30) as s:
        for part in (head[:10], head[10:30], head[30:]):
            s.sendall(part.encode())
            time.sleep(0.2)
        s.sendall(body)
        data, _ = _read_reply(s)
    assert data.startswith(b"HTTP/1.1 200"), data[:80]
    assert json.loads(data.split(b"\r\n\r\n", 1)[1])["rewards"][0] == 1.0


def test_a_batch_over_max_samples_is_refused(server: int) -> None:
    n = LIMITS.max_samples + 1
    status, body = _request(
        server, "POST", "/get_reward", json.dumps({"query": ["1"] * n, "labels": ["1"] * n}).encode()
    )
    assert status == 413
    assert f"{n} samples in one request is over the limit of {LIMITS.max_samples}" in body["error"]


def test_large_bodies_are_scored_on_a_worker_thread_with_the_same_result(server: int) -> None:
    """Bodies above `inline_body_bytes` are parsed, scored and encoded off the event loop: same answer, and a
    malformed large body still gets its 400 with the reason."""
    pad = " " * 4000  # over LIMITS.inline_body_bytes (2048)
    payload = {**PAYLOAD, "query": [q + pad for q in PAYLOAD["query"]]}
    status, body = _request(server, "POST", "/get_reward", json.dumps(payload).encode())
    assert status == 200
    assert body["rewards"] == [1.0, pytest.approx(0.1)]
    status, body = _request(server, "POST", "/get_reward", json.dumps({"query": ["x" + pad]}).encode())
    assert (status, "labels" in body["error"]) == (400, True)
    n = LIMITS.max_samples + 1
    status, body = _request(
        server, "POST", "/get_reward", json.dumps({"query": [pad] * n, "labels": ["1"] * n}).encode()
    )
    assert status == 413


def test_unknown_paths_answer_json(server: int) -> None:
    status, body = _request(server, "GET", "/nope")
    assert status == 404
    assert "/get_reward" in body["error"]


def test_cli_serve_subprocess() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "evr1_rewards.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--problem-type", "numerical", "--log-level", "warning", "--max-samples", "2", "--header-timeout", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, body = _request(port, "POST", "/get_reward", json.dumps(PAYLOAD).encode())
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        assert status == 200
        assert body["rewards"][0] == 1.0
        three = {"query": ["1"] * 3, "labels": ["1"] * 3}
        status, body = _request(port, "POST", "/get_reward", json.dumps(three).encode())
        assert (status, "over the limit of 2" in body["error"]) == (413, True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_without_the_extra_serve_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from evr1_rewards import MissingExtraError
    from evr1_rewards.cli import main

    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with pytest.raises(MissingExtraError, match=r"evr1-rewards\[serve\]"):
        create_app(RewardRouter())
    assert main(["serve", "--port", "0"]) == 2
