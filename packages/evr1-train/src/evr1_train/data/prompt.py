"""Prompt text for one row: modality-aware lead-in, the question, options, and the answer format of its problem type.

Why here and not copied per engine: the verl dataset and the local engine must render identical prompts. Unlike
EasyVideoR1, a row whose text lacks `<video>` / `<image>` placeholders gets them prepended (one per media item) —
without that the processor receives frames with no placeholder and fails the token/feature check.

Names (stable): build_prompt_text(row, opts) -> str, answer_format(problem_type) -> str,
describe_prompts(opts) -> dict (the template as data, for a checkpoint's self-description)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_train.data.options import DataOptions

_FORMATS: dict[str, str] = {
    "multiple_choice": "the option letter",
    "numerical": "a single number",
    "regression": "a single number",
    "boolean": "Yes or No",
    "ocr": "the recognised text",
    "math": "the final value (or the option letter if options are given)",
    "temporal_grounding": 'JSON {"time": [start_seconds, end_seconds]}',
    "spatial_grounding": 'JSON {"boxes": [x1, y1, x2, y2]}',
    "spatiotemporal_grounding": 'JSON {"time": [s, e], "boxes": {"<second>": [x1, y1, x2, y2], ...}}',
    "tracking": 'JSON {"boxes": {"<second>": [x1, y1, x2, y2], ...}}',
    "code": "the complete program, without Markdown fences",
    "preference": '"Response 1", "Response 2" or "Tie"',
}
_ALIASES = {
    "multiple choice": "multiple_choice",
    "mcq": "multiple_choice",
    "mc": "multiple_choice",
    "number": "numerical",
    "binary classification": "boolean",
    "spatial-temporal grounding": "spatiotemporal_grounding",
    "spatial temporal grounding": "spatiotemporal_grounding",
    "llava": "preference",
    "critic": "preference",
    "svg-code": "code",
    "html-code": "code",
    "coding": "code",
    "mathematics": "math",
}
_PLACEHOLDER = re.compile(r"<(video|image)>")


def normalise_problem_type(problem_type: str | None) -> str:
    """Lower-case, aliases resolved, spaces/hyphens -> underscores (rewards normalise the same way)."""
    name = (problem_type or "open_ended").strip().lower()
    name = _ALIASES.get(name, name)
    return re.sub(r"[\s\-]+", "_", name)


def answer_format(problem_type: str | None) -> str:
    return _FORMATS.get(normalise_problem_type(problem_type), "the final answer")


def _instruction(fmt: str, think: bool) -> str:
    if think:
        return f"Think step by step inside <think></think>, then give {fmt} inside <answer></answer>."
    return f"Give {fmt} inside <answer></answer>."


def describe_prompts(opts: DataOptions) -> dict[str, Any]:
    """How `build_prompt_text` renders a row under `opts`, as JSON-able data (what an evaluator must reproduce)."""
    return {
        "template": "{placeholders}{lead_in}\nQuestion: {question}{options}\n{instruction}",
        "placeholders": "<video>/<image> prepended, one per media item the question text does not place itself",
        "lead_in": {
            "video+image": _lead(1, 1),
            "video": _lead(0, 1),
            "image": _lead(1, 0),
            "text": _lead(0, 0),
        },
        "options": "\nOptions:\n" + "{one option per line, as given in the row}",
        "instruction": _instruction("{answer_format}", opts.think),
        "answer_format": {**_FORMATS, "default": "the final answer"},
        "problem_type_aliases": dict(_ALIASES),
        "think": opts.think,
        "system_prompt": opts.system_prompt,
        "prompt_key": opts.prompt_key,
        "answer_key": opts.answer_key,
        "answer_tag": "answer",
    }


def _lead(n_images: int, n_videos: int) -> str:
    if n_videos and n_images:
        return "Examine the video and the accompanying image carefully."
    if n_videos:
        return "Watch the video carefully."
    if n_images:
        return "Examine the image carefully."
    return "Read the question carefully."


def _options_text(options: Any) -> str:
    if not options:
        return ""
    if isinstance(options, Mapping):
        items = [f"{k}. {v}" for k, v in options.items()]
    elif isinstance(options, Sequence) and not isinstance(options, str):
        items = [str(o) for o in options]
    else:
        items = [str(options)]
    return "\nOptions:\n" + "\n".join(items)


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
    found = _PLACEHOLDER.findall(question)
    missing_v = n_videos - found.count("video")
    missing_i = n_images - found.count("image")
    if missing_v < 0 or missing_i < 0:
        raise ValueError(
            f"question has {found.count('video')} <video> / {found.count('image')} <image> placeholders but the row "
            f"has {n_videos} videos / {n_images} images; remove the extra placeholders or add the media"
        )
    head = "<video>" * missing_v + "<image>" * missing_i
    tail = _instruction(answer_format(row.get("problem_type")), opts.think)
    lead = _lead(n_images, n_videos)
    return f"{head}{lead}\nQuestion: {question}{_options_text(row.get('options'))}\n{tail}"
