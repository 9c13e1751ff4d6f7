"""Prompts shared by benchmarks that have no official wording of their own, and the model-family prompt variants.

`direct_prompt` is VLMEvalKit's Qwen3-VL evaluation prompt ("Question: …\\nOptions:\\nA. …\\nAnswer with the option
letter only."; open-compass/VLMEvalKit `vlmeval/vlm/qwen3_vl/prompt.py`), extended to the other problem types with
the same one-line instruction. It is the official-protocol prompt of benchmarks whose official code could not be read
(the summary says so), and the `qwen3_vl` / `vlmevalkit` prompt variant a preset can select for every benchmark that
has no variant of its own (Qwen3-VL's reported numbers were made with VLMEvalKit).
"""

from __future__ import annotations

from collections.abc import Sequence

from evr1_eval.protocol import PROMPT_VARIANTS, check_variant

_DIRECT_TAIL = {
    "multiple_choice": "Answer with the option letter only.",
    "numerical": "Answer with a single number only.",
    "regression": "Answer with a single number only.",
    "boolean": "Answer with Yes or No only.",
    "temporal_grounding": 'Give the start and end time in seconds as JSON: {"time": [start, end]}.',
    "spatiotemporal_grounding": (
        "Give the time span in seconds and one box [x1, y1, x2, y2] per whole second inside it as JSON: "
        '{"time": [start, end], "boxes": {"<second>": [x1, y1, x2, y2]}}.'
    ),
}


def direct_prompt(problem_type: str, question: str, options: Sequence[str]) -> str:
    """VLMEvalKit / Qwen3-VL style: question, lettered options ("A. text"), a one-line answer instruction."""
    body = f"Question: {question.strip()}"
    if options:
        body += "\nOptions:\n" + "\n".join(options)
    return f"{body}\n{_DIRECT_TAIL.get(problem_type, 'Answer the question concisely.')}"


__all__ = ["PROMPT_VARIANTS", "check_variant", "direct_prompt"]
