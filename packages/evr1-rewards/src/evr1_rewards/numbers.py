"""Number parsing for numerical, regression and math answers: linear, bounded, never raises on model output.

Reads integers, decimals, thousands separators (`1,000`), signs (ASCII and `−`), fractions (`3/4`, `\\frac{3}{4}`),
percentages (`50%`, `50\\%`, `50 percent`), scientific notation (`1.5e3`, `1.5 × 10^3`), English number words
(`twenty-one`, `one hundred and five`, `two thousand`) and Chinese numerals (`三十五`, `一百零二`, `两万三千`, `三点五`,
`百分之五十`, `二〇二四`, financial `贰拾`, and Arabic numbers scaled by 万/亿: `1.5万`).
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from evr1_rewards.extract import ascii_lower, tail

SCAN_CHARS = 1024
"""Only the last SCAN_CHARS characters of an answer are searched for its (last) number."""

_NUM = re.compile(
    r"""
    (?=[-+−.\d\\])  # every number starts with one of these: lets the scan skip other positions quickly
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
_NUMBER_WORDS: dict[str, tuple[str, int]] = {
    **{w: ("teen" if v >= 10 else "unit", v) for w, v in _UNITS.items()},
    **{w: ("tens", v) for w, v in _TENS.items()},
    "hundred": ("hundred", 100),
    **{w: ("scale", v) for w, v in {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}.items()},
}
"""Number word -> (its category: unit, teen, tens, hundred, scale; its value)."""
_WORD = re.compile(r"[a-z]+")


class Number(NamedTuple):
    """A parsed number as written; `percent` remembers a `%` (for display). A percentage is compared as written —
    `%` is a unit, like any other — so `300%` is 300 and never also 3: one answer cannot be right for two different
    golds. (An immutable named tuple: scorers create one per answer, cheaper than a frozen dataclass.)"""

    value: float
    percent: bool = False


def finite_float(s: str) -> float | None:
    """`float(s)` when `s` reads as a finite number, else None (never raises)."""
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _to_float(s: str) -> float | None:
    return finite_float(s.replace(",", "").replace("−", "-").strip())


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
    if m.group("exp"):  # `e-3` or `× 10^{-3}`: the exponent's digits always read as a float
        try:
            v = v * 10.0 ** float((m.group("e2") or m.group("exp")[1:]).replace("−", "-"))
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


def _first_number(text: str) -> Number | None:
    window = text[:SCAN_CHARS]
    for m in _NUM.finditer(window):
        n = _from_match(window, m)
        if n is not None:
            return n
    return None


def _last_number(text: str) -> tuple[int, Number] | None:
    """The last number and where it ends in the window, converting only from the end (a flood of numbers costs one
    regex pass, not one parse each). An Arabic number followed by 万 / 亿 is scaled by it."""
    window = tail(text, SCAN_CHARS)
    matches = list(_NUM.finditer(window))
    for m in reversed(matches):
        n = _from_match(window, m)
        if n is not None:
            after = window[m.end() : m.end() + 2]
            unit = after[1:] if after[:1] == " " else after[:1]
            if m.group("pct") is None and unit in _CN_BIG:
                return m.end() + len(after[: after.index(unit) + 1]), Number(n.value * _CN_BIG[unit])
            return m.end(), n
    return None


_CN_DIGITS = {
    "零": 0, "〇": 0, "一": 1, "壹": 1, "二": 2, "两": 2, "兩": 2, "贰": 2, "貳": 2, "三": 3, "叁": 3, "參": 3,
    "四": 4, "肆": 4, "五": 5, "伍": 5, "六": 6, "陆": 6, "陸": 6, "七": 7, "柒": 7, "八": 8, "捌": 8, "九": 9, "玖": 9,
}  # fmt: skip
_CN_SMALL = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
_CN_BIG = {"万": 10**4, "萬": 10**4, "亿": 10**8, "億": 10**8}
_CN_RUN = re.compile(
    "(?P<pct>百分之)?(?P<neg>[负負])?(?P<int>[" + "".join([*_CN_DIGITS, *_CN_SMALL, *_CN_BIG]) + "]{1,40})"
    "(?:[点點](?P<dec>[" + "".join(_CN_DIGITS) + "]{1,20}))?"
)


def _cn_integer(run: str) -> int:
    """一百零二 = 102, 两万三千 = 23000, 十二 = 12, 一亿二千万 = 120000000; a run of bare digits reads positionally
    (二〇二四 = 2024)."""
    if not any(ch in _CN_SMALL or ch in _CN_BIG for ch in run):
        return int("".join(str(_CN_DIGITS[ch]) for ch in run))
    total = section = number = 0
    for ch in run:
        if ch in _CN_DIGITS:
            number = _CN_DIGITS[ch]
        elif ch in _CN_SMALL:
            section += (number or 1) * _CN_SMALL[ch]
            number = 0
        elif _CN_BIG[ch] == 10**8:
            total = ((total + section + number) or 1) * 10**8  # a bare 亿 is one 亿
            section = number = 0
        else:
            section = ((section + number) or (0 if total else 1)) * 10**4
            number = 0
    return total + section + number


def chinese_to_number(text: str) -> tuple[int, Number] | None:
    """The last Chinese numeral in the tail of `text` and where it ends there (None when there is none)."""
    window = tail(text, SCAN_CHARS)
    if window.isascii():
        return None
    matches = list(_CN_RUN.finditer(window))
    if not matches:
        return None
    last = matches[-1]
    value = float(_cn_integer(last.group("int")))
    if last.group("dec"):
        value += float("0." + "".join(str(_CN_DIGITS[ch]) for ch in last.group("dec")))
    if last.group("neg"):
        value = -value
    return last.end(), Number(value, percent=last.group("pct") is not None)


def words_to_number(text: str) -> float | None:
    """The last run of English number words: 'twenty-one' = 21, 'one hundred' = 100, 'two thousand and five' = 2005."""
    words = _WORD.findall(ascii_lower(tail(text, SCAN_CHARS)).replace("-", " "))
    best: float | None = None
    total = current = 0
    in_run = False
    last = ""  # category of the previous word: unit, teen, tens, hundred, scale
    for w in [*words, "."]:
        if w == "and" and in_run:
            continue
        cat, value = _NUMBER_WORDS.get(w, ("", 0))
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
        if cat == "hundred":
            current = (current or 1) * 100
        elif cat == "scale":
            total += (current or 1) * value
            current = 0
        else:
            current += value
        last = cat
    return best


_PLAIN = re.compile(r"[ \t]{0,8}([-+]?)((?:\d{1,3}(?:,\d{3})+|\d{1,40})(?:\.\d{1,40})?|\.\d{1,40})(%?)[ \t]{0,8}")


def parse_number(text: str) -> Number | None:
    """The answer's number: the one after the last '=' if any, else the last number, else number words."""
    if not text:
        return None
    if len(text) <= 96:
        # Fast paths, same result as the general one: the whole answer is one plain number ("42", "1,250", "50%").
        s = text.strip(" \t")
        body = s[1:] if s[:1] in ("-", "+") else s
        if body.isascii() and body.replace(".", "", 1).isdigit() and body[-1:] != "." and len(body) <= 80:
            v = float(body)
            return Number(-v if s[0] == "-" else v)
        m = _PLAIN.fullmatch(text)
        if m is None and text.isascii() and "=" not in text:
            # "0 3.4", "about 12 or 13": the last whitespace-separated token is a plain number and nothing before it
            # can join it (an operator, an exponent, a fraction bar): it is the last number.
            body = text.rstrip(" \t")
            cut = max(body.rfind(" "), body.rfind("\t"), body.rfind("\n"))
            last, before = body[cut + 1 :], body[:cut].rstrip()
            if cut > 0 and last and before and before[-1] not in _JOINERS and len(last) <= 40:
                m = _PLAIN.fullmatch(last)
        if m is not None:
            v = float(m.group(2).replace(",", ""))
            if math.isfinite(v):
                return Number(-v if m.group(1) == "-" else v, m.group(3) == "%")
    return parse_number_general(text)


_JOINERS = frozenset("/^{*x\\=(+-−×,.:")
"""Characters that can make the text before a number part of it (a fraction, an exponent, a range, a sign)."""


def parse_number_general(text: str) -> Number | None:
    """`parse_number` without the plain-number fast path (what the fast path must agree with)."""
    if not text:
        return None
    eq = text.rfind("=", max(0, len(text) - SCAN_CHARS))
    if 0 <= eq < len(text) - 1:
        after = _first_number(text[eq + 1 :])
        if after is not None:
            return after
    arabic, chinese = _last_number(text), chinese_to_number(text)
    if arabic is not None or chinese is not None:
        # whichever ends later in the answer ("第1步 … 答案是三十五" -> 35; "三个里选了2" -> 2)
        return max((x for x in (arabic, chinese) if x is not None), key=lambda x: x[0])[1]
    w = words_to_number(text)
    return Number(w) if w is not None else None


def close(a: Number, b: Number, *, rel_tol: float, abs_tol: float) -> bool:
    """Equal within tolerance, as written (a percentage is its number of percent: `50%` equals `50`, not `0.5`)."""
    return math.isclose(a.value, b.value, rel_tol=rel_tol, abs_tol=abs_tol)
