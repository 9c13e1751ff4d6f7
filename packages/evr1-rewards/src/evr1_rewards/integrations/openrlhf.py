"""OpenRLHF adapter: `--reward.remote_url http://127.0.0.1:P/get_reward` (run `evr1-rewards serve`, see
`evr1_rewards.server`) or a `.py` file that re-exports `reward_func`.

OpenRLHF's single-turn executor sends `{"query": [...], "prompts": [...], "labels": [...]}` where `query` is the
decoded prompt + response *with* special tokens, and reads `rewards`, `scores` and `extra_logs` from the reply.
A label is either a plain ground truth (scored with the server's default problem type) or a JSON object
`{"problem_type": ..., "ground_truth": ..., "extras": {...}}` (put it in the dataset's `--data.label_key` column).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence

from evr1_rewards.errors import RewardError
from evr1_rewards.router import RewardRouter
from evr1_rewards.types import RewardInput, RewardResult

log = logging.getLogger(__name__)

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


def parse_label(label: object, default_type: str | None) -> tuple[str, object, dict[str, object]]:
    """(problem_type, ground_truth, extras) from an OpenRLHF label."""
    obj: object = label
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            obj = json.loads(label)
        except ValueError:
            obj = label
        except RecursionError:
            raise RewardError("label JSON is nested too deeply") from None
    if isinstance(obj, Mapping) and "ground_truth" in obj:
        ptype = obj.get("problem_type") or default_type
        extras = obj.get("extras") or {}
        if not isinstance(extras, Mapping):
            raise RewardError(f"label extras must be an object, got {extras!r}")
        if not ptype:
            raise RewardError("label has no problem_type and the server has no default (--problem-type)")
        return str(ptype), obj["ground_truth"], {str(k): v for k, v in extras.items() if v is not None}
    if not default_type:
        raise RewardError(
            'plain labels need a default problem type (serve --problem-type TYPE) or JSON labels {"problem_type", "ground_truth"}'
        )
    return default_type, label, {}


def openrlhf_inputs(
    queries: Sequence[object],
    prompts: Sequence[object] | None,
    labels: Sequence[object],
    default_type: str | None = None,
) -> list[RewardInput]:
    """The reward inputs of one OpenRLHF request (RewardError naming the sample for a bad label)."""
    if len(labels) != len(queries) or (prompts is not None and len(prompts) != len(queries)):
        raise RewardError(f"query/prompts/labels lengths differ: {len(queries)}, {len(prompts or [])}, {len(labels)}")
    inputs = []
    for i, (query, label) in enumerate(zip(queries, labels, strict=False)):
        try:
            ptype, gt, extras = parse_label(label, default_type)
        except RewardError as e:
            raise RewardError(f"sample {i}: {e}") from None
        prompt = prompts[i] if prompts is not None else None
        inputs.append(
            RewardInput(
                response=response_from_query(str(query), None if prompt is None else str(prompt)), ground_truth=gt,
                problem_type=ptype, extras=extras, sample_id=str(i),
            )
        )  # fmt: skip
    return inputs


def score_openrlhf(
    router: RewardRouter,
    queries: Sequence[object],
    prompts: Sequence[object] | None,
    labels: Sequence[object],
    default_type: str | None = None,
) -> dict[str, object]:
    """The JSON reply for one OpenRLHF request."""
    return openrlhf_reply(router.score_batch(openrlhf_inputs(queries, prompts, labels, default_type)))


def openrlhf_reply(results: Sequence[RewardResult]) -> dict[str, object]:
    """The JSON reply OpenRLHF reads, from the results of one request's samples (in order)."""
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
