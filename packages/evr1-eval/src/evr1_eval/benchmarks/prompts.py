"""Prompt templates, one per problem type and style, versioned through `Benchmark.prompt_version`.

"direct" follows the VLMEvalKit / Qwen3-VL evaluation prompts (research §1.3: "Question: …\\nOptions:\\nA. …\\nAnswer
with the option letter only."), which is what published Qwen numbers use. "reasoning" asks for `<think>` then
`<answer>`, the format RL-trained checkpoints (and evr1-rewards' format score) expect.
"""

from __future__ import annotations

from collections.abc import Sequence

STYLES = ("direct", "reasoning")

_DIRECT_TAIL = {
    "multiple choice": "Answer with the option letter only.",
    "numerical": "Answer with a single number only.",
    "regression": "Answer with a single number only.",
    "boolean": "Answer with Yes or No only.",
    "temporal grounding": 'Give the start and end time in seconds as JSON: {"time": [start, end]}.',
    "spatial-temporal grounding": (
        "Give the time span in seconds and one box [x1, y1, x2, y2] per whole second inside it as JSON: "
        '{"time": [start, end], "boxes": {"<second>": [x1, y1, x2, y2]}}.'
    ),
    "REC": "Answer with a single number only.",
    "SSR": "Answer with Yes or No only.",
    "CRR": "Answer with Yes or No only.",
}

_REASONING_PAYLOAD = {
    "multiple choice": "the option letter",
    "numerical": "a single number",
    "regression": "a single number",
    "boolean": "Yes or No",
    "temporal grounding": 'JSON {"time": [start, end]} in seconds',
    "spatial-temporal grounding": 'JSON {"time": [start, end], "boxes": {"<second>": [x1, y1, x2, y2]}}',
    "REC": "a single number",
    "SSR": "Yes or No",
    "CRR": "Yes or No",
}


def render_prompt(problem_type: str, question: str, options: Sequence[str], style: str = "direct") -> str:
    """The text sent with the video; `options` are already formatted as "A. text"."""
    if style not in STYLES:
        raise ValueError(f"unknown prompt style {style!r}; choose one of {', '.join(STYLES)}")
    body = f"Question: {question.strip()}"
    if options:
        body += "\nOptions:\n" + "\n".join(options)
    if style == "direct":
        tail = _DIRECT_TAIL.get(problem_type, "Answer the question concisely.")
        return f"{body}\n{tail}"
    payload = _REASONING_PAYLOAD.get(problem_type, "your final answer")
    return (
        f"{body}\nThink step by step inside <think> </think> tags, then give {payload} inside <answer> </answer> tags."
    )
