"""Answer extractors shared by several benchmarks' official protocols, re-implemented from the reference code.

Each function reproduces one reference function's behaviour exactly, quirks included (first capital letter anywhere,
case-sensitive prefixes, the article "a" read as option A), because published numbers were computed with them; the
tests pin every quirk and the `lmms_eval` nox session compares them with the real functions. References (lmms-eval
0.7.3 is the PyPI release `lmms-eval==0.7.3`; paths are inside its `lmms_eval/` package):

- `strip_reasoning`: `api/reasoning.py::strip_reasoning_tags`, with the CLI's default tag pairs (`--reasoning_tags`):
  lmms-eval's scoring loop applies it to every response before a task's `process_results` sees it.
- `extract_mcq_answer`: `tasks/_task_utils/mcq_extract.py::extract_mcq_answer` (LVBench, MLVU, Video-MMMU).
- `first_letter_after_prefixes`: the Video-MME family (`extract_characters_regex` of Video-MME's evaluation script,
  `tasks/videomathqa/utils.py`, `tasks/longvideobench/utils.py::parse_multi_choice_response`).
- `mmmu_parse_multi_choice`: `tasks/video_holmes/utils.py::parse_multi_choice_response` (MMMU's parser).

The only departure: where the reference draws `random.choice(...)` (no parsable answer), `random_choice` draws from a
generator seeded by the sample id, so scoring the same file twice gives the same number. Inputs are capped in length
(`MAX_SCAN`, far above any real answer) so adversarial output stays cheap to scan; beyond it, rules that take the
first match read the head (`capped(..., keep="head")`), the others the tail.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Literal

#: Responses are read whole up to this length: every official rule here is linear (about 0.5 s at this size on the
#: worst adversarial input), and a thinking model's 32K-token answer (~130,000 characters) must be read as the
#: reference reads it: whole, first AND last letters, every candidate in between.
MAX_SCAN = 1_000_000
#: Reasoning-tag stripping is quadratic in the number of tag blocks: a response longer than this with more than
#: `FEW_TAGS` "<" is cut to this length (its tail) before stripping.
STRIP_SCAN = 100_000
FEW_TAGS = 64
#: The end of an over-long response that is kept when it is cut: "head" for rules that take the FIRST match, "tail"
#: for the others (answers come last).
ScanEnd = Literal["head", "tail"]
#: lmms-eval's `--reasoning_tags` default.
LMMS_REASONING_TAGS: tuple[tuple[str, str], ...] = (("<think>", "</think>"), ("<analysis>", "</analysis>"))


def capped(text: str | None, keep: ScanEnd = "tail", limit: int | None = None) -> str:
    """The response as text, at most `limit` (MAX_SCAN) characters: the tail (answers come last, and rules that take
    the LAST match read it), or the head for rules that take the FIRST match (first letter, first token)."""
    s = text if isinstance(text, str) else ""
    n = MAX_SCAN if limit is None else limit
    if len(s) <= n:
        return s
    return s[:n] if keep == "head" else s[-n:]


def random_choice(sample_id: str, choices: Sequence[str]) -> str:
    """The official `random.choice` fallback, made reproducible: seeded by the sample id."""
    seed = int.from_bytes(hashlib.sha256(sample_id.encode()).digest()[:8], "big")
    return random.Random(seed).choice(list(choices))


def strip_reasoning(text: str, tag_pairs: Sequence[tuple[str, str]] = LMMS_REASONING_TAGS) -> str:
    """Remove every complete `<think>…</think>` block (first start tag, first end tag after it, repeatedly); when only
    an end tag is left, keep what follows its last occurrence; case-sensitive; the result is stripped."""
    result = text
    for start_tag, end_tag in tag_pairs:
        while start_tag in result and end_tag in result:
            start = result.find(start_tag)
            end = result.find(end_tag, start)
            if end == -1:
                break
            result = result[:start] + result[end + len(end_tag) :]
        if end_tag in result and start_tag not in result:
            result = result.rsplit(end_tag, 1)[-1]
    return result.strip()


_MCQ_PHRASES = (
    "the answer is",
    "answer is",
    "the correct answer is",
    "correct answer is",
    "the best answer is",
    "best answer is",
    "the correct option is",
    "correct option is",
    "the best option is",
    "best option is",
    "the choice is",
    "choice is",
    "the correct choice is",
    "correct choice is",
    "i choose",
    "i select",
    "i pick",
    "my answer is",
    "my choice is",
    "옵션",
    "정답은",
    "답은",
    "답:",
    "答案是",
    "答案为",
    "选",
    "答えは",
)
#: Candidate formats, tried in this order; the best candidate has the highest priority, then the latest position.
_MCQ_FORMATS = (("({})", 6), ("{}.", 5), ("{}:", 4), ("{})", 3), ("{} ", 2))
_DEFAULT_CHOICES = tuple("ABCDEFGH")


def _mcq_format_candidates(text: str, letters: Sequence[str]) -> list[tuple[int, int, str]]:
    """(priority, position, letter) of "(X)", "X.", "X:", "X)" and "X " (their last occurrence), format by format."""
    found = []
    for fmt, priority in _MCQ_FORMATS:
        for ch in letters:
            pos = text.rfind(fmt.format(ch))
            if pos != -1:
                found.append((priority, pos, ch))
    return found


def _mcq_phrase_candidates(text: str, letters: Sequence[str]) -> list[tuple[int, int, str]]:
    """After the first occurrence of each answer phrase, the first occurrence of EVERY letter (so the latest wins)."""
    found = []
    lower = text.lower()
    for phrase in _MCQ_PHRASES:
        idx = lower.find(phrase)
        if idx != -1:
            after = idx + len(phrase)
            found += [(7, pos, ch) for ch in letters if (pos := text.find(ch, after)) != -1]
    return found


def _mcq_edge_candidates(text: str, letters: Sequence[str]) -> list[tuple[int, int, str]]:
    """A standalone letter that starts (priority 10) or ends (9) the answer."""
    stripped = text.strip()
    found = [
        (10, 0, ch) for ch in letters if stripped.startswith(ch) and (len(stripped) == 1 or not stripped[1].isalpha())
    ]
    found += [
        (9, len(text) - 1, ch)
        for ch in letters
        if stripped.endswith(ch) and (len(stripped) == 1 or not stripped[-2].isalpha())
    ]
    return found


def extract_mcq_answer(response: str, choices: Sequence[str] | None = None) -> str:
    """The shared lmms-eval MCQ extractor: collect (letter, position, format) candidates, keep the one with the highest
    format priority, then the latest position (a stable sort: among exact ties the first inserted wins); failing
    every format, the last occurrence of any letter."""
    if not response or not response.strip():
        return ""
    letters = list(choices) if choices else list(_DEFAULT_CHOICES)
    text = response.strip()
    for char in (",", ".", "!", "?", ";", ":", "'", '"'):
        text = text.strip(char)
    text = f" {text} "
    found = _mcq_format_candidates(text, letters) + _mcq_phrase_candidates(text, letters)
    found += _mcq_edge_candidates(text, letters)
    if not found:
        found = [(0, pos, ch) for ch in letters if (pos := text.rfind(ch)) != -1]
    if not found:
        return ""
    # max by (priority, position): `max` keeps the first of equal keys, as the reference's stable reverse sort does
    return max(found, key=lambda cand: cand[:2])[2]


def first_letter_after_prefixes(response: str, prefixes: Sequence[str], letters: str) -> str | None:
    """The Video-MME family: strip, delete each prefix (case-sensitive, in order), then the FIRST character of
    `letters` anywhere (inside words too). None when there is none: each caller maps that to "" (Video-MME,
    VideoMathQA) or to a random option (LongVideoBench). (The references also give up on answers of more than ten
    words without a letter; that case has no letter either, so it needs no rule of its own.)"""
    s = response.strip()
    for prefix in prefixes:
        s = s.replace(prefix, "")
    for ch in s:
        if ch in letters:
            return ch
    return None


def _mmmu_letter_candidates(text: str, choices: Sequence[str]) -> tuple[list[str], bool]:
    """Letters marked "(X)" (and True), else followed by a space, else followed by a period."""
    bracketed = [c for c in choices if f"({c})" in text]
    if bracketed:
        return bracketed, True
    spaced = [c for c in choices if f"{c} " in text]
    return (spaced or [c for c in choices if f"{c}." in text]), False


def mmmu_parse_multi_choice(response: str, choices: Sequence[str], index2ans: Mapping[str, str], sample_id: str) -> str:
    """MMMU's `parse_multi_choice_response` as Video-Holmes' task file has it: "(X)", else "X " (a letter followed by a
    space; nothing required before it), else "X."; else, for answers longer than 5 words, an option's text; several
    candidates -> the one whose marker occurs last (ties: the first candidate); none -> a random option."""
    for char in (",", ".", "!", "?", ";", ":", "'"):
        response = response.strip(char)
    text = f" {response} "
    candidates, with_brackets = _mmmu_letter_candidates(text, choices)
    low = text.lower()
    by_text = False
    if not candidates and len(text.split()) > 5:
        candidates = [c for c, ans in index2ans.items() if ans.lower() in low]
        by_text = bool(candidates)
    if not candidates:
        return random_choice(sample_id, choices)
    if len(candidates) == 1:
        return candidates[0]
    if by_text:
        starts = [low.rfind(index2ans[c].lower()) for c in candidates]
    elif with_brackets:
        starts = [text.rfind(f"({c})") for c in candidates]
    else:
        starts = [text.rfind(f" {c} ") for c in candidates]
    return candidates[starts.index(max(starts))]  # numpy.argmax: the first maximum
