"""The bit-parallel text algorithms and the pure-Python masks against straightforward reference implementations."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from evr1_rewards import score
from evr1_rewards.masks import Mask, boundary_f, decode_rle_string, from_polygons, from_rle, iou, j_and_f
from evr1_rewards.text import lcs_length, levenshtein, rouge_l_f1, tokenize


def _lcs_dp(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def _lev_dp(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


WORDS = st.lists(st.sampled_from(list("abcde")), max_size=80)


@settings(max_examples=300, deadline=None)
@given(WORDS, WORDS)
def test_lcs_matches_dynamic_programming(a: list[str], b: list[str]) -> None:
    assert lcs_length(a, b) == _lcs_dp(a, b)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcxyz猫 ", max_size=90), st.text(alphabet="abcxyz猫 ", max_size=90))
def test_levenshtein_matches_dynamic_programming(a: str, b: str) -> None:
    assert levenshtein(a, b) == _lev_dp(a, b)


def test_tokenize_cjk_and_rouge() -> None:
    assert tokenize("The Cat, 猫在 table!") == ["the", "cat", "猫", "在", "table"]
    assert rouge_l_f1(["a", "b"], ["a", "b"]) == 1.0
    assert rouge_l_f1([], ["a"]) == 0.0


def _encode_rle(counts: list[int]) -> str:
    """COCO's compressed RLE encoder (test-side inverse of decode_rle_string)."""
    out = []
    for i, c in enumerate(counts):
        x = c - counts[i - 2] if i > 2 else c
        more = True
        while more:
            ch = x & 0x1F
            x >>= 5
            more = x != -1 if ch & 0x10 else x != 0
            if more:
                ch |= 0x20
            out.append(chr(ch + 48))
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=5000), max_size=40))
def test_rle_string_roundtrip(counts: list[int]) -> None:
    assert decode_rle_string(_encode_rle(counts)) == counts


def _mask_from_rows(rows: list[str]) -> Mask:
    h, w = len(rows), len(rows[0])
    bits = 0
    for y, row in enumerate(rows):
        for x, c in enumerate(row):
            if c == "#":
                bits |= 1 << (x * h + y)
    return Mask(h, w, bits)


def test_rle_and_polygon_agree_with_a_drawn_mask() -> None:
    drawn = _mask_from_rows(["....", ".##.", ".##.", "...."])
    # column-major runs: col0 4 bg; col1 1 bg, 2 fg, 1 bg; col2 1 bg, 2 fg; col3 ...
    rle = from_rle(4, 4, [5, 2, 2, 2, 5])
    poly = from_polygons(4, 4, [[1, 1, 3, 1, 3, 3, 1, 3]])
    assert rle.bits == drawn.bits == poly.bits
    assert from_rle(4, 4, _encode_rle([5, 2, 2, 2, 5])).bits == drawn.bits
    assert drawn.bbox() == (1.0, 1.0, 3.0, 3.0)
    assert drawn.contains(1.5, 2.5)
    assert not drawn.contains(0.5, 0.5)


def test_iou_and_j_and_f() -> None:
    a = _mask_from_rows(["##..", "##..", "....", "...."])
    b = _mask_from_rows(["###.", "##..", "....", "...."])
    assert iou(a, b) == 4 / 5
    j, f, jf = j_and_f(a, a)
    assert (j, f, jf) == (1.0, 1.0, 1.0)
    empty = Mask(4, 4, 0)
    assert boundary_f(empty, empty) == 1.0
    assert boundary_f(a, empty) == 0.0
    far = _mask_from_rows(["....", "....", "....", "...#"])
    assert 0.0 <= boundary_f(far, a) < 1.0


def test_segmentation_scorer_with_compressed_rle_and_prompts() -> None:
    gt = json.dumps({"size": [4, 4], "counts": _encode_rle([5, 2, 2, 2, 5])})
    assert score('<answer>{"polygons": [[1, 1, 3, 1, 3, 3, 1, 3]]}</answer>', gt, "segmentation").accuracy == 1.0
    assert score('<answer>{"size": [4, 4], "counts": [5, 2, 2, 2, 5]}</answer>', gt, "segmentation").accuracy == 1.0
    half = '<answer>{"polygon": [[1, 1], [2, 1], [2, 3], [1, 3]]}</answer>'  # left column of the square only
    assert score(half, gt, "segmentation").accuracy == 0.5
    prompts = '<answer>{"boxes": [1, 1, 3, 3], "positive_points": [[1.5, 1.5], [0.5, 0.5]], "negative_points": [[3.5, 3.5]]}</answer>'
    assert score(prompts, gt, "segmentation").accuracy == 0.5 + 0.25 * 0.5 + 0.25
    # Qwen3-VL 0-1000 coordinates for the same polygon on a 4x4 mask
    norm = '<answer>{"polygons": [[250, 250, 750, 250, 750, 750, 250, 750]]}</answer>'
    assert score(norm, gt, "segmentation", extras={"pred_box_format": "norm1000"}).accuracy == 1.0
    assert (
        score('<answer>{"size": [8, 8], "counts": [64]}</answer>', gt, "segmentation").accuracy == 0.0
    )  # size mismatch
