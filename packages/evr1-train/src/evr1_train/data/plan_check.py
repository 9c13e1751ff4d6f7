"""Start-up prompt-length check: every row's exact prompt length against `max_prompt_length`, before step one.

Why: a video that expands past `data.max_prompt_length` otherwise fails inside a rollout worker ("Prompt length
exceeds ...") hours into a run. `evr1_cache.plan` counts each row exactly as the processor will (the trainer's own
messages through the processor's chat template, every placeholder expanded by the model family's rule) from the
cached `VideoMeta` alone, so the whole dataset is checked in seconds without decoding a frame.

`evr1.plan.on_over_limit` decides: `error` (default) refuses to start and names the rows; `filter` drops them with
one logged line each and goes on. Rows that cannot be planned at all (an unreadable video) are left to the media
checks that already run (they drop such rows with their own reason).

Rows that `evr1-cache build --plan --on-over-limit resample` shrank carry their own video spec (`evr1_plan`); they are
measured under it, and `check_row_specs` first makes sure every such override is well formed and that its frames are
in the cache under it (a malformed or tampered override is an error naming the row, never a silent skip).

Names (stable): PromptTooLong, check_prompt_lengths(rows, opts, processor, family, limit, split),
check_row_specs(rows, opts, split).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_train.data.options import DataOptions

logger = logging.getLogger(__name__)

SHOW = 10


class PromptTooLong(ValueError):
    """Rows whose prompt is longer than `max_prompt_length` (raised at start-up by `on_over_limit: error`)."""


def check_row_specs(rows: Sequence[Mapping[str, Any]], opts: DataOptions, split: str = "train") -> None:
    """Refuse to start when a row's own video spec (`evr1_plan`) is malformed, made for another model family, or --
    unless `data.evr1.video_source=decode` -- names frames the cache does not hold for that row (the dataset and the
    cache disagree: a hand-edited row, or a cache built without `--plan`). Raises `RowSpecError` naming the rows."""
    from evr1_cache import row_id
    from evr1_cache.plan import RowSpecError, has_row_spec
    from evr1_train.data.row import loader_for, media_items, row_messages, row_spec

    problems: list[str] = []
    for i, row in enumerate(rows):
        if not has_row_spec(row):
            continue
        name = row_id(row, i + 1)
        try:
            spec = row_spec(row, opts, name)
        except RowSpecError as exc:
            problems.append(str(exc))
            continue
        if spec is None or opts.video_source == "decode":
            continue
        loader = loader_for(opts)
        for item in media_items(row_messages(row, opts)):
            if item["type"] == "video" and not loader.cached(item["video"], spec, item.get("evr1_cache")):
                problems.append(
                    f"row {name}: its evr1_plan names video spec {spec.key()}, but {item['video']} is not in the "
                    f"frame cache {opts.cache_dir} under that spec; rebuild with `evr1-cache build --plan` (same "
                    "--out), or remove the row's evr1_plan column to use the configured spec"
                )
                break
    if problems:
        more = f" and {len(problems) - SHOW} more" if len(problems) > SHOW else ""
        raise RowSpecError(
            f"{len(problems)} {split} row(s) have an unusable own video spec: " + " | ".join(problems[:SHOW]) + more
        )


def check_prompt_lengths(
    rows: Sequence[Mapping[str, Any]],
    opts: DataOptions,
    processor: Any,
    family: Any,
    max_prompt_length: int | None,
    split: str = "train",
) -> list[int]:
    """Indices of the rows to keep. Raises `PromptTooLong` naming the rows over the limit when `opts.on_over_limit`
    is "error"; with "filter" they are left out and logged. Nothing is checked without a limit or a model family."""
    if not max_prompt_length or family is None or processor is None:
        return list(range(len(rows)))
    from evr1_cache.plan import HFTextCounter, has_row_spec, over_limit, plan_rows
    from evr1_train.data.row import row_messages

    plans = plan_rows(
        rows,
        family,
        opts.video_spec(),
        opts.image_spec(),
        counter=HFTextCounter(processor),
        messages=lambda row: row_messages(row, opts),
        media_root=opts.media_root,
        allow_outside_media=opts.allow_outside_media,
        allow_remote_media=opts.allow_remote_media,
    )
    bad = over_limit(plans, int(max_prompt_length))
    if not bad:
        return list(range(len(rows)))
    own = {i for i, row in enumerate(rows) if has_row_spec(row)}
    names = "; ".join(
        f"row {p.row_id}: {p.total} tokens ({p.text} text + {p.vision} vision"
        + (", under its own evr1_plan video spec" if p.index in own else "")
        + ")"
        for p in bad[:SHOW]
    )
    more = f" and {len(bad) - SHOW} more" if len(bad) > SHOW else ""
    if opts.on_over_limit == "error":
        raise PromptTooLong(
            f"{len(bad)} {split} row(s) have a prompt longer than max_prompt_length={max_prompt_length}: {names}{more}. "
            "Fix: raise data.max_prompt_length, lower the video budget (data.evr1.video max_frames / max_pixels) and "
            "rebuild the cache, drop or resample them with `evr1-cache build --plan --max-prompt-length N`, or set "
            "evr1.plan.on_over_limit=filter to skip them"
        )
    for p in bad:
        logger.warning(
            "evr1: %s row %s dropped: prompt %d tokens > max_prompt_length %d (evr1.plan.on_over_limit=filter)",
            split,
            p.row_id,
            p.total,
            max_prompt_length,
        )
    dropped = {p.index for p in bad}
    return [i for i in range(len(rows)) if i not in dropped]
