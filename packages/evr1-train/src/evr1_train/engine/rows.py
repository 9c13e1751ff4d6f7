"""Which rows a run uses and in what order: the usable-row check and one epoch's row order.

Why: a resumed run must draw exactly the batches the uninterrupted run would have drawn (rows are read by
`evr1_cache.read_rows`), and a row that cannot be prompted or scored is skipped with a warning, never a crash; the
same check decides which held-out rows `evr1_train.export` hands to evr1-eval, without building a trainer.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evr1_rewards import RewardRouter
    from evr1_train.data import DataOptions

logger = logging.getLogger(__name__)


def check_row(row: dict[str, Any], index: int, data_opts: DataOptions, router: RewardRouter) -> None:
    """Raise when `row` cannot be prompted (messages, media files) or scored (an answer the scorer reads)."""
    from evr1_cache import row_id
    from evr1_rewards import RewardInput
    from evr1_train.data import ground_truth_of, row_extra_info, row_messages
    from evr1_train.data.row import media_items

    msgs = row_messages(row, data_opts)
    for item in media_items(msgs):
        ref = item.get(item["type"])
        if isinstance(ref, str) and not os.path.exists(ref) and data_opts.video_source != "cache_only":
            raise FileNotFoundError(f"{item['type']} file not found: {ref}")
    extra = row_extra_info(row, data_opts, index)
    router.score(
        RewardInput(
            response="",
            ground_truth=ground_truth_of(row, data_opts),
            problem_type=extra["problem_type"],
            extras=extra,
            sample_id=row_id(row, index + 1),
        )
    )


def usable_rows(
    rows: list[dict[str, Any]], data_opts: DataOptions, split: str, check: Callable[[dict[str, Any], int], None]
) -> list[dict[str, Any]]:
    """The rows `check` accepts: a row whose prompt cannot be built, whose media file is missing, or whose answer
    cannot be scored is dropped. One warning lists the first few reasons; the run continues with the rest (a bad row
    never kills a run). A tampered row-level spec is an error, never a skipped row."""
    from evr1_cache import row_id
    from evr1_train.data.plan_check import check_row_specs

    check_row_specs(rows, data_opts, split)
    good, bad = [], []
    for i, row in enumerate(rows):
        try:
            check(row, i)
        except Exception as exc:
            bad.append(f"{row_id(row, i + 1)}: {type(exc).__name__}: {exc}")
            continue
        good.append(row)
    if bad:
        logger.warning(
            "%s data: skipped %d of %d rows that cannot be used (fix them and rerun to include them); first: %s",
            split,
            len(bad),
            len(rows),
            " | ".join(bad[:3]),
        )
    return good


def epoch_order(n: int, seed: int, epoch: int, shuffle: bool) -> list[int]:
    """Row order of one epoch: a permutation seeded by (seed, epoch), or identity."""
    if not shuffle:
        return list(range(n))
    import numpy as np

    return [int(i) for i in np.random.default_rng([seed, epoch]).permutation(n)]
