"""Inputs shared by the evr1-rewards tests and `benchmarks/rewards_throughput.py`: typical responses per problem type and
adversarial responses (megabyte floods, nested JSON, unbalanced tags, regex-pathological strings)."""

from __future__ import annotations

import json

MB = 1 << 20

#: A typical (response, ground truth) per type: ~200-character reasoning, then a tagged answer (as in RL rollouts).
_STEP = "The clip shows a person walking left, then a red car enters at the top right and stops. "
_THINK = "<think>" + _STEP * 2 + "</think>\n"
TYPICAL: dict[str, tuple[str, str]] = {
    "multiple_choice": (_THINK + "<answer>B</answer>", "B"),
    "numerical": (_THINK + "<answer>1,250</answer>", "1250"),
    "regression": (_THINK + "<answer>3.4</answer>", "3.1"),
    "boolean": (_THINK + "<answer>Yes</answer>", "yes"),
    "temporal_grounding": (_THINK + '<answer>{"time": [12.5, 20.0]}</answer>', '{"time": [12.0, 19.5]}'),
    "spatial_grounding": (_THINK + '<answer>{"boxes": [104, 52, 310, 288]}</answer>', '{"boxes": [100, 50, 300, 280]}'),
    "spatiotemporal_grounding": (
        _THINK
        + '<answer>{"time": [2, 4], "boxes": {"2": [10, 10, 50, 50], "3": [12, 10, 52, 50], "4": [14, 10, 54, 50]}}</answer>',
        '{"time": [2, 5], "boxes": {"2": [10, 10, 50, 50], "3": [12, 12, 52, 52], "4": [14, 14, 54, 54], "5": [16, 16, 56, 56]}}',
    ),
    "tracking": (
        _THINK + '<answer>{"boxes": {"0": [10, 10, 50, 50], "1": [12, 10, 52, 50], "2": [14, 10, 54, 50]}}</answer>',
        '{"boxes": {"0": [10, 10, 50, 50], "1": [12, 12, 52, 52], "2": [14, 14, 54, 54], "3": [16, 16, 56, 56]}}',
    ),
    "segmentation": (
        _THINK + '<answer>{"polygons": [[8, 8, 40, 8, 40, 40, 8, 40]]}</answer>',
        '{"size": [64, 64], "polygons": [[10, 10, 40, 10, 40, 40, 10, 40]]}',
    ),
    "ocr": (_THINK + "<answer>EXIT 12B</answer>", "Exit 12B"),
    "open_ended": (_THINK + "<answer>A red car stops near the crossing.</answer>", "the red car stops at the crossing"),
    "preference": (_THINK + "<answer>Response 2</answer>", "Response 2"),
    "math": (_THINK + "<answer>\\frac{3}{4}</answer>", "0.75"),
}


def _nested_json(depth: int) -> str:
    return '{"time": ' * depth + "[1, 2]" + "}" * depth


def adversarial_responses(size: int = MB) -> dict[str, str]:
    """Named hostile responses of about `size` characters each (plus the empty one)."""
    return {
        "empty": "",
        "letters": "A " * (size // 2),  # a flood of standalone option letters
        "digits": "1" * size,  # one enormous number token
        "number_list": "1,0" * (size // 3),  # thousands-separator lookalikes
        "unclosed_answer": "<answer>" * (size // 8),  # EasyVideoR1 takes seconds on unclosed-tag floods
        "unclosed_think": "<think>" + "the answer is " * (size // 14),
        "boxed_flood": "\\boxed{" * (size // 7),
        "brace_flood": "{" * size,
        "nested_json": "<answer>" + _nested_json(size // 20) + "</answer>",  # deeper than the JSON parser allows
        "nested_lists": "[" * size,
        "answer_is_flood": "the answer is " * (size // 14),
        "spaces": "answer" + " " * size + "x",  # regex-pathological whitespace run
        "colons": "12:" * (size // 3),
        "tag_soup": "</answer><answer>" * (size // 17),
        "cjk": "答案" * (size // 2),
        "fullwidth": "Ｂ" * size,  # every character a compatibility form (NFKC folds it)
        "dash_ranges": "1-2-3-4-" * (size // 8),
        "latex_fracs": "\\frac{1}{" * (size // 9),
        "json_in_answer": "<answer>"
        + json.dumps({"boxes": {str(i): [0, 0, 1, 1] for i in range(size // 30)}})
        + "</answer>",
    }
