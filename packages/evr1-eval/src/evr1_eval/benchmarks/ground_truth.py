"""Problem-type names and ground-truth parsing of annotation rows: eval's own copy, kept behind this one module.

evr1-rewards owns the problem-type vocabulary and ground-truth parsing; until its public API for them is released,
the loader calls only the functions here, so switching to it replaces this module and nothing else. The names below
are eval's annotation vocabulary (EasyVideoR1's `problem_type` values); `rewards_type` maps each to the evr1-rewards
scorer that scores it under the evr1 protocol. Eval's "REC" is OVO-Bench's repetition *counting* (a number), not
evr1-rewards' `rec` (spatial grounding), so it is mapped explicitly and never passed through by name.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_TYPE_ALIASES = {
    "multiple choice": "multiple choice",
    "multiple_choice": "multiple choice",
    "mcq": "multiple choice",
    "mc": "multiple choice",
    "numerical": "numerical",
    "number": "numerical",
    "numeric": "numerical",
    "regression": "regression",
    "boolean": "boolean",
    "binary classification": "boolean",
    "yes/no": "boolean",
    "temporal grounding": "temporal grounding",
    "spatial-temporal grounding": "spatial-temporal grounding",
    "spatial temporal grounding": "spatial-temporal grounding",
    "spatiotemporal grounding": "spatial-temporal grounding",
    "stvg": "spatial-temporal grounding",
    "open-ended": "open-ended",
    "open ended": "open-ended",
    "free-form": "open-ended",
    "video qa": "open-ended",
    "caption": "caption",
    "rec": "REC",
    "ssr": "SSR",
    "crr": "CRR",
}
#: eval's problem type -> evr1-rewards' scorer name (the evr1 protocol's per-sample rule).
_REWARDS_TYPE = {
    "multiple choice": "multiple choice",
    "numerical": "numerical",
    "regression": "regression",
    "boolean": "boolean",
    "temporal grounding": "temporal grounding",
    "spatial-temporal grounding": "spatial-temporal grounding",
    "open-ended": "open-ended",
    "caption": "open-ended",
    "REC": "numerical",  # OVO-Bench repetition counting: a count
    "SSR": "boolean",  # OVO-Bench step recognition: yes / no
    "CRR": "boolean",  # OVO-Bench clue-reveal response: yes / no
}
_PLACEHOLDER = re.compile(r"<\[PLHD[^\]]{0,200}\]>")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_OPTION = re.compile(r"^\s*\(?([A-Za-z])\)?\s*[.:)\uff1a]\s*(.*)$", re.DOTALL)
_SCALAR = (str, int, float, bool)


def canonical_problem_type(value: Any) -> str:
    """Normalise case, underscores and aliases; unknown names are a load error rather than a silent default."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("missing `problem_type`")
    key = " ".join(value.strip().replace("_", " ").split()).lower()
    for candidate in (key, key.replace(" ", "-")):
        if candidate in _TYPE_ALIASES:
            return _TYPE_ALIASES[candidate]
    raise ValueError(f"unknown problem_type {value!r} (known: {', '.join(sorted(set(_TYPE_ALIASES.values())))})")


def rewards_type(problem_type: str) -> str:
    """The evr1-rewards scorer for one of eval's canonical problem types."""
    return _REWARDS_TYPE[problem_type]


def unwrap_ground_truth(value: Any) -> Any:
    """Strip EasyVideoR1's wrappers: last non-empty `<answer>`, else JSON inside `<think>`, minus placeholder tokens."""
    if not isinstance(value, str):
        return value
    text = _PLACEHOLDER.sub("", value).strip()
    answers = [a.strip() for a in _ANSWER.findall(text) if a.strip()]
    if answers:
        return answers[-1]
    if "<answer>" in text.lower():
        raise ValueError("the solution's <answer> tag is empty or unclosed")
    thinks = [t.strip() for t in _THINK.findall(text) if "{" in t]
    if thinks:
        return thinks[-1]
    return text


def parse_options(value: Any) -> list[tuple[str, str]]:
    """Options as (letter, text): lists of "A. …"/"A: …"/"(A) …"/plain texts, or {"A": text} mappings, or None."""
    if value is None or value == "":
        return []
    if isinstance(value, Mapping):
        return [(str(k).strip().upper(), str(v).strip()) for k, v in value.items()]
    if isinstance(value, str):
        value = [line for line in value.splitlines() if line.strip()]
    if not isinstance(value, Sequence):
        raise ValueError(f"`options` must be a list, a mapping or null, got {type(value).__name__}")
    for i, opt in enumerate(value):
        if not isinstance(opt, _SCALAR):
            raise ValueError(f"option {i} is a {type(opt).__name__}, expected text")
    texts = [str(opt).strip() for opt in value]
    matches = [_OPTION.match(t) for t in texts]
    if all(matches):
        out = [(m.group(1).upper(), m.group(2).strip()) for m in matches if m]
    else:
        out = [(LETTERS[i], t) for i, t in enumerate(texts)]
    letters = [letter for letter, _ in out]
    if len(set(letters)) != len(letters):
        raise ValueError(f"duplicate option letters {letters}")
    return out


def parse_mc_truth(raw: Any, options: Sequence[tuple[str, str]]) -> str:
    letters = [letter for letter, _ in options] or list(LETTERS[:10])
    if isinstance(raw, bool) or raw is None:
        raise ValueError(f"multiple-choice answer {raw!r} is not an option letter")
    text = str(raw).strip()
    m = re.match(r"^\(?([A-Za-z])\)?(?:[.:)\s]|$)", text)
    if m and m.group(1).upper() in letters:
        return m.group(1).upper()
    matches = [letter for letter, opt in options if opt and opt.strip().lower() == text.lower()]
    if len(matches) == 1:
        return matches[0]
    raise ValueError(f"multiple-choice answer {text[:60]!r} is not one of the option letters {''.join(letters)}")


def parse_number(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"expected a number, got {raw!r}")
    if isinstance(raw, (int, float)):
        value = float(raw)
    else:
        try:
            value = float(str(raw).strip().replace(",", ""))
        except ValueError:
            raise ValueError(f"expected a number, got {str(raw)[:60]!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {raw!r}")
    return value


def _json_object(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        obj = json.loads(str(raw))
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"expected a JSON object, got {str(raw)[:80]!r}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def parse_span(value: Any) -> list[float]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise ValueError(f'"time" must be [start, end] in seconds, got {str(value)[:80]}')
    start, end = (parse_number(v) for v in value)
    if end < start:
        raise ValueError(f'"time" span [{start}, {end}] ends before it starts')
    return [start, end]


def parse_box(value: Any) -> list[float]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 4:
        raise ValueError(f"a box must be [x1, y1, x2, y2], got {str(value)[:80]}")
    return [parse_number(v) for v in value]


def _yes_no(problem_type: str, value: Any, row: Mapping[str, Any]) -> str:
    if problem_type != "boolean" and str(row.get("ovo_type", "")).strip() in ("0", "1"):
        return "Yes" if str(row["ovo_type"]).strip() == "1" else "No"
    word = str(value).strip().rstrip(".").lower()
    if word in ("yes", "y", "true", "1"):
        return "Yes"
    if word in ("no", "n", "false", "0"):
        return "No"
    raise ValueError(f"expected Yes or No, got {str(value)[:60]!r}")


def _number_text(problem_type: str, value: Any) -> str:
    number = parse_number(value)
    if problem_type == "REC":
        if not number.is_integer() or number < 0:
            raise ValueError(f"REC count must be a non-negative integer, got {value!r}")
        return str(int(number))
    return str(int(number)) if number.is_integer() and "." not in str(value) else str(number)


def _grounding(problem_type: str, value: Any) -> str:
    obj = _json_object(value)
    if problem_type == "temporal grounding":
        return json.dumps({"time": parse_span(obj.get("time"))})
    boxes = obj.get("boxes") or {}
    if not isinstance(boxes, Mapping):
        raise ValueError(f'"boxes" must map seconds to [x1, y1, x2, y2], got {type(boxes).__name__}')
    parsed = {str(k): parse_box(v) for k, v in boxes.items()}
    return json.dumps({"time": parse_span(obj.get("time")), "boxes": parsed})


def parse_ground_truth(problem_type: str, raw: Any, options: Sequence[tuple[str, str]], row: Mapping[str, Any]) -> Any:
    """The ground truth in the form the scorer expects; raises ValueError saying what is wrong."""
    value = unwrap_ground_truth(raw)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValueError("empty ground truth (`solution`)")
    if problem_type == "multiple choice":
        return parse_mc_truth(value, options)
    if problem_type in ("numerical", "regression", "REC"):
        return _number_text(problem_type, value)
    if problem_type in ("boolean", "SSR", "CRR"):
        return _yes_no(problem_type, value, row)
    if problem_type in ("temporal grounding", "spatial-temporal grounding"):
        return _grounding(problem_type, value)
    if not isinstance(value, _SCALAR):
        raise ValueError(f"expected a text answer, got {type(value).__name__}")
    return str(value).strip()
