"""Bounded JSON and span extraction from model answers, plus the 1-D / 2-D IoU maths used by grounding scorers."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping

from evr1_rewards.extract import tail
from evr1_rewards.numbers import finite_float

JSON_SCAN_CHARS = 1 << 16
"""Structured answers are searched in the last 64 KiB of the answer text."""

MAX_JSON_STARTS = 64
"""How many `{` / `[` positions (from the end) are tried as the start of a JSON value."""

_SCAN: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # typeshed omits the stdlib decoder's scan_once attribute
"""The decoder's scanner (C): `json.loads` and `raw_decode` wrap it in checks that cost as much as parsing a short
answer."""


def json_value_at(text: str, pos: int = 0) -> tuple[object, int] | None:
    """(the JSON value that starts at text[pos], the index after it), or None when none parses there — malformed, or
    nested too deeply for the parser. `json.JSONDecoder().raw_decode(text, pos)` without its wrapping."""
    try:
        return _SCAN(text, pos)
    except (StopIteration, ValueError, RecursionError):
        return None


_TIME = r"(\d{1,6}(?::\d{1,2}){0,2}(?:\.\d{1,6})?)"
_SPAN = re.compile(
    _TIME + r"[ \t]{0,2}(?:s|sec|secs|seconds?)?[ \t]{0,2}(?:-|–|—|~|to|and|until|till)[ \t]{0,2}" + _TIME
    + r"(?![\d:])"
)  # fmt: skip
_NUMS4 = re.compile(
    r"[\[\(][ \t]{0,3}(-?\d{1,9}(?:\.\d{1,9})?)[ \t]{0,3},[ \t]{0,3}(-?\d{1,9}(?:\.\d{1,9})?)[ \t]{0,3},"
    r"[ \t]{0,3}(-?\d{1,9}(?:\.\d{1,9})?)[ \t]{0,3},[ \t]{0,3}(-?\d{1,9}(?:\.\d{1,9})?)[ \t]{0,3}[\]\)]"
)


def strip_fence(s: str) -> str:
    """Without a Markdown code fence (```json … ```, on one line or several) around it."""
    s = s.strip()
    if s.startswith("```"):
        nl = s.find("\n")
        s = (s[nl + 1 :] if nl >= 0 else s.lstrip("`").removeprefix("json")).rstrip().rstrip("`")
    return s.strip()


def find_json(text: str, *, want: type = dict) -> object | None:
    """The answer's JSON value of type `want`: the whole text if it parses, else the last top-level one inside it.

    Bounded: looks at the last JSON_SCAN_CHARS characters and at most MAX_JSON_STARTS start positions; a value nested
    too deeply for the parser is skipped, never raised.
    """
    window = strip_fence(tail(text, JSON_SCAN_CHARS))
    if not window:
        return None
    opener = "{" if want is dict else "["
    if window[0] == opener:  # the whole (stripped) window is one value: what `json.loads(window)` would return
        whole = json_value_at(window)
        if whole is not None and whole[1] == len(window) and isinstance(whole[0], want):
            return whole[0]
    best: tuple[int, int, object] | None = None  # (end, -start, value): the latest-ending, outermost value wins
    end = len(window)
    for _ in range(MAX_JSON_STARTS):
        pos = window.rfind(opener, 0, end)
        if pos < 0:
            break
        end = pos
        found = json_value_at(window, pos)
        if found is None:
            continue
        v, stop = found
        if isinstance(v, want) and (best is None or (stop, -pos) > best[:2]):
            best = (stop, -pos, v)
    return best[2] if best else None


def as_float(v: object) -> float | None:
    """A finite float from a JSON number or numeric string; None otherwise (booleans are not numbers)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, int):
        try:
            return float(v)
        except OverflowError:  # a JSON integer beyond float range (`1` and 400 zeros) is no coordinate or time
            return None
    if not isinstance(v, str) or len(v) >= 64:
        return None
    return finite_float(v.strip().rstrip("s"))


def parse_time(token: str) -> float | None:
    """Seconds from '12.5', '01:30' or '1:02:03.5'."""
    parts = token.split(":")
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        return None
    out = 0.0
    for v in vals:
        out = out * 60.0 + v
    return out


def as_span(v: object) -> tuple[float, float] | None:
    """[s, e] (numbers or 'mm:ss' strings) → (s, e) as written (not re-ordered)."""
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        return None
    s, e = _seconds(v[0]), _seconds(v[1])
    return None if s is None or e is None else (s, e)


def _seconds(x: object) -> float | None:
    """Seconds from a number, a numeric string or an 'mm:ss' / 'h:mm:ss' string; None for anything else."""
    f = as_float(x)
    return parse_time(x.strip()) if f is None and isinstance(x, str) and ":" in x else f


def as_box(v: object) -> tuple[float, float, float, float] | None:
    """[x1, y1, x2, y2] → tuple, or None. Also accepts {"bbox_2d": [...]} / {"bbox": [...]} (Qwen's JSON)."""
    if type(v) is list and len(v) == 4:  # the common case, fast: four JSON integers
        x1, y1, x2, y2 = v
        if type(x1) is int and type(y1) is int and type(x2) is int and type(y2) is int:
            try:
                return float(x1), float(y1), float(x2), float(y2)
            except OverflowError:  # beyond float range: not a box
                return None
    if isinstance(v, (dict, Mapping)):
        for key in ("bbox_2d", "bbox", "box", "boxes"):
            if key in v:
                return as_box(v[key])
        return None
    if isinstance(v, (list, tuple)) and len(v) == 1:
        return as_box(v[0])
    if not isinstance(v, (list, tuple)) or len(v) != 4:
        return None
    x1, y1, x2, y2 = (as_float(x) for x in v)
    if x1 is None or y1 is None or x2 is None or y2 is None:
        return None
    return x1, y1, x2, y2


def span_from_prose(text: str) -> tuple[float, float] | None:
    """The last time span written in prose: 'from 12.5 to 20 s', '00:12–00:20', '12.5-20 seconds'."""
    spans = _SPAN.findall(tail(text, 4096))
    if not spans:
        return None
    a, b = parse_time(spans[-1][0]), parse_time(spans[-1][1])
    return (a, b) if a is not None and b is not None else None


def box_from_prose(text: str) -> tuple[float, float, float, float] | None:
    """The last bracketed 4-tuple of numbers: '[10, 20, 110, 220]' or '(10,20,110,220)'."""
    boxes = _NUMS4.findall(tail(text, 4096))
    if not boxes:
        return None
    x1, y1, x2, y2 = (float(g) for g in boxes[-1])
    return x1, y1, x2, y2


def iou_1d(a: tuple[float, float], b: tuple[float, float], min_precision: float = 0.0) -> float:
    """Temporal IoU of two ordered spans; a zero-length span matches only an identical one. With `min_precision` > 0
    (the reward gate, see `reward_iou_1d`), 0 also when less than that fraction of `a`'s length overlaps `b`."""
    inter = min(a[1], b[1]) - max(a[0], b[0])
    union = max(a[1], b[1]) - min(a[0], b[0])
    if union <= 0.0:
        return 1.0 if a == b else 0.0
    if inter <= 0 or inter < min_precision * (a[1] - a[0]):
        return 0.0
    return inter / union


MIN_PRECISION = 0.5
"""Reward mode: a predicted span, box or mask earns its IoU only when at least this fraction of it lies on the gold.
A constant oversized answer — the whole video, the whole frame — otherwise collects partial IoU on every question
(0.12–0.22 for whole-frame boxes and whole-video spans); with the gate it earns 0 unless the gold fills at least half
of it (and then it is a fair answer). Metric mode keeps the benchmarks' plain IoU."""


def reward_iou_1d(pred: tuple[float, float], gold: tuple[float, float]) -> float:
    """`iou_1d`, or 0 when less than MIN_PRECISION of the predicted span overlaps the gold."""
    return iou_1d(pred, gold, MIN_PRECISION)


def reward_iou_2d(pred: tuple[float, float, float, float], gold: tuple[float, float, float, float]) -> float:
    """`iou_2d`, or 0 when less than MIN_PRECISION of the predicted box's area overlaps the gold box."""
    return iou_2d(pred, gold, MIN_PRECISION)


def iou_2d(
    a: tuple[float, float, float, float], b: tuple[float, float, float, float], min_precision: float = 0.0
) -> float:
    """Box IoU (xyxy). Degenerate or inverted boxes have no area and score 0. With `min_precision` > 0 (the reward
    gate, see `reward_iou_2d`), 0 also when less than that fraction of `a`'s area overlaps `b`: one pass computes
    both, since tracks score this per frame."""
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    if ax2 <= ax1 or ay2 <= ay1 or bx2 <= bx1 or by2 <= by1:
        return 0.0
    iw = (ax2 if ax2 < bx2 else bx2) - (ax1 if ax1 > bx1 else bx1)
    ih = (ay2 if ay2 < by2 else by2) - (ay1 if ay1 > by1 else by1)
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    area_a = (ax2 - ax1) * (ay2 - ay1)
    if inter < min_precision * area_a:
        return 0.0
    return inter / (area_a + (bx2 - bx1) * (by2 - by1) - inter)


def frame_key(k: object) -> str | None:
    """Canonical frame/second key: '9' == '9.0' == 9 → '9'; '9.50' → '9.5'."""
    if type(k) is str and k.isdigit() and k.isascii() and len(k) < 16:
        return k if k[0] != "0" or len(k) == 1 else str(int(k))
    f = as_float(k)
    if f is None:
        return None
    r = round(f, 6)
    return str(int(r)) if r == int(r) else repr(r)
