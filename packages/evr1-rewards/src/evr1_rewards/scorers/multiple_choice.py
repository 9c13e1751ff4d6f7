"""Multiple choice: exact match on the extracted option letter.

Valid letters come from `extras["options"]` (else A–J). Letters are only read where an option letter can stand: the
whole answer (`B`, `(b)`, `**B**`), a delimited leading letter (`B.`, `B)`, `(B) blue`), an explicit declaration
("the answer is B", "Answer: B", "I choose B", "option B", "答案是B", "B is the correct answer"), a standalone capital
at the end of the answer, or the answer repeating exactly one option's text. Prose never yields a letter: the article
"a" and the pronoun "I" are not options ("a dog" is not A, "I choose B" is B). An answer that only lists several
options ("A or B", "B, C", "either A or B", "A/B/C/D") names none: a hedge scores 0 whichever option is right.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import Response, clean_payload, rejected, tail
from evr1_rewards.registry import register
from evr1_rewards.scorers._common import STATED_SOURCES
from evr1_rewards.truth import truth_text
from evr1_rewards.types import Context, Outcome
from evr1_rewards.vocabulary import MULTIPLE_CHOICE

SCAN_CHARS = 4096
DEFAULT_LETTERS = "ABCDEFGHIJ"

_OPTION = re.compile(r"^\s{0,4}[\(\[]?([A-Za-z])[\.\)\]:：、]\s{0,4}(.*)$", re.S)
_LETTER = r"(?:\(\s?([A-Ja-j])\s?\)|\[\s?([A-Ja-j])\s?\]|（([A-Ja-j])）|([A-J]))(?![A-Za-z0-9])"
_DECL = re.compile(  # strong: the model says which option it picks
    r"(?i:answer|choose|chose|select|selected|pick|picked|go\swith|opt\sfor|答案|选择|选)"
    r"[ \t]{0,3}(?i:is|would\sbe|should\sbe|will\sbe|must\sbe|[:：]|是|为)?[ \t]{0,3}"
    r"(?i:option|choice|answer)?[ \t]{0,3}[:：]?[ \t]{0,3}" + _LETTER
)
_MENTION = re.compile(r"(?i:option|choice|选项)[ \t]{0,3}[:：]?[ \t]{0,3}" + _LETTER)  # weak: "option B"
_IS_CORRECT = re.compile(
    r"(?<![A-Za-z0-9])(?:\(([A-J])\)|([A-J]))[ \t]{0,3}(?i:is)[ \t]{1,3}(?i:the[ \t]{1,3})?(?i:correct|right|best|answer)"
)
_LEADING = re.compile(r"^(?:(?i:option|choice)[ \t]{0,3})?(?:\(([A-Ja-j])\)|([A-J])(?:[\.\):：\]、,;]|$))")
_END = re.compile(r"(?<![A-Za-z0-9'’])([A-J])[\s\.\)\]\*。]{0,8}$")
_STANDALONE = re.compile(r"(?<![A-Za-z0-9'’])([A-J])(?![A-Za-z0-9'’])")
_NORM = re.compile(r"[^\w\u4e00-\u9fff]+")
_STATED = re.compile(r"(?:\(\s?([A-Ja-j])\s?\)|\[\s?([A-Ja-j])\s?\]|（([A-Ja-j])）|([A-J]))(?![A-Za-z0-9'’])")
_CONNECTIVES = frozenset({"because", "since", "as", "so", "which", "that", "is", "was", "the", "it", "this", "for"})
_HEDGE_LETTER = r"[\(\[（]?\s?([A-Ja-j])\s?[\)\]）\.]?"
_HEDGE = re.compile(
    r"[\s*#>\-]{0,8}(?i:(?:either|both|maybe|possibly|option|options|choice|choices)\s{1,3}){0,2}" + _HEDGE_LETTER
    + r"(?:\s{0,3}(?:,|;|/|&|\||\+|(?i:or|and|nor|maybe|possibly|perhaps|option|choice|then))?[\s,]{0,3}"
    + r"(?i:(?:or|and|maybe|possibly|option|choice)\s{1,3}){0,2}" + _HEDGE_LETTER + r"){1,9}[\s.?!*。]{0,4}"
)  # fmt: skip
"""An answer that only lists options ("A or B", "B, C", "(B)(C)", "either A or B", "A/B/C/D"): it names no answer."""
_BARE_LINE = re.compile(r"[\s*#>\-]{0,8}(?:option\s{0,2}|choice\s{0,2})?[\(\[]?([A-J])[\)\]]?[\s.:：。*]{0,4}", re.I)


@dataclass(frozen=True, slots=True)
class Choices:
    """Valid option letters, the options as written (`items`: (letter, text) pairs) and their texts normalised for
    matching (`texts`)."""

    letters: str
    texts: Mapping[str, str]
    items: tuple[tuple[str, str], ...] = ()


def _norm(text: str) -> str:
    return _NORM.sub(" ", text.lower()).strip()


def parse_options(options: object) -> Choices:
    """Options as given in a dataset: ["A. red", "B. blue"] (also "A: red", "(A) red"), ["red", "blue"],
    {"A": "red", "B": "blue"}, or one option per line in a string; None or empty -> letters A–J.

    Letters come from the texts only when every option is lettered in order (A, B, C, …), so an option that merely
    starts with a letter and a dot ("C. elegans") is not misread. Raises GroundTruthError on anything else.
    """
    if options is None or (isinstance(options, (str, list, tuple, Mapping)) and len(options) == 0):
        return Choices(DEFAULT_LETTERS, {})  # no options (or an empty column): letters A-J
    opts = [line for line in options.splitlines() if line.strip()] if isinstance(options, str) else options
    items: list[tuple[str, str]] = []
    if isinstance(opts, Mapping):
        items = [(str(k).strip().upper(), str(v).strip()) for k, v in opts.items()]
    elif isinstance(opts, (list, tuple)):
        matches = [_OPTION.match(str(opt)) if isinstance(opt, (str, int, float)) else None for opt in opts]
        if any(isinstance(opt, (Mapping, list, tuple)) for opt in opts):
            raise GroundTruthError(f"options must be texts, got {opts!r}"[:200])
        lettered = all(m is not None and m.group(1).upper() == chr(65 + i) for i, m in enumerate(matches))
        for i, (opt, m) in enumerate(zip(opts, matches, strict=True)):
            items.append((chr(65 + i), m.group(2).strip() if lettered and m else str(opt).strip()))
    else:
        raise GroundTruthError(f"extras['options'] must be a list or a mapping of option texts, got {opts!r}")
    letters = [k for k, _ in items]
    if not items or any(len(k) != 1 or not "A" <= k <= "Z" for k in letters) or len(set(letters)) != len(letters):
        raise GroundTruthError(f"extras['options'] must name distinct options A, B, C, …; got {opts!r}"[:300])
    return Choices("".join(letters), {k: _norm(v) for k, v in items}, tuple(items))


def _pick(m: re.Match[str], letters: str) -> str | None:
    for g in m.groups():
        if g:
            up = g.upper()
            return up if up in letters else None
    return None


def _from_option_text(s: str, choices: Choices) -> str | None:
    if not choices.texts or len(s) > 512:
        return None
    n = _norm(s)
    if not n:
        return None
    equal = [k for k, t in choices.texts.items() if t and t == n]
    if len(equal) == 1:
        return equal[0]
    padded = f" {n} "
    inside = [k for k, t in choices.texts.items() if t and f" {t} " in padded]
    if len(inside) == 1:
        # A longer option that contains the match (e.g. "red" inside "dark red") makes it ambiguous.
        hit = choices.texts[inside[0]]
        if not any(t != hit and f" {hit} " in f" {t} " and f" {t} " in padded for t in choices.texts.values()):
            return inside[0]
    return None


def _stated_letter(s: str, letters: str) -> str | None:
    """The letter a stated answer opens with: "B because option C is wrong", "B (C is a distractor)", "(a) — …".
    The article "A" / pronoun "I" followed by an ordinary word ("A dog", "I think") is not a letter."""
    m = _STATED.match(s)
    if m is None:
        return None
    letter = _pick(m, letters)
    if letter is None:
        return None
    rest = s[m.end() :].lstrip()
    if m.group(4) in ("A", "I") and rest[:1].isalpha() and rest[:1].islower():
        word = rest.split(None, 1)[0].strip(",.;:").lower()
        if word not in _CONNECTIVES:
            return None
    return letter


_QUANTIFIED = re.compile(
    r"(?i:(?:(?:it|this|that|the\s+answer)\s+(?:is|could\s+be|might\s+be|must\s+be|can\s+be)\s+|could\s+be\s+|might\s+be\s+"
    r"|maybe\s+|possibly\s+)?(?:(?:one|any|all|each|either|some|several)\s+of(?:\s+(?:them|these|those|the\s+(?:options|"
    r"choices|above|following)))?|(?:it\s+)?could\s+be|might\s+be)[\s:,\-]{1,4})"
)
"""A quantifier in front of a list of options: "one of A, B, C, D", "any of A/B", "all of them: A, B", "could be A or B"."""


def is_hedge(text: str) -> bool:
    """The answer only lists several options ("A or B", "B, C", "(B)(C)", "A/B/C/D", "one of A, B, C, D", "could
    be A or B"), or ends with the options one per line: it chooses none."""
    s = text.strip().replace("**", "")
    if lists_options(s):
        return True
    q = _QUANTIFIED.match(s)
    if q is not None:
        s = s[q.end() :]
    if len(s) > 96 or (h := _HEDGE.fullmatch(s)) is None:
        return False
    return len({c.upper() for c in re.findall(r"(?<![A-Za-z])[A-Ja-j](?![A-Za-z])", h.group())}) > 1


def lists_options(text: str) -> bool:
    """The text ends with two or more lines that are each just a different option letter ("A\nB\nC\nD", "- (A)\n-
    (B)", after a header such as "The options are:"): a list, not a choice."""
    if "\n" not in text:
        return False
    letters: list[str] = []
    for line in reversed(tail(text, SCAN_CHARS).splitlines()):
        if not line.strip():
            continue
        m = _BARE_LINE.fullmatch(line)
        if m is None:
            break
        letters.append(m.group(1).upper())
    return len(set(letters)) > 1


def extract_letter(text: str, choices: Choices, *, stated: bool = False) -> str | None:
    """The option letter an answer declares, or None. Total and linear (looks at the last SCAN_CHARS characters).

    `stated`: the text is the payload of an explicit answer (after "the answer is" / "Answer:", inside `<answer>` or
    `\\boxed{}`), so a letter opening it is the answer even with an explanation after it that names other options.
    """
    s = clean_payload(tail(text, SCAN_CHARS)).replace("**", "").strip()
    if not s:
        return None
    letters = choices.letters
    if is_hedge(s):
        return None
    # The whole answer is one letter, possibly wrapped: "B", "b", "(B)", "[b].", "B)".
    bare = s.strip(" \t\n.:：。)]）(（[").upper()
    if len(bare) == 1 and bare in letters:
        return bare
    m = _LEADING.match(s)
    if m and (letter := _pick(m, letters)):
        return letter
    if stated and (letter := _stated_letter(s, letters)):
        return letter
    # A leading line that is just a letter ("C\n\nExplanation: … option D does not match.").
    first = s[: s.find("\n")] if "\n" in s else ""
    m = _BARE_LINE.fullmatch(first) if first else None
    if m and m.group(1).upper() in letters:
        return m.group(1).upper()
    # Explicit declarations anywhere: the last one wins; a mere mention ("option A is wrong") only if none.
    found: tuple[int, str] | None = None
    for pattern in (_DECL, _IS_CORRECT):
        for m in pattern.finditer(s):
            letter = _pick(m, letters)
            if letter and (found is None or m.start() > found[0]):
                found = (m.start(), letter)
    if found:
        return found[1]
    mention = None
    for m in _MENTION.finditer(s):
        mention = _pick(m, letters) or mention
    if mention:
        return mention
    if (letter := _from_option_text(s, choices)) is not None:
        return letter
    last_line = s[s.rfind("\n") + 1 :]
    m = _END.search(last_line)
    if m and m.group(1) in letters and m.group(1) != "I":
        return m.group(1)
    if len(s) <= 40:
        # A short answer with exactly one standalone capital option letter ("B is my pick"), but not the article
        # "A" or pronoun "I" opening a phrase ("A dog", "I think so").
        hits = set()
        for m in _STANDALONE.finditer(s):
            c = m.group(1)
            after = s[m.end() : m.end() + 2]
            if c in "AI" and len(after) == 2 and after[0] == " " and after[1].islower():
                continue
            if c in letters:
                hits.add(c)
        if len(hits) == 1:
            return hits.pop()
    return None


_LETTER_TOKENS = {
    c: re.compile(rf"(?<![A-Za-z0-9'’])(?:[\(\[（]\s?[{c}{c.lower()}]\s?[\)\]）]|{c})(?![A-Za-z0-9'’])")
    for c in DEFAULT_LETTERS + "KLMNOPQRSTUVWXYZ"
}


def rejects_letter(text: str, letter: str) -> bool:
    """The answer rejects the option it names: "not B", "B is wrong", "I would not choose B" (0, not B)."""
    return rejected(text, _LETTER_TOKENS[letter], lower=False)


@register(MULTIPLE_CHOICE, answer_format="the option letter")
class MultipleChoice:
    """Option-letter match; letters restricted to the options; never reads 'a'/'I' in prose as an option."""

    name = "multiple_choice"

    def parse_truth(self, ground_truth: object, extras: Mapping[str, object]) -> tuple[str, Choices]:
        choices = parse_options(extras.get("options"))
        text = truth_text(ground_truth).strip()
        bare = text.strip(" \t\n.:()[]").upper()
        if len(bare) == 1 and bare in choices.letters:
            return bare, choices
        m = _OPTION.match(text)
        if m and m.group(1).upper() in choices.letters:
            return m.group(1).upper(), choices
        letter = _from_option_text(text, choices)
        if letter is not None:
            return letter, choices
        raise GroundTruthError(
            f"multiple-choice ground truth {text[:80]!r} is not one of the option letters {choices.letters!r} "
            "(use the letter, e.g. 'B', or pass the options in extras['options'])"
        )

    def format_truth(self, truth: tuple[str, Choices]) -> str:
        return truth[0]

    def score(self, response: Response, truth: tuple[str, Choices], ctx: Context) -> Outcome:
        gold, choices = truth
        tag = response.answer_tag
        if lists_options(tag if tag is not None else response.text[response.region()[0] :]):
            # "Answer:\nA\nB\nC\nD": the statement would take its first line; the answer is the whole list
            return Outcome(0.0, False, {"pred": "", "source": "answer_tag" if tag else "text", "hedge": True})
        for i, cand in enumerate(response.candidates()):
            if cand.source in STATED_SOURCES and is_hedge(clean_payload(cand.text)):
                return Outcome(0.0, False, {"pred": "", "source": cand.source, "hedge": True})
            pred = extract_letter(cand.text, choices, stated=cand.source in STATED_SOURCES)
            if pred is not None and rejects_letter(cand.text, pred):
                return Outcome(0.0, False, {"pred": "", "source": cand.source, "rejected": pred})
            if pred is not None:
                return Outcome(1.0 if pred == gold else 0.0, i == 0, {"pred": pred, "source": cand.source})
        return Outcome(0.0, False, {"pred": "", "source": "none"})
