"""OpenRLHF adapter: `--reward.remote_url http://127.0.0.1:P/get_reward` (run `evr1-rewards serve`) or a `.py` file
that re-exports `reward_func`.

OpenRLHF's single-turn executor sends `{"query": [...], "prompts": [...], "labels": [...]}` where `query` is the
decoded prompt + response *with* special tokens, and reads `rewards`, `scores` and `extra_logs` from the reply.
A label is either a plain ground truth (scored with the server's default problem type) or a JSON object
`{"problem_type": ..., "ground_truth": ..., "extras": {...}}` (put it in the dataset's `--data.label_key` column).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from evr1_rewards.errors import RewardError
from evr1_rewards.router import RewardRouter
from evr1_rewards.types import RewardInput

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 << 20
_TRAILING_SPECIAL = re.compile(r"(?:\s*<\|[A-Za-z0-9_]{1,40}\|>|\s*</s>)+\s*$")
_ASSISTANT_MARKERS = (
    "<|im_start|>assistant\n",
    "<|im_start|>assistant",
    "<|start_header_id|>assistant<|end_header_id|>",
)


def response_from_query(query: str, prompt: str | None) -> str:
    """The model's response inside OpenRLHF's `query` (= prompt + response, special tokens kept)."""
    text = query
    if prompt and query.startswith(prompt):
        text = query[len(prompt) :]
    else:
        for marker in _ASSISTANT_MARKERS:
            pos = query.rfind(marker)
            if pos >= 0:
                text = query[pos + len(marker) :]
                break
    return _TRAILING_SPECIAL.sub("", text)


def parse_label(label: object, default_type: str | None) -> tuple[str, object, dict]:
    """(problem_type, ground_truth, extras) from an OpenRLHF label."""
    obj: object = label
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            obj = json.loads(label)
        except ValueError:
            obj = label
    if isinstance(obj, Mapping) and "ground_truth" in obj:
        ptype = obj.get("problem_type") or default_type
        extras = obj.get("extras") or {}
        if not isinstance(extras, Mapping):
            raise RewardError(f"label extras must be an object, got {extras!r}")
        if not ptype:
            raise RewardError("label has no problem_type and the server has no default (--problem-type)")
        return str(ptype), obj["ground_truth"], dict(extras)
    if not default_type:
        raise RewardError(
            'plain labels need a default problem type (serve --problem-type TYPE) or JSON labels {"problem_type", "ground_truth"}'
        )
    return default_type, label, {}


def score_openrlhf(
    router: RewardRouter,
    queries: Sequence[str],
    prompts: Sequence[str] | None,
    labels: Sequence[object],
    default_type: str | None = None,
) -> dict[str, object]:
    """The JSON reply for one OpenRLHF request."""
    if len(labels) != len(queries) or (prompts is not None and len(prompts) != len(queries)):
        raise RewardError(f"query/prompts/labels lengths differ: {len(queries)}, {len(prompts or [])}, {len(labels)}")
    inputs = []
    for i, (query, label) in enumerate(zip(queries, labels, strict=False)):
        ptype, gt, extras = parse_label(label, default_type)
        prompt = prompts[i] if prompts is not None else None
        inputs.append(
            RewardInput(
                response=response_from_query(str(query), prompt), ground_truth=gt, problem_type=ptype,
                extras=extras, sample_id=str(i),
            )
        )  # fmt: skip
    results = router.score_batch(inputs)
    rewards = [r.overall for r in results]
    return {
        "rewards": rewards,
        "scores": rewards,
        "extra_logs": {"accuracy": [r.accuracy for r in results], "format": [r.format for r in results]},
    }


_FILE_ROUTER = RewardRouter()


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[object]) -> dict[str, object]:
    """OpenRLHF's file-based hook (`--reward.remote_url my_reward.py` re-exporting this). Labels must be JSON objects
    with a `problem_type`. Returns torch tensors when torch is importable (as OpenRLHF expects), else lists."""
    out = score_openrlhf(_FILE_ROUTER, queries, prompts, labels)
    try:
        import torch  # heavy: only inside the training process that already has it
    except ImportError:
        return out
    logs = out["extra_logs"]
    assert isinstance(logs, dict)
    return {
        "rewards": torch.tensor(out["rewards"]),
        "scores": torch.tensor(out["scores"]),
        "extra_logs": {k: torch.tensor(v) for k, v in logs.items()},
    }


def make_server(host: str, port: int, router: RewardRouter, default_type: str | None = None) -> ThreadingHTTPServer:
    """A stdlib HTTP server: POST (any path, e.g. /get_reward) → scores; GET /health → {"status": "ok"}."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "evr1-rewards"

        def _reply(self, code: int, payload: Mapping[str, object]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/health", ""):
                self._reply(200, {"status": "ok"})
            else:
                self._reply(404, {"error": f"unknown path {self.path}; POST the OpenRLHF payload to /get_reward"})

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 < length <= MAX_BODY_BYTES:
                self._reply(400, {"error": f"need a JSON body of 1..{MAX_BODY_BYTES} bytes (Content-Length)"})
                return
            try:
                data = json.loads(self.rfile.read(length))
                if not isinstance(data, Mapping) or not isinstance(data.get("query"), list):
                    raise RewardError('body must be {"query": [...], "prompts": [...], "labels": [...]}')
                labels = data.get("labels")
                if not isinstance(labels, list):
                    raise RewardError("body has no 'labels' list (set --data.label_key in OpenRLHF)")
                prompts = data.get("prompts")
                out = score_openrlhf(
                    router, data["query"], prompts if isinstance(prompts, list) else None, labels, default_type
                )
            except (ValueError, RewardError) as e:
                self._reply(400, {"error": str(e)})
                return
            self._reply(200, out)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s - %s", self.address_string(), format % args)

    return ThreadingHTTPServer((host, port), Handler)


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    """Run `server` on a daemon thread (tests, notebooks); stop it with `server.shutdown()`."""
    t = threading.Thread(target=server.serve_forever, name="evr1-rewards-serve", daemon=True)
    t.start()
    return t
