"""Ground-truth reading shared by every scorer: unwrapping dataset wrappers, JSON, extras with defaults.

Strict by design (a dataset bug must not train on zeros): anything unreadable raises `GroundTruthError`.

Wrappers found in real annotation files (EasyVideoR1's training and evaluation JSON) are removed first:
`<answer>B</answer>` (the last non-empty tag wins; an `<answer>` that is empty or never closed is an error),
Charades-STA's `<think>{"time": [s, e]}</think><[PLHD21…]>` (no answer tag: the JSON inside `<think>`), and
`<[PLHD…]>` placeholder tokens anywhere.

Extras: a key whose value is `None` is the same as an absent key (`clean_extras`), because `datasets` and parquet fill
every key missing from some rows' dict column with `None`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import clean_payload, fold_compat
from evr1_rewards.structured import json_value_at, strip_fence
from evr1_rewards.text import normalize_text

_PLACEHOLDER = re.compile(r"<\[PLHD[^\]]{0,200}\]>")


def clean_extras(extras: Mapping[str, object] | None) -> Mapping[str, object]:
    """`extras` without the keys whose value is None (None means absent, everywhere). Returns the same mapping when
    nothing is None (the common case costs one scan)."""
    if not extras:
        return {}
    for v in extras.values():
        if v is None:
            return {k: v for k, v in extras.items() if v is not None}
    return extras


def unwrap(text: str) -> str:
    """The ground truth inside its dataset wrappers (see the module docstring), stripped."""
    if "<" not in text:  # every wrapper has one: the common case is done
        return text.strip()
    s = text.strip()
    if "<[PLHD" in s:
        s = _PLACEHOLDER.sub("", s).strip()
    low = s.lower()
    # The last non-empty answer tag; with none, the last <think> block holding JSON (Charades-STA's layout).
    tag = "answer" if "<answer>" in low else "think"
    close = low.rfind(f"</{tag}>")
    while close >= 0:
        open_ = low.rfind(f"<{tag}>", 0, close)
        if open_ < 0:
            break
        inner = s[open_ + len(tag) + 2 : close].strip()
        if inner if tag == "answer" else inner[:1] in ("{", "["):
            return inner
        close = low.rfind(f"</{tag}>", 0, open_)
    if tag == "answer":
        raise GroundTruthError(f"the ground truth's <answer> tag is empty or never closed: {s[:120]!r}")
    return s


def truth_text(gt: object, *, fold: bool = True) -> str:
    """Ground truth as text, unwrapped (see `unwrap`); numbers as written by Python (`repr` for floats). Compatibility
    forms are folded as in responses (`fold_compat`), except with `fold=False` (code tests: expected output is exact)."""
    if gt is None:
        raise GroundTruthError("ground truth is missing (None)")
    if isinstance(gt, bytes):
        gt = gt.decode("utf-8", "replace")
    if isinstance(gt, (int, float)) and not isinstance(gt, bool):
        return repr(gt) if isinstance(gt, float) else str(gt)
    if not isinstance(gt, str):
        raise GroundTruthError(f"expected a string ground truth, got {type(gt).__name__}: {str(gt)[:80]!r}")
    return unwrap(fold_compat(gt) if fold else gt)


def truth_json(gt: object) -> object:
    """A structured ground truth: a dict/list as is, or a JSON string (optionally wrapped, see `unwrap`)."""
    if isinstance(gt, (dict, list)):
        return gt
    if type(gt) is str and gt.isascii() and "<" not in gt and "\\" not in gt:
        # Plain ASCII JSON, the common case: nothing for `truth_text` to fold or unwrap (every wrapper has a `<`)
        # nor for `clean_payload` to strip (a `{` or `[` start is no decoration, and no `\` is in it).
        s = gt.strip()
        if s[:1] in ("{", "["):
            return _json_truth(s)
    return _json_truth(clean_payload(strip_fence(truth_text(gt))))  # (the fence first: clean_payload eats backticks)


def _json_truth(s: str) -> object:
    """The parsed JSON text; invalid JSON (or nesting too deep for the parser) is a GroundTruthError."""
    whole = json_value_at(s)
    if whole is not None and whole[1] == len(s):  # one value, nothing around it: what json.loads returns
        return whole[0]
    try:  # anything else: json.loads decides (surrounding whitespace) or says what is wrong
        return json.loads(s)
    except (ValueError, RecursionError) as e:
        raise GroundTruthError(f"ground truth is not valid JSON ({e}): {s[:120]!r}") from None


def extra_float(extras: Mapping[str, object], key: str, default: float) -> float:
    """A non-negative number from extras; absent or None -> `default`."""
    v = extras.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise GroundTruthError(f"extras[{key!r}] must be a non-negative number, got {v!r}")
    return float(v)


def extra_bool(extras: Mapping[str, object], key: str, default: bool = False) -> bool:
    """true/false from extras; absent or None -> `default`."""
    v = extras.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise GroundTruthError(f"extras[{key!r}] must be true or false, got {v!r}")
    return v


def references(ground_truth: object, *, normalize: bool = True) -> list[str]:
    """One text reference, or several (a list, or a JSON list string); case/space-normalised unless
    `normalize=False`. Used by the text scorers and by the router's LLM-judge path."""
    if isinstance(ground_truth, (list, tuple)):
        refs = [truth_text(x) for x in ground_truth]
    else:
        text = truth_text(ground_truth)
        refs = [text]
        if text.startswith("[") and text.endswith("]"):
            try:
                v = json.loads(text)
            except ValueError:
                v = None
            if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                refs = v
    refs = [normalize_text(r) if normalize else r.strip() for r in refs]
    if not any(refs):
        raise GroundTruthError(f"text ground truth is empty: {ground_truth!r}")
    return [r for r in refs if r]
