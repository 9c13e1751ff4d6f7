r"""Math: math-verify equivalence (gold first), with a hard timeout in a worker process; option letters → multiple choice.

Fast path (no extra needed): a ground truth that is an option letter is scored as multiple choice; an answer and a
ground truth that are both plain numbers are compared numerically, and both plain numbers or numeric fractions
(`-3/4`, `\frac{3}{4}`, `$\dfrac{3}{4}$`) exactly (`exact_number`; tested to agree with math-verify). A percentage is
read as written (`300%` is 300). Anything else (LaTeX, expressions, sets) goes to
`math_verify.verify(parse(gold), parse(answer))` in a persistent worker subprocess (each gold parsed once there; a
verdict cached per (gold, span) here, since the answers of a GRPO group repeat): math-verify's own timeouts use
signals (main thread only) and sympy can hang, so a call that overruns `extras["math_timeout"]` seconds (default 5)
kills the worker and scores 0. Needs `pip install "evr1-rewards[math]"` for the non-fast path.

Bounded before parsing: what is sent to math-verify is the final-answer span — the last `$…$` / `\(…\)` / `\[…\]`
segment of the answer, else the answer itself when it is short, else its last line — and a span longer than
MAX_ANSWER_CHARS, with more than MAX_TOKENS words or nested deeper than MAX_NESTING brackets, one that asks sympy for a
gigantic integer (an exponent, factorial or binomial above MAX_MAGNITUDE: `10^{10^{10}}`, `(10^{100})!`) or one that
leaves an integral / limit / sum the gold does not have is rejected (0) at once; an answer written exactly as the gold
scores 1 without the worker.
No answer that can be rejected cheaply waits on the worker's timeout; the timeout stays for the rest.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import queue
import re
import select
import subprocess
import sys
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from fractions import Fraction

from evr1_rewards.errors import MissingExtraError
from evr1_rewards.extract import Response, clean_payload
from evr1_rewards.numbers import close, parse_number
from evr1_rewards.registry import register
from evr1_rewards.scorers.multiple_choice import Choices, extract_letter, parse_options
from evr1_rewards.truth import extra_float, truth_text
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import MATH

MAX_ANSWER_CHARS = 512
"""The longest final-answer span handed to math-verify (final answers are short; sympy is not linear)."""
MAX_TOKENS = 64
"""Whitespace-separated words in the span (math-verify reads prose as products of symbols, slowly)."""
MAX_NESTING = 16
"""Bracket nesting depth ({[( ) in the span: deeper nesting is a parser bomb, not an answer."""
SCAN_CHARS = 4096
_OPENERS = ("{", "(", "[")
_PLAIN_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d{1,40})(?:\.\d{1,40})?%?|[-+−]?\.\d{1,40}%?")
_LETTER = re.compile(r"\(?([A-Ja-j])\)?\.?")
_PERCENT = re.compile(r"\s*\\?%")

_WORKER = r"""
import json, sys
from math_verify import parse, verify
def _p(s):
    # Bare LaTeX ("\\{1, 2\\}") needs math delimiters to be read as a whole; plain text falls back to parse(s).
    r = parse("$" + s + "$") if "$" not in s and "\\boxed" not in s else []
    return r or parse(s)
try:  # warm up: the first parse loads math-verify's grammars (seconds on a loaded machine), never charged to an answer
    verify(_p("\\frac{1}{2}"), _p("0.5"))
except Exception:
    pass
sys.stdout.write("ready\n")
sys.stdout.flush()
golds = {}  # a GRPO group shares its gold: parse it once (bounded)
for line in sys.stdin:
    try:
        req = json.loads(line)
        g = golds.get(req["gold"])
        if g is None:
            if len(golds) >= 256:
                golds.clear()
            g = golds[req["gold"]] = _p(req["gold"])
        p = _p(req["pred"])
        ok = bool(g) and bool(p) and bool(verify(g, p))
    except Exception:
        ok = False
    sys.stdout.write("1\n" if ok else "0\n")
    sys.stdout.flush()
"""


STARTUP_TIMEOUT_S = 120.0
"""Importing math-verify (sympy) takes seconds on a loaded machine; it is not charged to any answer."""


class _Worker:
    def __init__(self) -> None:
        # Started now, awaited on first use: a replacement for a killed worker warms up in the background.
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )  # fmt: skip
        self.ready = False

    def _wait_ready(self) -> bool:
        assert self.proc.stdout is not None
        if not self.ready:
            ready, _, _ = select.select([self.proc.stdout], [], [], STARTUP_TIMEOUT_S)
            self.ready = bool(ready) and self.proc.stdout.readline().strip() == "ready"
            if not self.ready:
                self.close()
        return self.ready

    def ask(self, gold: str, pred: str, timeout: float) -> bool | None:
        """True/False, or None when the worker overran the timeout or died (it is then killed)."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        if not self._wait_ready():
            return None
        try:
            self.proc.stdin.write(json.dumps({"gold": gold, "pred": pred}) + "\n")
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            line = self.proc.stdout.readline() if ready else ""
        except (OSError, ValueError):
            line = ""
        if not line:  # overran the timeout, or died
            self.close()
            return None
        return line.strip() == "1"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


class _Pool:
    """Idle workers reused across calls and threads; a timed-out worker is replaced by a fresh one."""

    def __init__(self) -> None:
        self.idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()

    def verify(self, gold: str, pred: str, timeout: float) -> bool | None:
        """math-verify's verdict, or None when the worker overran `timeout` or died (it is replaced)."""
        try:
            worker = self.idle.get_nowait()
        except queue.Empty:
            worker = _Worker()
        if worker.proc.poll() is not None:
            worker = _Worker()
        result = worker.ask(gold, pred, timeout)
        if result is None:
            self.idle.put(_Worker())  # replace the killed worker now, so it warms up while others score
            return None
        self.idle.put(worker)
        return result


_POOL = _Pool()

RESULT_CACHE_SIZE = 4096
"""(gold, final-answer span) -> math-verify's verdict, kept in this process: the answers of a GRPO group often
agree, and a verdict is a pure function of the two strings (a timeout is not cached)."""
_RESULTS: dict[tuple[str, str], bool] = {}


def _verify_cached(gold: str, span: str, timeout: float) -> bool:
    key = (gold, span)
    hit = _RESULTS.get(key)
    if hit is not None:
        return hit
    verdict = _POOL.verify(gold, span, timeout)
    if verdict is None:  # timed out: 0, and not remembered (a later call may have more time)
        return False
    if len(_RESULTS) >= RESULT_CACHE_SIZE:
        _RESULTS.clear()
    _RESULTS[key] = verdict
    return verdict


def clear_cache() -> None:
    """Forget the cached verdicts (benchmarks of the cold path)."""
    _RESULTS.clear()


_EXACT = re.compile(
    r"(?P<sign>[-+−]?)[ ]{0,2}(?:\\[dt]?frac\{[ ]{0,2}(?P<fn>\d{1,30})[ ]{0,2}\}\{[ ]{0,2}(?P<fd>\d{1,30})[ ]{0,2}\}"
    r"|(?P<n>\d{1,30}(?:\.\d{1,30})?|\.\d{1,30})(?:[ ]{0,2}/[ ]{0,2}(?P<d>\d{1,30}))?)"
)


def exact_number(text: str) -> Fraction | None:
    r"""The exact value of an answer that is one plain number or numeric fraction (`0.75`, `-3/4`, `rac{3}{4}`,
    `$\dfrac{3}{4}$`), else None. These are compared here, exactly: no math-verify call is needed for them."""
    t = text.strip()
    if t[:1] == "$" and t[-1:] == "$":
        t = t.strip("$").strip()
    elif t.startswith("\\(") and t.endswith("\\)"):
        t = t[2:-2].strip()
    m = _EXACT.fullmatch(t)
    if m is None:
        return None
    num, den = Fraction(m.group("fn") or m.group("n")), Fraction(m.group("fd") or m.group("d") or 1)  # \frac or a/b
    if den == 0:
        return None
    v = num / den
    return -v if m.group("sign") in ("-", "−") else v


def math_verify_available() -> bool:
    return importlib.util.find_spec("math_verify") is not None


def _plain_number(text: str) -> bool:
    return _PLAIN_NUMBER.fullmatch(text.strip()) is not None


def _last_math_segment(text: str) -> str | None:
    r"""The last `$…$` (or `$$…$$`), `\(…\)` or `\[…\]` segment of `text`, delimiters included."""
    best: tuple[int, str] | None = None
    close = text.rfind("$")
    if close > 0:
        open_ = text.rfind("$", 0, close - 1 if text[close - 1] == "$" else close)
        if open_ >= 0:
            if open_ > 0 and text[open_ - 1] == "$":
                open_ -= 1
            best = (close, text[open_ : close + 1])
    for left, right in (("\\(", "\\)"), ("\\[", "\\]")):
        end = text.rfind(right)
        if end >= 0 and (best is None or end > best[0]):
            start = text.rfind(left, 0, end)
            if start >= 0:
                best = (end, text[start : end + 2])
    return best[1] if best else None


def _depth(text: str) -> int:
    """Maximum bracket nesting depth (cheap: only walked when there are enough openers to matter)."""
    if sum(text.count(c) for c in _OPENERS) <= MAX_NESTING:
        return 0
    depth = top = 0
    for ch in text:
        if ch in "{([":
            depth += 1
            top = max(top, depth)
        elif ch in "})]":
            depth = max(0, depth - 1)
    return top


MAX_MAGNITUDE = 1e5
"""An exponent, factorial, binomial or sum bound above this is an integer blow-up for sympy (`10^{10^{10}}`,
`(10^{100})!`, `\\sum_{k=1}^{10^{12}}`): seconds to minutes of CPU or memory inside math-verify, never an answer."""
_NUMERIC = re.compile(r"[\d\s+\-*/().^{}FG]+")
_CONSTANTS = re.compile(r"\\pi(?![A-Za-z])|\\mathrm\{e\}|(?<![A-Za-z\\])e(?![A-Za-z])")
_NUMBER_BEFORE = re.compile(r"\d+(?:\.\d+)?$")
_SCI = re.compile(r"\d[eE][-+]?\d{4,}")
_CARET = re.compile(r"\^ *")  # an exponent, where it starts
_EXPONENT = re.compile(r"[-+]?\d+(?:\.\d+)?")
_GAMMA = re.compile(r"\\Gamma(?: |\\left)*")  # \Gamma, where its argument starts
_BINOM = re.compile(r"\\[dt]?binom")
_TEX_OPS = (("\\cdot", "*"), ("\\times", "*"), ("\\left", ""), ("\\right", ""), ("\\!", ""), ("\\,", ""))


_PAIRS = {"{": "}", "(": ")", "[": "]", "}": "{", ")": "(", "]": "["}


def _match(text: str, at: int) -> int | None:
    """Index of the bracket matching the one at `at` (searching forward from an opener, backward from a closer,
    at most MAX_ANSWER_CHARS characters), or None."""
    ch = text[at : at + 1]
    if ch not in _PAIRS:
        return None
    step, inc, dec = (1, "{([", "})]") if ch in "{([" else (-1, "})]", "{([")
    depth = 0
    i = at
    while 0 <= i < len(text) and abs(i - at) < MAX_ANSWER_CHARS:
        if text[i] in inc:
            depth += 1
        elif text[i] in dec:
            depth -= 1
            if depth == 0:
                return i
        i += step
    return None


def _group(text: str, start: int) -> tuple[str, int] | None:
    """(content, end) of the balanced {…} / (…) group opening at `start`."""
    j = _match(text, start)
    return None if j is None else (text[start + 1 : j], j + 1)


def _magnitude(text: str) -> float | None:
    """|value| of a purely numeric TeX expression (`10^{12}`, `2^{2^{5}}`, `3 \\cdot 10^5`) in floats, inf when it
    overflows; None when the text is not purely numeric (a symbol, a function)."""
    t = text
    for tex, py in _TEX_OPS:
        t = t.replace(tex, py)
    t = _CONSTANTS.sub("(2.72)", t.replace("\\Gamma", "G")).strip()  # e and pi: their size is what matters
    if "!" in t:
        factorials = _postfix_factorials(t)
        if factorials is None:
            return None
        t = factorials
    if not t or not _NUMERIC.fullmatch(t) or not any(c.isdigit() for c in t):
        return None
    t = t.replace("{", "(").replace("}", ")").replace("^", "**")
    import ast as _ast

    try:
        tree = _ast.parse(t, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None

    def ev(n: _ast.AST) -> float:
        if isinstance(n, _ast.Constant) and isinstance(n.value, (int, float)):
            return float(n.value)
        if isinstance(n, _ast.Call) and isinstance(n.func, _ast.Name) and n.func.id in "FG" and len(n.args) == 1:
            v = ev(n.args[0]) + (1.0 if n.func.id == "F" else 0.0)  # F(x) = x! = Gamma(x + 1)
            return float("inf") if v > 171 else math.gamma(v) if v > 0 else 1.0
        if isinstance(n, _ast.UnaryOp) and isinstance(n.op, (_ast.USub, _ast.UAdd)):
            v = ev(n.operand)
            return -v if isinstance(n.op, _ast.USub) else v
        if isinstance(n, _ast.BinOp) and isinstance(n.op, (_ast.Add, _ast.Sub, _ast.Mult, _ast.Div, _ast.Pow)):
            a, b = ev(n.left), ev(n.right)
            try:
                if isinstance(n.op, _ast.Pow):
                    if abs(b) > 1e6 and abs(a) > 1:
                        return float("inf")
                    return float(abs(a) ** b) if a or b >= 0 else float("inf")
                if isinstance(n.op, _ast.Div):
                    return a / b if b else float("inf")
                return float(a + b if isinstance(n.op, _ast.Add) else a - b if isinstance(n.op, _ast.Sub) else a * b)
            except (OverflowError, ZeroDivisionError):
                return float("inf")
        raise ValueError

    try:
        return abs(ev(tree.body))
    except (ValueError, RecursionError):
        return None


def _operand_before(text: str, end: int) -> int | None:
    """Start of the operand that ends just before `end`: a number, a balanced group, and a power `a^{b}` / `a^b`
    whole (so `10^{10}!` is read as the factorial of 10^10, as sympy does)."""
    if end <= 0:
        return None
    if text[end - 1] in ")}":
        start = _match(text, end - 1)
    else:
        m = _NUMBER_BEFORE.search(text, 0, end)
        start = m.start() if m else None
    if start is not None and start > 0 and text[start - 1] == "^":
        return _operand_before(text, start - 1)
    return start


def _postfix_factorials(t: str) -> str | None:
    """`t` with every postfix `x!` written `F(x)` (nested ones too), or None when an operand is not numeric."""
    for _ in range(64):
        i = t.find("!")
        if i < 0:
            return t
        before = t[:i].rstrip()
        start = _operand_before(before, len(before))
        if start is None:
            return None
        t = before[:start] + "F(" + before[start:] + ")" + t[i + 1 :]
    return None


def blowup(span: str) -> str | None:
    """Why `span` would make sympy compute a gigantic integer (see MAX_MAGNITUDE), or None. Linear in the span."""
    if _SCI.search(span):
        return "exponent_too_large"
    for m in _CARET.finditer(span):
        g = _group(span, m.end())
        e = _EXPONENT.match(span, m.end()) if g is None else None
        exponent = g[0] if g is not None else e.group() if e else ""
        mag = _magnitude(exponent) if exponent else None
        if (mag is not None and mag > MAX_MAGNITUDE) or (
            "^" in exponent and mag is None and not any(c.isalpha() for c in exponent.replace("\\", ""))
        ):
            return "exponent_too_large"
    for m in re.finditer("!", span):
        before = span[: m.start()].rstrip()
        start = _operand_before(before, len(before))
        if start is not None and _exceeds(before[start:], MAX_MAGNITUDE / 10):
            return "factorial_too_large"
    for m in _GAMMA.finditer(span):
        g = _group(span, m.end())
        if g is not None and _exceeds(g[0], MAX_MAGNITUDE / 10):
            return "factorial_too_large"
    for m in _BINOM.finditer(span):
        g = _group(span, m.end())
        if g is not None and _exceeds(g[0], MAX_MAGNITUDE):
            return "binomial_too_large"
    return None


def _exceeds(text: str, limit: float) -> bool:
    """`text` is purely numeric (see `_magnitude`) and its size is above `limit`."""
    mag = _magnitude(text)
    return mag is not None and mag > limit


_UNEVALUATED = ("\\int", "\\iint", "\\oint", "\\lim", "\\sum", "\\prod")


def unevaluated(span: str, gold: str) -> bool:
    """The answer leaves an integral, limit, sum or product for sympy to evaluate that the gold does not have: it is
    not a final answer, and evaluating it can take seconds (`\\int_0^1 e^{x^{100}} dx`)."""
    return any(op in span and op not in gold for op in _UNEVALUATED)


def _same_text(a: str, b: str) -> bool:
    return "".join(a.split()).strip("$") == "".join(b.split()).strip("$")


def final_answer_span(answer: str) -> tuple[str | None, str]:
    """(the span math-verify should read, "") or (None, why it was rejected). Linear in the answer's length."""
    window = answer[-SCAN_CHARS:]
    span = _last_math_segment(window)
    if span is None:
        if len(answer) <= MAX_ANSWER_CHARS:
            span = answer
        else:
            body = window.rstrip()
            span = body[body.rfind("\n") + 1 :]
    span = span.strip()
    if not span:
        return None, "empty"
    if len(span) > MAX_ANSWER_CHARS:
        return None, "too_long"
    if len(span.split(None, MAX_TOKENS)) > MAX_TOKENS:
        return None, "too_many_words"
    if _depth(span) > MAX_NESTING:
        return None, "too_deep"
    why = blowup(span)
    if why is not None:
        return None, why
    return span, ""


@dataclass(frozen=True, slots=True)
class MathTruth:
    """The gold answer (cleaned LaTeX / text), the worker timeout, and for option-letter golds the letter + options."""

    gold: str
    timeout: float
    choices: Choices | None = None


@register(
    MATH,
    requires=("math_verify",),
    extra="math",
    answer_format="the final value (or the option letter if options are given)",
)
class Math:
    """math-verify equivalence (gold first) in a timed worker; letters via multiple choice; plain numbers directly."""

    name = "math"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> MathTruth:
        gold = clean_payload(truth_text(ground_truth))
        timeout = extra_float(extras, "math_timeout", 5.0)
        m = _LETTER.fullmatch(gold.strip())
        if m and (extras.get("options") is not None or m.group(1).isupper()):
            return MathTruth(m.group(1).upper(), timeout, parse_options(extras.get("options")))
        return MathTruth(gold, timeout)

    def format_truth(self, truth: MathTruth) -> str:
        return truth.gold

    def score(self, response: Response, truth: MathTruth, ctx: Context) -> Outcome:
        gold, timeout = truth.gold, truth.timeout
        cand = response.extraction()
        pred = clean_payload(cand.text)
        if truth.choices is not None:
            got = extract_letter(pred, truth.choices)
            return Outcome(1.0 if got == gold else 0.0, got is not None, {"source": cand.source, "pred": got or ""})
        if not pred.strip():
            return Outcome(0.0, False, {"source": cand.source})
        if len(pred) <= 128 and _plain_number(gold) and _plain_number(pred):
            g, p = parse_number(gold), parse_number(pred)
            ok = g is not None and p is not None and close(p, g, rel_tol=1e-9, abs_tol=1e-12)
            return Outcome(1.0 if ok else 0.0, True, {"source": cand.source, "verifier": "number"})
        if _same_text(pred, gold):  # the gold as written: equal without asking sympy (even if sympy would choke)
            return Outcome(1.0, True, {"source": cand.source, "verifier": "text"})
        g_exact = exact_number(gold) if len(gold) <= 128 else None
        if g_exact is not None and len(pred) <= 128:
            p_exact = exact_number(pred)
            if p_exact is not None:
                return Outcome(1.0 if p_exact == g_exact else 0.0, True, {"source": cand.source, "verifier": "exact"})
        span, why = final_answer_span(pred)
        if span is not None and unevaluated(span, gold):
            span, why = None, "unevaluated"
        if span is None:
            return Outcome(0.0, False, {"source": cand.source, "rejected": why})
        if not math_verify_available():
            raise MissingExtraError("the 'math' scorer (non-numeric answers)", "math", "math_verify")
        # A percentage is read as written (`300%` is 300), as by every numeric type: math-verify alone would also
        # accept it as 3, and `3 %` as both 3 and 0.03 - one answer right for two golds.
        ok = _verify_cached(_PERCENT.sub("", gold), _PERCENT.sub("", span), timeout)
        return Outcome(1.0 if ok else 0.0, True, {"source": cand.source, "verifier": "math_verify"})
