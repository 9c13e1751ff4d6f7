"""`evr1-rewards serve` (uvicorn + starlette) over real HTTP: OpenRLHF's payload, HTTP/1.1 keep-alive, body-size and
read-time limits, JSON error bodies with the reason, and every refusal logged. Load figures: benchmarks/serve_load.py.

Then the server facing untrusted clients: tokens, the bind check, server-side ceilings on sandbox limits, a fair
share of sandbox slots with bounded queues (429 / 503 with Retry-After), malformed input of any depth answered 4xx.
Each attack: the attacker's request, the refusal.
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

from evr1_rewards import RewardConfigError, RewardRouter
from evr1_rewards.cli import main
from evr1_rewards.server import (
    DEFAULT_CEILINGS,
    TOKEN_ENV,
    FairGate,
    ServerLimits,
    capped_extras,
    check_bind,
    create_app,
    is_loopback,
    make_config,
    server_tokens,
)

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

    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with pytest.raises(MissingExtraError, match=r"evr1-rewards\[serve\]"):
        create_app(RewardRouter())
    assert main(["serve", "--port", "0"]) == 2


# --- untrusted clients ---

ONE = {"query": [PROMPT + "<answer>B</answer>"], "prompts": [PROMPT], "labels": ["B"]}


def _start(app, limits: ServerLimits):  # type: ignore[no-untyped-def]
    import uvicorn

    srv = uvicorn.Server(make_config(app, "127.0.0.1", _free_port(), limits, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    return srv, thread


@pytest.fixture(scope="module")
def guarded():  # type: ignore[no-untyped-def]
    limits = ServerLimits(client_queue=0)  # any code answer is over this client's queue: 429
    srv, thread = _start(create_app(RewardRouter(), "multiple choice", limits, tokens=("s3cret", "other")), limits)
    yield srv.config.port
    srv.should_exit = True
    thread.join(timeout=10)


def test_without_a_token_scoring_is_refused(guarded: int) -> None:
    body = json.dumps(ONE).encode()
    for path, headers in (
        ("/get_reward", {}),
        ("/get_reward", {"Authorization": "Bearer wrong"}),
        ("/get_reward?token=s3cre", {}),
        ("/get_reward?token=", {}),
        ("/get_reward", {"Authorization": "s3cret"}),  # not a bearer credential
    ):
        status, reply = _request(guarded, "POST", path, body, headers)
        assert status == 401, (path, headers)
        assert "token" in reply["error"]


def test_a_valid_token_in_the_header_or_the_url_is_served(guarded: int) -> None:
    body = json.dumps(ONE).encode()
    for path, headers in (
        ("/get_reward", {"Authorization": "Bearer s3cret"}),
        ("/get_reward?token=s3cret", {}),  # what OpenRLHF's --reward.remote_url can carry
        ("/get_reward?token=other", {}),
    ):
        status, reply = _request(guarded, "POST", path, body, headers)
        assert (status, reply["rewards"]) == (200, [1.0]), (path, headers)
    assert _request(guarded, "GET", "/health")[0] == 200  # health needs no token


def test_a_full_client_queue_is_429_with_retry_after(guarded: int) -> None:
    import http.client

    label = json.dumps({"problem_type": "code", "ground_truth": [{"input": "", "output": "1"}]})
    conn = http.client.HTTPConnection("127.0.0.1", guarded, timeout=30)
    conn.request("POST", "/get_reward?token=s3cret", json.dumps({"query": ["print(1)"], "labels": [label]}))
    resp = conn.getresponse()
    reply = json.loads(resp.read())
    conn.close()
    assert resp.status == 429
    assert int(resp.getheader("Retry-After") or 0) >= 1
    assert "queued" in reply["error"]


def test_binding_the_network_needs_a_token(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost")] == [True] * 3
    assert [is_loopback(h) for h in ("0.0.0.0", "10.1.2.3", "myhost")] == [False] * 3
    with pytest.raises(RewardConfigError, match=TOKEN_ENV):
        check_bind("0.0.0.0", ())
    check_bind("0.0.0.0", ("t",))
    check_bind("127.0.0.1", ())
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert TOKEN_ENV in capsys.readouterr().err
    assert server_tokens(["a", " "], {TOKEN_ENV: "b, a,"}) == ("a", "b")


def test_request_extras_can_lower_limits_never_raise_them() -> None:
    ceil = DEFAULT_CEILINGS
    raised = capped_extras({"timeout": 3600, "memory_mb": 1 << 20, "max_tests": 10**9, "math_timeout": 1e9}, ceil)
    assert raised == dict(ceil)
    lowered = capped_extras({"timeout": 1, "memory_mb": 64, "rel_tol": 0.5}, ceil)
    assert (lowered["timeout"], lowered["memory_mb"], lowered["rel_tol"]) == (1, 64, 0.5)
    assert capped_extras({}, {"timeout": 2.0}) == {"timeout": 2.0}  # a lower ceiling holds without the extra too


def test_a_memory_hungry_program_cannot_raise_its_memory_limit() -> None:
    # The attack: extras {"memory_mb": 4096} lets a 1.5 GiB program pass (it scored 1.0). With the server's ceiling
    # (1024 MiB) it fails its test.
    pytest.importorskip("evr1_rewards.sandbox.bwrap")
    from evr1_rewards.sandbox import SandboxUnavailableError, backend_for

    try:
        backend_for(None)
    except SandboxUnavailableError:
        pytest.skip("no sandbox on this machine (bubblewrap is installed in the project's test environment)")
    limits = ServerLimits()
    label = json.dumps({"problem_type": "code", "ground_truth": [{"input": "", "output": "ok"}],
                        "extras": {"memory_mb": 4096, "timeout": 60}})  # fmt: skip
    program = "x = bytearray(1536 << 20)\nprint('ok')"
    srv, thread = _start(create_app(RewardRouter(), None, limits), limits)
    try:
        status, reply = _request(
            srv.config.port, "POST", "/get_reward", json.dumps({"query": [program], "labels": [label]}).encode()
        )
    finally:
        srv.should_exit = True
        thread.join(timeout=10)
    assert status == 200
    assert reply["extra_logs"]["accuracy"] == [0.0]


@pytest.mark.parametrize("depth", [100, 1_000, 10_000, 100_000])
def test_malformed_input_of_any_depth_is_a_4xx_with_its_reason(depth: int) -> None:
    limits = ServerLimits(max_body_bytes=8 << 20)
    srv, thread = _start(create_app(RewardRouter(), "multiple choice", limits), limits)
    port = srv.config.port
    deep_obj = '{"a": ' * depth + "1" + "}" * depth
    deep_list = "[" * depth + "]" * depth
    bodies = [
        json.dumps({"query": ["x"], "labels": ['{"ground_truth": ' * depth + '"B"' + "}" * depth]}),  # the issue's
        json.dumps(
            {"query": ["x"], "labels": ['{"problem_type": "temporal_grounding", "ground_truth": ' + deep_obj + "}"]}
        ),
        json.dumps({"query": ["x"], "labels": ['{"ground_truth": "B", "extras": ' + deep_obj + "}"]}),
        '{"query": ["x"], "labels": [' + deep_list + "]}",
        '{"query": ' + deep_list + ', "labels": []}',
        deep_list,
    ]
    try:
        for body in bodies:
            status, reply = _request(port, "POST", "/get_reward", body.encode())
            assert status in (200, 400, 413), (depth, body[:60], status, reply)
            if status != 200:
                assert reply["error"], body[:60]
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


def test_fair_gate_serves_a_newcomer_at_the_next_free_slot() -> None:
    # Two clients saturate both slots and keep more answers waiting; a third arrives. The first slot that frees up
    # goes to the third (its wait is at most one running answer's time limit), not to the clients already served.
    gate = FairGate(2, client_queue=100, total_queue=100)
    order: list[str] = []
    hold = {name: threading.Event() for name in ("a1", "b1", "a2", "b2", "c1")}
    started = threading.Barrier(2 + 1)

    def answer(client: str, name: str, first: bool) -> None:
        with gate.slot(client):
            order.append(name)
            if first:
                started.wait()
            hold[name].wait(10)

    threads = [
        threading.Thread(target=answer, args=("a", "a1", True)),
        threading.Thread(target=answer, args=("b", "b1", True)),
    ]
    for t in threads:
        t.start()
    started.wait()
    waiting = [threading.Thread(target=answer, args=(c, n, False)) for c, n in (("a", "a2"), ("b", "b2"))]
    for t in waiting:
        t.start()
    time.sleep(0.2)  # a2 and b2 queue first (ordering only, nothing timed is asserted)
    late = threading.Thread(target=answer, args=("c", "c1", False))
    late.start()
    time.sleep(0.2)
    hold["a1"].set()  # one slot frees up
    deadline = time.monotonic() + 10
    while len(order) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert order[:3] == ["a1", "b1", "c1"]
    for e in hold.values():
        e.set()
    for t in [*threads, *waiting, late]:
        t.join(10)
    assert sorted(order) == ["a1", "a2", "b1", "b2", "c1"]


def test_fair_gate_bounds_each_queue() -> None:
    gate = FairGate(1, client_queue=3, total_queue=5)
    assert gate.admit("a", 3) is None
    assert gate.admit("a", 1) == "client"
    assert gate.admit("b", 2) is None
    assert gate.admit("c", 1) == "server"
    gate.done("a", 3)
    assert gate.admit("c", 1) is None


def test_the_documented_network_command_serves_with_its_token() -> None:
    # docs/rewards.md: EVR1_REWARDS_TOKEN=SECRET evr1-rewards serve --host 0.0.0.0 --port 8000, and OpenRLHF's
    # --reward.remote_url "http://HOST:8000/get_reward?token=SECRET"
    import os

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "evr1_rewards.cli", "serve", "--host", "0.0.0.0", "--port", str(port),
         "--problem-type", "multiple choice", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, TOKEN_ENV: "SECRET"},
    )  # fmt: skip
    body = json.dumps(ONE).encode()
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, reply = _request(port, "POST", "/get_reward?token=SECRET", body)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        assert (status, reply["rewards"]) == (200, [1.0])
        assert _request(port, "POST", "/get_reward", body)[0] == 401
    finally:
        proc.terminate()
        proc.wait(timeout=30)
