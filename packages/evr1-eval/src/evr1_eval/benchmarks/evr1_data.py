"""evr1 data: a file of evr1-train rows (a run's held-out split, any evr1 dataset), scored as evr1-train validates.

Rows are evr1-train's own (`problem` with its `<video>` / `<image>` markers, `options`, `answer` or `solution`,
`problem_type`, `videos` / `images`, `kind` / `data_source`; any problem type, images or videos or neither), as
`evr1-train export-heldout RUN OUT` writes them, with the media paths resolved and the reward's inputs recorded
(`reward_extras`: the row columns the trainer hands its reward).

There is no outside reference: the "official" rule of this benchmark is evr1-train's validation rule itself —
evr1-rewards' `RewardRouter` in reward mode (a reversed span scores 0, no benchmark conventions), given the row's
ground truth, problem type and `reward_extras` exactly as the trainer gives them, its `accuracy` as the score (the IoU
for temporal grounding); micro accuracy and the accuracy per `kind`, the trainer's `val/accuracy/<kind>`. Ask with
the trainer's prompt: `evr1-eval run --from-train RUN` (or `--protocol evr1`); the official protocol's generic
prompt does not ask for `<answer>` tags.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from evr1_cache import BOOKKEEPING_COLUMNS
from evr1_eval.api.aggregation import micro
from evr1_eval.api.base import Benchmark
from evr1_eval.api.loading import RowView
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import doc_of, reward_outcome
from evr1_eval.manifest import package_version
from evr1_eval.types import Outcome, Reference, Sample
from evr1_rewards import RewardInput, RewardRouter

#: Row columns evr1-train never hands its reward (evr1-train `data/row.py`): media, prompt, answer, bookkeeping.
_NOT_EXTRAS = BOOKKEEPING_COLUMNS | frozenset(
    {
        "problem",
        "answer",
        "solution",
        "videos",
        "images",
        "reward_extras",
    }
)
SCORER = "evr1-train validation (evr1-rewards, reward mode)"


@functools.cache
def _router() -> RewardRouter:
    return RewardRouter()  # reward mode, as the trainer's; weights and think change only `overall`/`format`


def reward_extras(row: Mapping[str, Any]) -> dict[str, Any]:
    """What the trainer's reward sees besides the response: the exported `reward_extras`, else the row's columns
    as evr1-train selects them (every column but media, prompt, answer and bookkeeping; `extra_info` merged in)."""
    given = row.get("reward_extras")
    if isinstance(given, Mapping):
        return dict(given)
    extras = {k: v for k, v in row.items() if k not in _NOT_EXTRAS}
    if isinstance(row.get("extra_info"), Mapping):
        extras.update(row["extra_info"])
    extras["options"] = list(row.get("options") or [])
    return extras


def _kind(row: Mapping[str, Any]) -> str | None:
    """The trainer's kind of a row without `kind` / `data_source`: its problem type."""
    value = row.get("problem_type")
    return str(value) if value else None


def official_doc(view: RowView) -> dict[str, Any]:
    raw = view.row.get("answer", view.row.get("solution"))
    return {
        "ground_truth": raw,
        "problem_type": str(view.row.get("problem_type") or view.problem_type),
        "reward_extras": reward_extras(view.row),
    }


def rule(sample: Sample, response: str) -> Outcome:
    """evr1-train's validation score of one answer (see the module docstring)."""
    doc = doc_of(sample)
    result = _router().score(
        RewardInput(
            response=response,
            ground_truth=doc["ground_truth"],
            problem_type=doc["problem_type"],
            extras=doc["reward_extras"],
            sample_id=sample.id,
        )
    )
    return reward_outcome(result, SCORER)


BENCHMARK = register(
    Benchmark(
        name="evr1_data",
        title="evr1 data (evr1-train rows, e.g. a run's held-out split)",
        problem_types=("multiple_choice", "numerical", "temporal_grounding"),
        group_fields={"kind": ("kind", "data_source")},
        derived_groups={"kind": _kind},
        reference=Reference(
            "evr1", "evr1-train validation: evr1_rewards.RewardRouter (reward mode)", f"v{package_version('evr1-eval')}"
        ),
        official_doc=official_doc,
        scorer=rule,
        aggregator=micro,
        needs_video=False,
        aliases=("heldout",),
        prompt_version="evr1-train",
        notes=(
            "scored by evr1-train's validation rule (evr1-rewards in reward mode): ask with --from-train RUN so the "
            "prompt, frames and decoding are the training run's",
        ),
    )
)
