"""The SandboxFusion backend against a local server that speaks its `run_code` API (testenv/sandbox_fusion_server.py),
checked with the real `sandbox-fusion` client package: its models validate every request we send, and its own
`run_code` client talks to the same server. Same scoring semantics as the local boundary, case for case."""

from __future__ import annotations

import json
import logging

import pytest

from evr1_rewards import RewardInput, RewardRouter
from evr1_rewards.sandbox import SandboxConfig
from evr1_rewards.sandbox.fusion import SandboxFusionBackend
from evr1_rewards.sandbox.types import Job, SandboxLimits

STDIO = json.dumps([{"input": "1 2\n", "output": "3\n"}, {"input": "10 20\n", "output": "30\n"}])
ASSERTS = json.dumps(["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"])
CALL = json.dumps({"fn_name": "add", "inputs": [[1, 2], [5, 5]], "outputs": [3, 10]})
CASES = [
    ("a, b = map(int, input().split())\nprint(a + b)", STDIO, 1.0),
    ("print(3)", STDIO, 0.5),
    ("def add(a, b):\n    return a - b if a < 0 else a + b", ASSERTS, 2 / 3),
    ("def add(a, b): return a + b", CALL, 1.0),
    ("exit(0)", ASSERTS, 0.0),
    ("class E:\n    def __eq__(self, o): return True\ndef add(a, b): return E()", ASSERTS, 0.0),
]


@pytest.fixture(scope="module")
def server(testenv):  # type: ignore[no-untyped-def]
    s = testenv("sandbox_fusion_server").FusionServer().start()
    yield s
    s.stop()


def test_the_real_client_speaks_to_the_test_server(server) -> None:  # type: ignore[no-untyped-def]
    from sandbox_fusion import RunCodeRequest, run_code

    reply = run_code(RunCodeRequest(code="print(input()[::-1])", stdin="abc", language="python"), endpoint=server.url)
    assert reply.status.value == "Success"
    assert reply.run_result.stdout == "cba\n"


def test_requests_match_the_client_models(server) -> None:  # type: ignore[no-untyped-def]
    from sandbox_fusion.models import RunCodeRequest

    backend = SandboxFusionBackend(server.url)
    body = backend.request(Job("print(1)", "x"), SandboxLimits())
    RunCodeRequest(**body)  # the client's own model accepts every field we send
    assert body["language"] == "python"
    assert body["stdin"] == "x"
    r = backend.run(Job("print(1)"), SandboxLimits())
    assert r.ok
    assert r.stdout == "1\n"


@pytest.mark.parametrize(("program", "tests", "expected"), CASES)
def test_same_scores_as_the_local_boundary(server, program: str, tests: str, expected: float) -> None:  # type: ignore[no-untyped-def]
    inp = RewardInput(response=f"<answer>{program}</answer>", ground_truth=tests, problem_type="code",
                      extras={"timeout": 2})  # fmt: skip
    remote = RewardRouter(sandbox=SandboxConfig(url=server.url)).score(inp)
    local = RewardRouter().score(inp)
    assert remote.accuracy == pytest.approx(expected), remote.details
    assert local.accuracy == pytest.approx(expected), local.details


def test_expected_values_never_reach_the_service(server) -> None:  # type: ignore[no-untyped-def]
    server.requests.clear()
    RewardRouter(sandbox=server.url).score(
        RewardInput(response="<answer>def add(a, b): return 0</answer>", ground_truth='["assert add(1, 2) == 982451653"]',
                    problem_type="code")
    )  # fmt: skip
    assert server.requests
    assert all("982451653" not in json.dumps(r) for r in server.requests)


def test_time_limit_exceeded_is_a_timeout(server) -> None:  # type: ignore[no-untyped-def]
    r = SandboxFusionBackend(server.url).run(Job("import time\ntime.sleep(30)"), SandboxLimits(wall_seconds=1))
    assert r.timed_out
    assert not r.ok
    assert r.error is None  # the program's fault, not the service's


def test_service_errors_are_retried_then_reported(server, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    backend = SandboxFusionBackend(server.url, retries=2, backoff=0.01)
    server.fail_next = 2
    r = backend.run(Job("print(7)"), SandboxLimits())
    assert r.ok  # two SandboxError replies, then success
    assert r.stdout == "7\n"
    server.fail_next = 3
    with caplog.at_level(logging.ERROR):
        r = backend.run(Job("print(7)"), SandboxLimits())
    assert not r.ok
    assert r.error is not None
    assert "SandboxError" in r.error
    assert "failed after 3 attempts" in caplog.text
    down = SandboxFusionBackend("http://127.0.0.1:9", retries=0).run(Job("print(7)"), SandboxLimits())
    assert down.error is not None
    assert not down.ok
