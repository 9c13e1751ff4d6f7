"""The remote boundary for clusters: a SandboxFusion service (github.com/bytedance/SandboxFusion), the sandbox
verl's own code reward calls, over its `POST /run_code` HTTP API (stdlib `urllib`, no client package needed).

Request: `{"code", "language": "python", "stdin", "run_timeout", "compile_timeout", "memory_limit_MB", "files",
"fetch_files"}`; reply: `{"status": "Success" | "Failed" | "SandboxError", "message", "run_result": {"status":
"Finished" | "TimeLimitExceeded" | "Error", "return_code", "stdout", "stderr", "execution_time"}, …}` (the fields of
`sandbox_fusion.models.RunCodeRequest` / `RunCodeResponse` in the `sandbox-fusion` client, version 0.3.7). The
program goes with the same harness as locally, inlined into `code`, so scoring semantics are identical: stdout and
probe values come back, the parent compares. The service's own isolation is the boundary; run it in its container.

A `SandboxError` reply, an HTTP error or a refused connection is retried (`retries`, exponential back-off); after
that the run is reported as a sandbox failure (`RunResult.error`, logged), never as the program's failure silently.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from evr1_rewards.sandbox._process import payload, split_probes, stub_with_payload
from evr1_rewards.sandbox.types import Job, RunResult, SandboxLimits

log = logging.getLogger(__name__)


@dataclass
class SandboxFusionBackend:
    """SandboxFusion `run_code` at `url` (e.g. "http://sandbox:8080"), at most `workers` requests in flight."""

    url: str
    workers: int = 8
    retries: int = 3
    request_timeout: float = 60.0
    backoff: float = 0.5
    """Seconds before the first retry; doubled each time (at most 8 s)."""
    name: str = "sandbox_fusion"

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/").removesuffix("/run_code")
        self._gate = threading.BoundedSemaphore(max(1, self.workers))

    def request(self, job: Job, limits: SandboxLimits) -> dict[str, object]:
        return {
            "code": stub_with_payload(payload(job, limits)),
            "language": "python",
            "stdin": job.stdin,
            "run_timeout": float(limits.wall_seconds),
            "compile_timeout": 10.0,
            "memory_limit_MB": max(1, math.ceil(limits.memory_bytes / (1 << 20))),
            "files": {},
            "fetch_files": [],
        }

    def _post(self, body: bytes, timeout: float) -> dict[str, object]:
        req = urllib.request.Request(
            f"{self.url}/run_code", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            data = json.loads(resp.read(64 << 20))
        if not isinstance(data, dict):
            raise ValueError(f"run_code replied with {type(data).__name__}, not an object")
        return data

    def run(self, job: Job, limits: SandboxLimits) -> RunResult:
        body = json.dumps(self.request(job, limits)).encode()
        timeout = max(self.request_timeout, limits.wall_seconds + 30.0)
        last = ""
        start = time.monotonic()
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(8.0, self.backoff * 2 ** (attempt - 1)))
            try:
                with self._gate:
                    data = self._post(body, timeout)
            except (OSError, ValueError, urllib.error.URLError) as e:
                last = f"{type(e).__name__}: {e}"
                continue
            if data.get("status") == "SandboxError":
                last = f"SandboxError: {data.get('message')}"
                continue
            return self._result(job, limits, data, time.monotonic() - start)
        log.error("sandbox-fusion at %s failed after %d attempts: %s", self.url, self.retries + 1, last)
        return RunResult(None, "", "", False, False, time.monotonic() - start, error=f"sandbox-fusion: {last}")

    def _result(self, job: Job, limits: SandboxLimits, data: dict[str, object], wall: float) -> RunResult:
        run = data.get("run_result")
        if not isinstance(run, dict):
            compile_ = data.get("compile_result")
            detail = json.dumps(compile_)[:300] if compile_ else str(data.get("message", ""))[:300]
            return RunResult(None, "", detail, False, False, wall, error=f"sandbox-fusion: no run_result ({detail})")
        stdout = str(run.get("stdout") or "")
        truncated = len(stdout.encode("utf-8", "replace")) > limits.output_bytes
        if truncated:
            stdout = stdout[: limits.output_bytes]
        timed_out = run.get("status") == "TimeLimitExceeded"
        rc = run.get("return_code")
        own, probes = split_probes(stdout, job)
        return RunResult(
            rc if isinstance(rc, int) and not timed_out else None,
            own,
            str(run.get("stderr") or "")[-(64 << 10) :],
            timed_out,
            truncated,
            wall,
            probes,
        )
