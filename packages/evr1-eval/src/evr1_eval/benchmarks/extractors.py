"""Official answer extractors, re-implemented from their documented behaviour (research/benchmarks.md §2).

They reproduce each benchmark's published quirks on purpose (first capital letter anywhere, substring matches, random
fallbacks) because published numbers were computed with them. Two deliberate, documented deviations apply to all:
the text scanned is `final_text(response)` (last `<answer>`, else text after the last `</think>`, else the response),
so reasoning-style runs are not scored on their chain of thought; and "random" fallbacks draw from a generator seeded
with the sample id, so a score never changes between two scorings of the same file. Inputs are capped in length so
adversarial model output stays cheap to scan.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence

MAX_SCAN = 20_000


def last_answer_tag(text: str) -> str | None:
    """Content of the last non-empty `<answer>…</answer>` pair (scanned backwards: linear, no regex backtracking)."""
    low = text.lower()
    end = low.rfind("</answer>")
    for _ in range(64):
        if end < 0:
            return None
        start = low.rfind("<answer>", 0, end)
        if start < 0:
            return None
        content = text[start + len("<answer>") : end]
        if content.strip():
            return content
        end = low.rfind("</answer>", 0, start)
    return None


def final_text(response: str | None) -> str:
    """The part of a response that holds the answer: last non-empty `<answer>`, else after the last `</think>`."""
    text = response if isinstance(response, str) else ""
    if len(text) > 4 * MAX_SCAN:
        text = text[-4 * MAX_SCAN :]
    answer = last_answer_tag(text)
    if answer is not None:
        return answer.strip()[:MAX_SCAN]
    cut = text.lower().rfind("</think>")
    if cut >= 0:
        text = text[cut + len("</think>") :]
    return text.strip()[-MAX_SCAN:]


def seeded_choice(sample_id: str, letters: Sequence[str]) -> str:
    """The official 'random.choice' fallback, made reproducible: seeded by the sample id."""
    seed = int.from_bytes(hashlib.sha256(sample_id.encode()).digest()[:8], "big")
    return random.Random(seed).choice(list(letters))


# Video-MME official `extract_characters_regex` (research §2.1), including the two missing-comma concatenations.
_VIDEOMME_PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    # The official list misses two commas, so these two pairs are single concatenated prefixes (kept on purpose).
    "The best option isThe correct option is",
    "Best answer:Best option:",
)


def videomme_extract(response: str, letters: str = "ABCD") -> str:
    """Official Video-MME extraction: strip prefixes, give up on long answers without a letter, else FIRST letter
    anywhere (inside words too). Returns "" when unparsable (the official script then drops the item)."""
    s = final_text(response).strip()
    for prefix in _VIDEOMME_PREFIXES:
        s = s.replace(prefix, "")
    pattern = f"[{letters}]"
    if len(s.split()) > 10 and not re.search(pattern, s):
        return ""
    m = re.search(pattern, s)
    return m.group(0) if m else ""


_LMMS_PHRASES = ("the answer is", "answer is", "the correct answer is", "i choose", "answer:", "答案是", "选")


def lmms_mcq_extract(response: str, letters: Sequence[str] = "ABCDEFGH") -> str:
    """lmms-eval's shared `extract_mcq_answer` (research §2.2): candidates by format priority, ties broken by the
    later position; case-sensitive; "" when no choice letter occurs."""
    s = final_text(response).strip().strip(",.!?;:'\"")
    padded = f" {s} "
    candidates: list[tuple[int, int, str]] = []  # (priority, position, letter)
    for c in letters:
        for fmt, prio in ((f"({c})", 6), (f"{c}.", 5), (f"{c}:", 4), (f"{c})", 3), (f" {c} ", 2)):
            pos = padded.rfind(fmt)
            if pos >= 0 and (prio == 6 or prio == 2 or pos == 0 or not padded[pos - 1].isalnum()):
                candidates.append((prio, pos, c))
    low = padded.lower()
    for phrase in _LMMS_PHRASES:
        pos = low.rfind(phrase)
        if pos >= 0:
            tail = padded[pos + len(phrase) :]
            hits = [(tail.find(c), c) for c in letters if tail.find(c) >= 0]
            if hits:
                first = min(hits)
                candidates.append((7, pos + len(phrase) + first[0], first[1]))
    if s and s[0] in letters and (len(s) == 1 or not s[1].isalnum()):
        candidates.append((10, 0, s[0]))
    if s and s[-1] in letters and (len(s) == 1 or not s[-2].isalnum()):
        candidates.append((9, len(s), s[-1]))
    if not candidates:
        for c in letters:
            pos = s.rfind(c)
            if pos >= 0:
                candidates.append((0, pos, c))
    if not candidates:
        return ""
    return max(candidates)[2]


_LVB_PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option is",
    "The correct option is",
    "Best answer:",
    "Best option:",
)


def longvideobench_extract(response: str, letters: str, sample_id: str) -> str:
    """LongVideoBench `parse_multi_choice_response`: strip prefixes; >10 words without a letter or no letter at all ->
    (seeded) random option; else the FIRST option letter anywhere ("Answer: D" -> "A", as in the official code)."""
    s = final_text(response)
    for prefix in _LVB_PREFIXES:
        s = s.replace(prefix, "")
    pattern = f"[{letters}]"
    m = re.search(pattern, s)
    if m is None:
        return seeded_choice(sample_id, letters)
    return m.group(0)


def mmmu_extract(response: str, options: Sequence[tuple[str, str]], sample_id: str) -> str:
    """MMMU-style `parse_multi_choice_response` (Video-Holmes): "(X)" -> " X " -> "X." -> option text -> random;
    several candidates -> the one occurring last."""
    s = f" {final_text(response).strip(' .,!?;:')} "
    letters = [letter for letter, _ in options]
    for fmt in ("({})", " {} ", "{}."):
        hits = [(s.rfind(fmt.format(c)), c) for c in letters if fmt.format(c) in s]
        if hits:
            return max(hits)[1]
    if len(s.split()) > 5:
        low = s.lower()
        hits = [(low.rfind(text.lower()), c) for c, text in options if text and text.lower() in low]
        if hits:
            return max(hits)[1]
    return seeded_choice(sample_id, letters)


_MINERVA_DECL = re.compile(r"(?:answer|option)\s*(?:is|:)\s*\(?([A-E])\b", re.IGNORECASE)


def minerva_extract(response: str, sample_id: str, letters: str = "ABCDE") -> str:
    """MINERVA `_extract_choice_letter`: last "answer/option is|: X", else the LAST capital option letter, else random."""
    s = final_text(response)
    decls = [m.group(1).upper() for m in _MINERVA_DECL.finditer(s) if m.group(1).upper() in letters]
    if decls:
        return decls[-1]
    for prefix in _LVB_PREFIXES:
        s = s.replace(prefix, "")
    found = re.findall(f"[{letters}]", s)
    return found[-1] if found else seeded_choice(sample_id, letters)


def motionbench_extract(response: str) -> str:
    """MotionBench: text after the last `</think>`, upper-cased, prefixes stripped, first standalone A-F ("a" -> A)."""
    s = final_text(response).upper()
    for prefix in _LVB_PREFIXES:
        s = s.replace(prefix.upper(), "")
    m = re.search(r"\b([A-F])\b", s)
    return m.group(1) if m else ""


def mvbench_extract(response: str) -> str:
    """lmms-eval MVBench `mcq_acc`: "X. text" -> X; else punctuation stripped, lower-cased, first standalone a-e (the
    article "a" reads as option A, as in the reference)."""
    s = final_text(response).strip()
    m = re.match(r"^([A-E])\.\s*(.+)$", s, re.DOTALL)
    if m:
        return m.group(1)
    cleaned = re.sub(r"[^\w\s]", " ", s).lower()
    m = re.search(r"\b([a-e])\b", cleaned)
    return m.group(1).upper() if m else ""


def vsibench_first_token(response: str) -> str:
    """VSI-Bench official `fuzzy_matching`: first space-separated token, trailing "." removed."""
    s = final_text(response).strip()
    return s.split(" ")[0].rstrip(".").strip() if s else ""
