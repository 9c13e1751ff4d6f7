"""Text similarity in pure Python: CJK-aware tokens, bit-parallel LCS (ROUGE-L) and Levenshtein distance.

Both algorithms keep one Python int as a bit vector over the first sequence, so they run in O(len(b)) big-int steps
instead of an O(len(a)·len(b)) table - fast enough for a reward called thousands of times per second.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_SPACES = re.compile(r"\s+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; each CJK character is its own token (rouge-score drops non-Latin text entirely)."""
    return _TOKEN.findall(text.lower())


def normalize_text(text: str) -> str:
    """Case- and space-normalised text (NFKC, lower, single spaces) for OCR comparison."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (Hyyrö's bit-vector algorithm)."""
    if not a or not b:
        return 0
    if len(a) > len(b):
        a, b = b, a
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for tok in b:
        u = v & masks.get(tok, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def rouge_l_f1(hyp: Sequence[str], ref: Sequence[str], *, hyp_len: int | None = None) -> float:
    """ROUGE-L F1 (β = 1). `hyp_len` lets a caller score a truncated hypothesis against its full length."""
    n_hyp = hyp_len if hyp_len is not None else len(hyp)
    if not n_hyp or not ref:
        return 0.0
    lcs = lcs_length(hyp, ref)
    if lcs == 0:
        return 0.0
    p, r = lcs / n_hyp, lcs / len(ref)
    return 2 * p * r / (p + r)


def levenshtein(a: str, b: str) -> int:
    """Edit distance (Myers/Hyyrö bit-parallel)."""
    if len(a) < len(b):
        a, b = b, a
    m = len(b)
    if m == 0:
        return len(a)
    peq: dict[str, int] = {}
    for i, c in enumerate(b):
        peq[c] = peq.get(c, 0) | (1 << i)
    mask = (1 << m) - 1
    high = 1 << (m - 1)
    pv, mv, dist = mask, 0, m
    for c in a:
        eq = peq.get(c, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | ~(xh | pv)
        mh = pv & xh
        if ph & high:
            dist += 1
        elif mh & high:
            dist -= 1
        ph = (ph << 1) | 1
        mh <<= 1
        pv = (mh | ~(xv | ph)) & mask
        mv = ph & xv & mask
    return dist
