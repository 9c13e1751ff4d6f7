"""Shared answer extraction: linear time on any input, documented order, never raises.

Order (REWARDS.md): the last complete `<answer>…</answer>` → the last balanced `\\boxed{…}` → the last explicit
final-answer statement ("the (final) answer is X", "Answer: X", "答案是X") → the text after the last `</think>` → the
whole text. When a `</think>` is followed by text, only that text is searched for boxed answers and statements, so
reasoning inside `<think>` is never mined when a later answer exists.

Everything here uses `str.find`/`rfind` and anchored, bounded regexes: no scan is repeated per candidate, so the cost is
linear in the response length, and responses are capped at `MAX_RESPONSE_CHARS` (the tail is kept).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from evr1_rewards.end_of_turn import end_of_turn_tokens, strip_end_of_turn

MAX_RESPONSE_CHARS = 1 << 20
"""Longer responses are scored on their last MAX_RESPONSE_CHARS characters (and never earn the format score)."""

MAX_BOXED_CHARS = 4096
"""A `\\boxed{…}` whose braces do not balance within this many characters is not an answer."""

MAX_CANDIDATE_TRIES = 32
"""How many occurrences (from the end) of `\\boxed{` or `answer` are examined before giving up."""

Source = Literal["answer_tag", "boxed", "statement", "after_think", "text"]

_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}
_BRACES = re.compile(r"[{}]")
_STMT_AFTER = re.compile(
    r"(?:\*\*)?[ \t]{0,3}(?:(?:is|would be|should be|will be)(?![a-z])[ \t]{0,3}[:：]?|[:：])[ \t]{0,3}(?:\*\*)?[ \t]{0,3}"
)
_STMT_PREFIX_WORDS = frozenset(
    {"the", "final", "correct", "best", "right", "my", "so", "thus", "therefore", "hence", "short", "an", "answer"}
)
_LAST_WORD = re.compile(r".*(?<![a-z])([a-z]++)[^a-z]{0,3}+", re.S)
"""With `fullmatch`: the last word, followed by at most 3 other characters. The greedy `.*` backs off from the end,
so only the last few characters are tried (a search from the front tries every position of the text)."""
_ZH_AFTER = re.compile(r"[ \t]{0,3}(?:是|为|:|：)[ \t]{0,3}")
_TRAILING = ".。;；*$ \t"
_BARE_STATEMENT = ("answer", "answer is", "answer would be", "answer should be", "answer will be")


_KEPT = re.compile(
    "([\u00aa\u00b2\u00b3\u00b9\u00ba\u00bc-\u00be\u1d2c-\u1d6a\u1d9b-\u1dbf\u2070-\u209f\u2150-\u215f\u2189"
    "\u2c7c\u2c7d\ua69c\ua69d\ua770\ua7f8\ua7f9\uab5c-\uab5f\U0001e030-\U0001e06d])"
)
"""Superscripts, subscripts and vulgar fractions: compatibility forms NOT folded (`10²` is not `102`, `x₁` is not
`x1`, `½` is not `1⁄2` to a number parser)."""
MAX_KEPT = 256
"""An answer with more kept characters than this is not folded at all (bounded work; folding only helps honest
answers read right, so skipping it gains an attacker nothing)."""


FOLD_CHARS = 1 << 16
"""Only the last FOLD_CHARS characters are folded (where every real answer is): a megabyte of full-width text would
otherwise cost ~50 ms of NFKC per call."""


def fold_compat(text: str) -> str:
    """Unicode compatibility forms read as their plain forms (NFKC): full-width `Ｂ`, `ｙｅｓ`, `Response ２`,
    mathematical `𝐁`, no-break and ideographic spaces — so every type reads them alike. Superscripts, subscripts and
    vulgar fractions are kept (they change a number's value). Linear, C speed: ASCII and already-normal text (most
    CJK) are returned after a quick check; only the last FOLD_CHARS characters are folded."""
    if text.isascii():
        return text
    if len(text) > FOLD_CHARS:
        cut = len(text) - FOLD_CHARS
        return text[:cut] + fold_compat(text[cut:])
    if unicodedata.is_normalized("NFKC", text):
        return text
    parts = _KEPT.split(text, MAX_KEPT + 1) if _KEPT.search(text) else None
    if parts is None:
        return unicodedata.normalize("NFKC", text)
    if len(parts) > 2 * MAX_KEPT + 1:
        return text
    # (the pattern's group keeps the marks: they are the odd parts, left as written)
    return "".join(p if i % 2 else unicodedata.normalize("NFKC", p) for i, p in enumerate(parts))


def ascii_lower(text: str) -> str:
    """Lower-case ASCII letters only, so indices into the result are indices into `text` (str.lower can change length)."""
    if text.isascii():
        return text.lower()
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


def tail(text: str, limit: int) -> str:
    """The last `limit` characters, cut at a whitespace boundary when one is near, so no token is split."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    space = text.find(" ", cut, cut + 64)
    return text[space + 1 :] if space >= 0 else text[cut:]


@dataclass(frozen=True, slots=True)
class Extraction:
    """The answer text and where it came from (for logging and for the format score)."""

    text: str
    source: Source


_SET_TEXT, _SET_SOURCE = Extraction.__dict__["text"].__set__, Extraction.__dict__["source"].__set__


def _extraction(text: str, source: Source) -> Extraction:
    """`Extraction(text, source)` through its slots (a frozen dataclass's __init__ costs twice as much; several are
    built per response)."""
    e = object.__new__(Extraction)
    _SET_TEXT(e, text)
    _SET_SOURCE(e, source)
    return e


class Response:
    """A model response with cached, lazily computed views shared by the router, the format check and scorers.

    A trailing run of end-of-turn tokens (`<|im_end|>`, `<end_of_turn>`, … see `evr1_rewards.end_of_turn`) is removed
    first, so chat-template markers never cost the format score or reach an extractor; then compatibility forms are
    folded (`fold_compat`; `fold=False` for code, whose text is a program)."""

    __slots__ = ("_after_think", "_candidates", "_tag", "low", "text", "truncated")

    def __init__(self, text: object, end_of_turn: tuple[str, ...] | None = None, *, fold: bool = True) -> None:
        if not isinstance(text, str):
            text = "" if text is None else text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        text = strip_end_of_turn(text, end_of_turn if end_of_turn is not None else end_of_turn_tokens())
        if fold:  # not for programs: a full-width string literal is part of what the program prints
            text = fold_compat(text)
        self.truncated = len(text) > MAX_RESPONSE_CHARS
        self.text: str = text[-MAX_RESPONSE_CHARS:] if self.truncated else text
        self.low: str = ascii_lower(self.text)
        self._tag: str | bool | None = False
        self._after_think: tuple[int, bool] | None = None
        self._candidates: list[Extraction] | None = None

    # -- sources ---------------------------------------------------------------------------------------------------
    @property
    def answer_tag(self) -> str | None:
        """Content of the last complete `<answer>…</answer>` (tags case-insensitive), stripped; None if absent/empty,
        and None when it lies inside the reasoning block and text follows `</think>`: the final answer outside the
        reasoning wins (`<think><answer>B</answer></think> The answer is A.` answers A)."""
        if self._tag is False:
            self._tag = None
            close = self.low.rfind("</answer>")
            start, after_think = self.region()
            if close >= 0 and not (after_think and close < start):
                open_ = self.low.rfind("<answer>", 0, close)
                if open_ >= 0:
                    content = self.text[open_ + 8 : close].strip()
                    self._tag = content or None
        return self._tag if isinstance(self._tag, str) else None

    def region(self) -> tuple[int, bool]:
        """(start, after_think): where boxed answers and statements are searched."""
        if self._after_think is None:
            close = self.low.rfind("</think>")
            self._after_think = (close + 8, True) if close >= 0 and self.text[close + 8 :].strip() else (0, False)
        return self._after_think

    def candidates(self) -> list[Extraction]:
        """Answer candidates in priority order. A complete answer tag is authoritative: nothing else is offered."""
        if self._candidates is None:
            tag = self.answer_tag
            if tag is not None:
                self._candidates = [_extraction(tag, "answer_tag")]
                return self._candidates
            start, after_think = self.region()
            out: list[Extraction] = []
            boxed = last_boxed(self.text, start)
            if boxed is not None:
                out.append(_extraction(boxed, "boxed"))
            stmt = last_statement(self.text, self.low, start)
            if stmt is not None:
                out.append(_extraction(stmt, "statement"))
            out.append(_extraction(self.text[start:].strip(), "after_think" if after_think else "text"))
            self._candidates = out
        return self._candidates

    def extraction(self) -> Extraction:
        return self.candidates()[0]


def last_boxed(text: str, start: int = 0) -> str | None:
    """Content of the last `\\boxed{…}` whose braces balance (within MAX_BOXED_CHARS), searching text[start:]."""
    end = len(text)
    for _ in range(MAX_CANDIDATE_TRIES):
        pos = text.rfind("\\boxed{", start, end)
        if pos < 0:
            return None
        body = pos + 7
        depth = 1
        for m in _BRACES.finditer(text, body, min(len(text), body + MAX_BOXED_CHARS)):
            depth += 1 if m.group() == "{" else -1
            if depth == 0:
                return text[body : m.start()].strip()
        end = pos
    return None


def _statement_prefix_ok(low: str, pos: int) -> bool:
    """'answer' at `pos` counts when it starts a line or follows 'the', 'final', 'my', … (not 'to answer this')."""
    before = low[max(0, pos - 24) : pos].rstrip(" \t*#-")
    if not before or before.endswith(("\n", ":", "：", ".", ",", ">")):
        return True
    m = _LAST_WORD.fullmatch(before)
    return m is not None and m.group(1) in _STMT_PREFIX_WORDS


def _rest_of_line(text: str, pos: int, *, next_line: bool = True) -> str:
    nl = text.find("\n", pos, pos + 4096)
    line = text[pos : nl if nl >= 0 else min(len(text), pos + 4096)].strip().rstrip(_TRAILING).strip()
    if not line and nl >= 0 and next_line:
        return _rest_of_line(text, nl + 1, next_line=False)  # "The answer is:\nB": the next line
    return line


def last_statement(text: str, low: str, start: int = 0) -> str | None:
    """The payload of the last explicit final-answer statement in text[start:] (English or Chinese)."""
    best_pos = -1
    best: str | None = None
    end = len(low)
    for _ in range(MAX_CANDIDATE_TRIES):
        pos = low.rfind("answer", start, end)
        if pos < 0:
            break
        m = _STMT_AFTER.match(low, pos + 6)
        if m and _statement_prefix_ok(low, pos):
            payload = _rest_of_line(text, m.end())
            # "the answer is the answer is" names no answer: a payload that is itself a bare statement is skipped.
            if payload and not payload.lower().rstrip(" :：*").endswith(_BARE_STATEMENT):
                best_pos, best = pos, payload
                break
        end = pos
    zh_end = len(text)
    for _ in range(MAX_CANDIDATE_TRIES):
        pos = text.rfind("答案", max(start, best_pos + 1), zh_end)
        if pos < 0:
            break
        m = _ZH_AFTER.match(text, pos + 2)
        if m:
            payload = _rest_of_line(text, m.end())
            if payload:
                return payload
        zh_end = pos
    return best


_FILLER = (
    r"say|saying|choose|choosing|pick|picking|select|selecting|go|going|with|for|the|option|choice|response|answer|"
    r"it|it's|it’s|is|be|that|think|agree|sure|definitely|necessarily|really|just|simply|to|would|will|can|could|should"
)
_NEGATED_BEFORE = re.compile(
    r"(?:\bnot|\bcannot|n['’]t|\bnever|\bneither|\bnor|\bexcept(?:\s+for)?|\brather\s+than|\binstead\s+of|\bother\s+than"
    r"|\banything\s+but|\bexclud(?:e|es|ed|ing)|\breject(?:s|ed|ing)?|\bruled?\s+out)"
    rf"(?:[\s,:]{{1,3}}(?:{_FILLER})){{0,4}}[\s:\"'(\[*]{{0,4}}$"
)
_REJECTED_AFTER = re.compile(
    r"[\s)\]*\"']{0,4}(?:(?:is|was|are|seems|looks|would\s+be)\s{1,3}(?:definitely\s+|clearly\s+|certainly\s+|also\s+)?"
    r"(?:the\s+)?(?:not\b|never\b|wrong|incorrect|false\b|worse|worst|inferior|a\s+distractor|ruled\s+out|eliminated"
    r"|excluded)|(?:wrong|incorrect|worse|worst|inferior)\b)"
)
_ANY_REJECTION = re.compile(
    r"not|n['’]t|never|neither|nor|except|rather|instead|other|anything|exclud|reject|rule|wrong|incorrect|false|"
    r"worse|worst|inferior|distractor|eliminat"
)
"""A word every rejection contains: an answer without one is not searched further (the common case, one scan)."""
REJECT_SCAN_CHARS = 4096
"""Only the last REJECT_SCAN_CHARS characters of an answer are searched for a rejected answer token."""


def rejected(text: str, token: re.Pattern[str], *, last_only: bool = False, lower: bool = True) -> bool:
    """True when the answer negates or rejects the answer token it names: `not B`, `B is wrong`, "I can't say
    yes", "Response 2 is worse", "The answer is not 42". `token` matches the chosen answer (in the ASCII-lower-cased
    text, or as written with `lower=False`); every occurrence is checked, or only the last with `last_only`. A
    rejected answer scores 0: naming an option in order to reject it is not choosing it. Bounded: the tail only."""
    s = tail(text, REJECT_SCAN_CHARS)
    low = ascii_lower(s)
    if _ANY_REJECTION.search(low) is None:
        return False
    spans = [m.span() for m in token.finditer(low if lower else s)]
    for start, end in spans[-1:] if last_only else spans[-64:]:
        if _NEGATED_BEFORE.search(low, max(0, start - 96), start) or _REJECTED_AFTER.match(low, end):
            return True
    return False


def extract(response: object) -> Extraction:
    """The highest-priority answer candidate of a response (see the module docstring for the order)."""
    return Response(response).extraction()


def extract_answer(response: object) -> str:
    """The extracted answer text: `extract_answer("<think>…</think><answer> B </answer>") == "B"`."""
    return extract(response).text


_BOXED_ONLY = re.compile(r"\\boxed\{(.*)\}", re.S)
_WRAP_START = frozenset("$\\*\"'`")
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]{0,512})\}")


def clean_payload(payload: str) -> str:
    """Unwrap the decorations models put around short answers: `$…$`, `\\boxed{…}`, `\\text{…}`, `**…**`, quotes."""
    s = payload.strip()
    if len(s) > 4096 or not s:
        return s
    if s[0] not in _WRAP_START and "\\" not in s:
        return s  # nothing below can apply (every unwrapping needs one of these): the common case
    for _ in range(4):
        prev = s
        if s.startswith("$$") and s.endswith("$$") and len(s) >= 4:
            s = s[2:-2].strip()
        elif s.startswith("$") and s.endswith("$") and len(s) >= 2:
            s = s[1:-1].strip()
        if s.startswith("\\(") and s.endswith("\\)"):
            s = s[2:-2].strip()
        m = _BOXED_ONLY.fullmatch(s)
        if m:
            inner = last_boxed(s)
            if inner is not None and len(inner) == len(m.group(1).strip()):
                s = inner
        if s.startswith("**") and s.endswith("**") and len(s) >= 4:
            s = s[2:-2].strip()
        if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'`":
            s = s[1:-1].strip()
        if s == prev:
            break
    return _TEXT_WRAP.sub(lambda m: m.group(1), s)


def structure_ok(resp: Response, think: Literal["optional", "required", "forbidden"] = "optional") -> bool:
    """Exactly one non-empty `<answer>…</answer>` ending the response, with at most one `<think>…</think>` before it.

    `think="required"`: the response must open with `<think>`; `"forbidden"`: no think tags at all.
    """
    low = resp.low
    if resp.truncated:
        return False
    b = low.rfind("</answer>")
    if b < 0 or (b + 9 != len(low) and low[b + 9 :].strip()):  # nothing but whitespace after the last </answer>
        return False
    a = low.find("<answer>")
    if a < 0 or a > b or low.find("<answer>", a + 8) >= 0 or low.find("</answer>", 0, b) >= 0:
        return False  # exactly one opening and one closing tag, in order
    if resp.answer_tag is None:  # empty answer
        return False
    t0 = low.find("<think>", 0, a)
    t1 = low.find("</think>", 0, a)
    if think == "forbidden" or (t0 < 0 and t1 < 0):
        return t0 < 0 and t1 < 0 and "<think>" not in low and "</think>" not in low and (think != "required")
    if not 0 <= t0 < t1 or low.count("<think>") != 1 or low.count("</think>") != 1:
        return False
    return think != "required" or not low[:t0].strip()
