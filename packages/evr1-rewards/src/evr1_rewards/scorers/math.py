r"""Math: math-verify equivalence (gold first), with a hard timeout in a worker process; option letters → multiple choice.

Fast path (no extra needed): a ground truth that is an option letter is scored as multiple choice; an answer and a
ground truth that are both plain numbers are compared numerically. Anything else (LaTeX, expressions, sets) goes to
`math_verify.verify(parse(gold), parse(answer))` in a persistent worker subprocess: math-verify's own timeouts use
signals (main thread only) and sympy can hang, so a call that overruns `extras["math_timeout"]` seconds (default 5)
kills the worker and scores 0. Needs `pip install "evr1-rewards[math]"` for the non-fast path.

Bounded before parsing: what is sent to math-verify is the final-answer span — the last `$…$` / `\(…\)` / `\[…\]`
segment of the answer, else the answer itself when it is short, else its last line — and a span longer than
MAX_ANSWER_CHARS, with more than MAX_TOKENS words or nested deeper than MAX_NESTING brackets is rejected (0) at once.
No answer that can be rejected cheaply waits on the worker's timeout; the timeout stays for the rest.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import select
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass

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
for line in sys.stdin:
    try:
        req = json.loads(line)
        g, p = _p(req["gold"]), _p(req["pred"])
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
            if not ready:
                self.close()
                return None
            line = self.proc.stdout.readline()
        except (OSError, ValueError):
            self.close()
            return None
        if not line:
            self.close()
            return None
        return line.strip() == "1"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


class _Pool:
    """Idle workers reused across calls and threads; a timed-out worker is replaced by a fresh one."""

    def __init__(self) -> None:
        self.idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()

    def verify(self, gold: str, pred: str, timeout: float) -> bool:
        try:
            worker = self.idle.get_nowait()
        except queue.Empty:
            worker = _Worker()
        if not worker.alive():
            worker = _Worker()
        result = worker.ask(gold, pred, timeout)
        if result is None:
            self.idle.put(_Worker())  # replace the killed worker now, so it warms up while others score
            return False
        self.idle.put(worker)
        return result


_POOL = _Pool()


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
    return span, ""


@dataclass(frozen=True, slots=True)
class MathTruth:
    """The gold answer (cleaned LaTeX / text), the worker timeout, and for option-letter golds the letter + options."""

    gold: str
    timeout: float
    choices: Choices | None = None


@register(MATH, requires=("math_verify",), extra="math")
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
        span, why = final_answer_span(pred)
        if span is None:
            return Outcome(0.0, False, {"source": cand.source, "rejected": why})
        if not math_verify_available():
            raise MissingExtraError("the 'math' scorer (non-numeric answers)", "math", "math_verify")
        ok = _POOL.verify(gold, span, timeout)
        return Outcome(1.0 if ok else 0.0, True, {"source": cand.source, "verifier": "math_verify"})
