"""Number parsing for numerical, regression and math answers: linear, bounded, never raises on model output.

Reads integers, decimals, thousands separators (`1,000`), signs (ASCII and `−`), fractions (`3/4`, `\\frac{3}{4}`),
percentages (`50%`, `50\\%`, `50 percent`), scientific notation (`1.5e3`, `1.5 × 10^3`) and English number words
(`twenty-one`, `one hundred and five`, `two thousand`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from evr1_rewards.extract import ascii_lower, tail

SCAN_CHARS = 1024
"""Only the last SCAN_CHARS characters of an answer are searched for its (last) number."""

_NUM = re.compile(
    r"""
    (?:(?P<frac>\\[dt]?frac\{[ ]{0,3}(?P<fn>[-+−]?\d{1,30}(?:\.\d{1,30})?)[ ]{0,3}\}
             \{[ ]{0,3}(?P<fd>[-+−]?\d{1,30}(?:\.\d{1,30})?)[ ]{0,3}\})
    |(?P<num>[-+−]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d{1,40})(?:\.\d{1,40})?|[-+−]?\.\d{1,40})
     (?P<exp>[eE][-+]?\d{1,4}(?![A-Za-z])|[ ]{0,2}(?:×|\*|\\times|x)[ ]{0,2}10[ ]{0,1}\^[ ]{0,1}\{?[ ]{0,1}(?P<e2>[-+−]?\d{1,4})\}?)?
     (?P<den>[ ]{0,2}/[ ]{0,2}\d{1,30}(?:\.\d{1,30})?)?
    )
    (?P<pct>[ ]{0,2}(?:%|\\%|percent\b|per[ ]cent\b))?
    """,
    re.X,
)

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True, slots=True)
class Number:
    """A parsed number; `percent` remembers a `%` so `50%` can match both `0.5` and `50`."""

    value: float
    percent: bool = False

    def candidates(self) -> tuple[float, ...]:
        return (self.value, self.value / 100.0) if self.percent else (self.value,)


def _to_float(s: str) -> float | None:
    s = s.replace(",", "").replace("−", "-").strip()
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _from_match(text: str, m: re.Match[str]) -> Number | None:
    pct = m.group("pct") is not None
    if m.group("frac"):
        n, d = _to_float(m.group("fn")), _to_float(m.group("fd"))
        if n is None or not d:
            return None
        return Number(n / d, pct)
    raw = m.group("num")
    # A '-' glued to a preceding letter or digit is a hyphen or range dash ("12-20", "COVID-19"), not a sign.
    if raw[0] in "-−" and m.start() > 0 and text[m.start() - 1].isalnum():
        raw = raw[1:]
    v = _to_float(raw)
    if v is None:
        return None
    if m.group("exp"):
        e = m.group("e2") if m.group("e2") is not None else m.group("exp")[1:]
        ev = _to_float(e)
        if ev is None:
            return None
        try:
            v = v * 10.0**ev
        except OverflowError:
            return None
        if not math.isfinite(v):
            return None
    if m.group("den"):
        d = _to_float(m.group("den").strip().lstrip("/"))
        if not d:
            return None
        v = v / d
    return Number(v, pct)


def find_numbers(text: str) -> list[Number]:
    """All numbers in the last SCAN_CHARS characters of `text`, in order."""
    window = tail(text, SCAN_CHARS)
    out = []
    for m in _NUM.finditer(window):
        n = _from_match(window, m)
        if n is not None:
            out.append(n)
    return out


def _first_number(text: str) -> Number | None:
    window = text[:SCAN_CHARS]
    for m in _NUM.finditer(window):
        n = _from_match(window, m)
        if n is not None:
            return n
    return None


def _last_number(text: str) -> Number | None:
    """The last number, converting only from the end (a flood of numbers costs one regex pass, not one parse each)."""
    window = tail(text, SCAN_CHARS)
    matches = list(_NUM.finditer(window))
    for m in reversed(matches):
        n = _from_match(window, m)
        if n is not None:
            return n
    return None


def words_to_number(text: str) -> float | None:
    """The last run of English number words: 'twenty-one' = 21, 'one hundred' = 100, 'two thousand and five' = 2005."""
    words = _WORD.findall(ascii_lower(tail(text, SCAN_CHARS)).replace("-", " "))
    best: float | None = None
    total = current = 0
    in_run = False
    last = ""  # category of the previous word: unit, teen, tens, hundred, scale
    for w in [*words, "."]:
        cat = ""
        if w in _UNITS:
            cat = "teen" if _UNITS[w] >= 10 else "unit"
        elif w in _TENS:
            cat = "tens"
        elif w == "hundred":
            cat = "hundred"
        elif w in _SCALES:
            cat = "scale"
        elif w == "and" and in_run:
            continue
        # A unit right after a unit/teen ("one two") or tens after tens starts a new number.
        restart = in_run and (
            (cat in ("unit", "teen") and last in ("unit", "teen"))
            or (cat == "tens" and last in ("tens", "unit", "teen"))
        )
        if in_run and (not cat or restart):
            best = float(total + current)
            total = current = 0
            in_run = False
        if not cat:
            continue
        in_run = True
        if cat in ("unit", "teen"):
            current += _UNITS[w]
        elif cat == "tens":
            current += _TENS[w]
        elif cat == "hundred":
            current = (current or 1) * 100
        else:
            total += (current or 1) * _SCALES[w]
            current = 0
        last = cat
    return best


def parse_number(text: str) -> Number | None:
    """The answer's number: the one after the last '=' if any, else the last number, else number words."""
    if not text:
        return None
    eq = text.rfind("=", max(0, len(text) - SCAN_CHARS))
    if 0 <= eq < len(text) - 1:
        after = _first_number(text[eq + 1 :])
        if after is not None:
            return after
    last = _last_number(text)
    if last is not None:
        return last
    w = words_to_number(text)
    return Number(w) if w is not None else None


def close(a: Number, b: Number, *, rel_tol: float, abs_tol: float) -> bool:
    """Equal within tolerance, reading a percentage either as written or divided by 100."""
    return any(math.isclose(x, y, rel_tol=rel_tol, abs_tol=abs_tol) for x in a.candidates() for y in b.candidates())
