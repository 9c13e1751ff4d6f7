"""The evr1 prompt format: how a question is put to the model so that its scorer can read the answer.

One definition for training (evr1-train's prompt builder) and evaluation (evr1-eval's `evr1` protocol), which both
import it and keep no copy: the template, the lead-in sentence by the row's media, and the instruction asking for
`<answer>…</answer>` (after `<think>…</think>` when thinking). The phrase inside the instruction is the answer format
of the problem type, registered with its scorer (`register(..., answer_format=...)`, read by `answer_format`).

>>> render_prompt("multiple choice", "Which colour?", ["A. red", "B. blue"], n_videos=1, n_images=0, think=False)
'<video>Watch the video carefully.\\nQuestion: Which colour?\\nOptions:\\nA. red\\nB. blue\\nGive the option letter inside \
<answer></answer>.'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from evr1_rewards.registry import DEFAULT_ANSWER_FORMAT, answer_format, answer_formats

__all__ = [
    "DEFAULT_ANSWER_FORMAT",
    "INSTRUCTION_DIRECT",
    "INSTRUCTION_THINK",
    "LEADS",
    "TEMPLATE",
    "answer_format",
    "answer_formats",
    "modality",
    "option_lines",
    "options_text",
    "render_prompt",
    "unplaced_markers",
]

#: The user text: `{placeholders}` are the markers of the media the question does not place itself (rendered before
#: the text), `{lead}` the lead-in by modality, `{options}` `options_text(...)`, `{instruction}` the answer request.
TEMPLATE = "{placeholders}{lead}\nQuestion: {question}{options}\n{instruction}"
#: The lead-in sentence by the media of a row (`modality`).
LEADS: Mapping[str, str] = {
    "video+image": "Examine the video and the accompanying image carefully.",
    "video": "Watch the video carefully.",
    "image": "Examine the image carefully.",
    "text": "Read the question carefully.",
}
INSTRUCTION_THINK = "Think step by step inside <think></think>, then give {format} inside <answer></answer>."
INSTRUCTION_DIRECT = "Give {format} inside <answer></answer>."
_MARKER = re.compile(r"<(video|image)>")


def modality(n_videos: int, n_images: int) -> str:
    """The `LEADS` key of a row with these media."""
    if n_videos and n_images:
        return "video+image"
    return "video" if n_videos else "image" if n_images else "text"


def unplaced_markers(question: str, n_videos: int, n_images: int) -> str:
    """The markers of the media a question does not place itself (`<video>` ones first); a question placing more
    media than its row has is a ValueError."""
    placed = _MARKER.findall(question)
    videos, images = n_videos - placed.count("video"), n_images - placed.count("image")
    if videos < 0 or images < 0:
        raise ValueError(
            f"question has {placed.count('video')} <video> / {placed.count('image')} <image> placeholders but the row "
            f"has {n_videos} videos / {n_images} images; remove the extra placeholders or add the media"
        )
    return "<video>" * videos + "<image>" * images


def option_lines(options: object) -> list[str]:
    """A row's `options` column as prompt lines: a list as given, a mapping as `key. value`, none when empty."""
    if not options:
        return []
    if isinstance(options, Mapping):
        return [f"{k}. {v}" for k, v in options.items()]
    if isinstance(options, Sequence) and not isinstance(options, str):
        return [str(o) for o in options]
    return [str(options)]


def options_text(lines: Sequence[str]) -> str:
    """The `{options}` field: "\\nOptions:\\n" and one option per line ("A. red"), or "" without options."""
    return "\nOptions:\n" + "\n".join(lines) if lines else ""


def render_prompt(
    problem_type: str, question: str, options: Sequence[str], *, n_videos: int, n_images: int, think: bool
) -> str:
    """The user text for one question, the markers of the media it does not place itself first."""
    return TEMPLATE.format(
        placeholders=unplaced_markers(question, n_videos, n_images),
        lead=LEADS[modality(n_videos, n_images)],
        question=question,
        options=options_text(options),
        instruction=(INSTRUCTION_THINK if think else INSTRUCTION_DIRECT).format(format=answer_format(problem_type)),
    )
