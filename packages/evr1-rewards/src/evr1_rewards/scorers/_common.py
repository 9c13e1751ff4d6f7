"""Helpers shared by scorers: ground-truth unwrapping, extras lookup, candidate search."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import TypeVar

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response, clean_payload

T = TypeVar("T")


def truth_text(gt: object) -> str:
    """Ground truth as text, unwrapped from `<answer>…</answer>` (the last non-empty tag) if present."""
    if gt is None:
        raise GroundTruthError("ground truth is missing (None)")
    if isinstance(gt, bytes):
        gt = gt.decode("utf-8", "replace")
    if isinstance(gt, (int, float)) and not isinstance(gt, bool):
        return repr(gt) if isinstance(gt, float) else str(gt)
    if not isinstance(gt, str):
        raise GroundTruthError(f"expected a string ground truth, got {type(gt).__name__}: {str(gt)[:80]!r}")
    s = gt.strip()
    low = s.lower()
    close = low.rfind("</answer>")
    while close >= 0:
        open_ = low.rfind("<answer>", 0, close)
        if open_ < 0:
            break
        inner = s[open_ + 8 : close].strip()
        if inner:
            return inner
        close = low.rfind("</answer>", 0, open_)
    return s


def truth_json(gt: object) -> object:
    """A structured ground truth: a dict/list as is, or a JSON string (optionally inside `<answer>` tags)."""
    if isinstance(gt, (dict, list)):
        return gt
    s = clean_payload(truth_text(gt))
    if s.startswith("```"):
        s = s.strip("`").removeprefix("json").strip()
    try:
        return json.loads(s)
    except (ValueError, RecursionError) as e:
        raise GroundTruthError(f"ground truth is not valid JSON ({e}): {s[:120]!r}") from None


def extra_float(extras: Mapping[str, object], key: str, default: float) -> float:
    v = extras.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise GroundTruthError(f"extras[{key!r}] must be a non-negative number, got {v!r}")
    return float(v)


def first_parsed(resp: Response, parse: Callable[[str], T | None]) -> tuple[T | None, str, bool]:
    """Try the answer candidates in priority order: (value, source, parsed_from_primary_candidate)."""
    for i, cand in enumerate(resp.candidates()):
        value = parse(cand.text)
        if value is not None:
            return value, cand.source, i == 0
    return None, "none", False
