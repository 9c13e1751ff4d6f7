"""Prompt text for one row: the evr1 prompt format (`evr1_rewards.prompt_format`, shared with evr1-eval) applied to a row.

Why here and not copied per engine: the verl dataset and the local engine must render identical prompts; the
wording (lead-ins, instruction, each problem type's answer format) is evr1-rewards', imported, never copied. Unlike
EasyVideoR1, a row whose text lacks `<video>` / `<image>` placeholders gets them prepended (one per media item) —
without that the processor receives frames with no placeholder and fails the token/feature check.

Names (stable): build_prompt_text(row, opts) -> str, describe_prompts(opts) -> dict (the template as data, for a
checkpoint's self-description)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evr1_rewards.prompt_format import (
    DEFAULT_ANSWER_FORMAT,
    INSTRUCTION_DIRECT,
    INSTRUCTION_THINK,
    LEADS,
    TEMPLATE,
    answer_formats,
    option_lines,
    render_prompt,
)
from evr1_rewards.vocabulary import OPEN_ENDED
from evr1_train.data.options import DataOptions


def describe_prompts(opts: DataOptions) -> dict[str, Any]:
    """How `build_prompt_text` renders a row under `opts`, as JSON-able data (what an evaluator must reproduce)."""
    return {
        "template": TEMPLATE.replace("{lead}", "{lead_in}"),
        "placeholders": "<video>/<image> prepended, one per media item the question text does not place itself",
        "lead_in": dict(LEADS),
        "options": "\nOptions:\n" + "{one option per line, as given in the row}",
        "instruction": (INSTRUCTION_THINK if opts.think else INSTRUCTION_DIRECT).replace("{format}", "{answer_format}"),
        "answer_format": {**answer_formats(), "default": DEFAULT_ANSWER_FORMAT},
        "think": opts.think,
        "system_prompt": opts.system_prompt,
        "prompt_key": opts.prompt_key,
        "answer_key": opts.answer_key,
        "answer_tag": "answer",
    }


def build_prompt_text(row: Mapping[str, Any], opts: DataOptions) -> str:
    """The user turn as text with `<video>` / `<image>` placeholders in media order."""
    question = row.get(opts.prompt_key)
    if not isinstance(question, str):
        raise ValueError(
            f"row field {opts.prompt_key!r} must be a string question, got {type(question).__name__}; "
            "set data.evr1.prompt_key to the column holding the question"
        )
    question = question.replace("\\n", "\n")
    n_images = len(row.get(opts.image_key) or [])
    n_videos = len(row.get(opts.video_key) or [])
    problem_type = row.get("problem_type") or OPEN_ENDED
    options = option_lines(row.get("options"))
    return render_prompt(problem_type, question, options, n_videos=n_videos, n_images=n_images, think=opts.think)
