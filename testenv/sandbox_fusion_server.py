"""A small local server that speaks SandboxFusion's `POST /run_code` API, for tests (the real service runs in a
container: github.com/bytedance/SandboxFusion). It runs each request's Python code in a plain child process — test
data only — and answers with the `RunCodeResponse` shape. When the `sandbox-fusion` client package is installed,
every request body is validated with its own `RunCodeRequest` model, so a field our backend sends wrongly fails the
test instead of being ignored.

    server = FusionServer(); server.start(); ...; server.stop()
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FusionServer:
    """`url` once started; `requests` holds every decoded request body; `fail_next` makes the next N replies
    `SandboxError` (to test retries)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.fail_next = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.requests.append(body)
                    fail = outer.fail_next > 0
                    outer.fail_next -= fail
                if self.path.rstrip("/") != "/run_code":
                    self._reply(404, {"detail": "Not Found"})
                    return
                try:
                    _validate(body)
                except Exception as e:  # pydantic.ValidationError: the real service answers 422
                    self._reply(422, {"detail": str(e)})
                    return
                if fail:
                    self._reply(200, {"status": "SandboxError", "message": "injected failure", "run_result": None})
                    return
                self._reply(200, _run(body))

            def _reply(self, code: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> FusionServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _validate(body: dict) -> None:
    try:
        from sandbox_fusion.models import RunCodeRequest
    except ImportError:
        return
    RunCodeRequest(**body)


def _run(body: dict) -> dict:
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", body["code"]], input=body.get("stdin") or "", capture_output=True, text=True,
            timeout=float(body.get("run_timeout", 10)),
        )  # fmt: skip
    except subprocess.TimeoutExpired as e:
        run = {"status": "TimeLimitExceeded", "execution_time": time.monotonic() - start, "return_code": None,
               "stdout": (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else e.stdout or "",
               "stderr": ""}  # fmt: skip
        return {"status": "Failed", "message": "", "compile_result": None, "run_result": run, "files": {}}
    run = {"status": "Finished", "execution_time": time.monotonic() - start, "return_code": proc.returncode,
           "stdout": proc.stdout, "stderr": proc.stderr}  # fmt: skip
    status = "Success" if proc.returncode == 0 else "Failed"
    return {"status": status, "message": "", "compile_result": None, "run_result": run, "executor_pod_name": None,
            "files": {}}  # fmt: skip
