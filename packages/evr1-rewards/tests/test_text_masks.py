"""The bit-parallel text algorithms and the pure-Python masks against straightforward reference implementations."""

from __future__ import annotations

import json
import math

import pytest
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


@pytest.mark.parametrize("key", ["boxes", "bbox_2d", "bbox", "box"])
def test_segmentation_box_prompts_are_converted_under_every_key(key: str) -> None:
    """A box prompt in another coordinate convention is converted whichever key holds it (`box` was read unconverted)."""
    gt = json.dumps({"size": [4, 4], "counts": _encode_rle([5, 2, 2, 2, 5])})
    answer = f'<answer>{{"{key}": [250, 250, 750, 750]}}</answer>'
    assert score(answer, gt, "segmentation", extras={"pred_box_format": "norm1000"}, mode="metric").accuracy == 0.5


# -- DAVIS boundary F, against a direct transcription of its definitions (seg2bmap, skimage disk, f_measure) -----------
def _grid_mask(grid: list[list[int]]) -> Mask:
    h, w = len(grid), len(grid[0])
    return Mask(h, w, sum(1 << (x * h + y) for y in range(h) for x in range(w) if grid[y][x]))


def _bits_grid(bits: int, h: int, w: int) -> list[list[int]]:
    return [[(bits >> (x * h + y)) & 1 for x in range(w)] for y in range(h)]


def _ref_seg2bmap(g: list[list[int]]) -> list[list[int]]:
    h, w = len(g), len(g[0])

    def at(y: int, x: int) -> int:
        return g[y][x] if y < h and x < w else 0

    b = [[int(at(y, x) != at(y, x + 1) or at(y, x) != at(y + 1, x) or at(y, x) != at(y + 1, x + 1))
          for x in range(w)] for y in range(h)]  # fmt: skip
    for x in range(w):
        b[h - 1][x] = int(at(h - 1, x) != at(h - 1, x + 1))
    for y in range(h):
        b[y][w - 1] = int(at(y, w - 1) != at(y + 1, w - 1))
    b[h - 1][w - 1] = 0
    return b


def _ref_dilate(g: list[list[int]], r: int) -> list[list[int]]:
    h, w = len(g), len(g[0])
    disk = [(dy, dx) for dy in range(-r, r + 1) for dx in range(-r, r + 1) if dx * dx + dy * dy <= r * r]
    return [[int(any(0 <= y - dy < h and 0 <= x - dx < w and g[y - dy][x - dx] for dy, dx in disk))
             for x in range(w)] for y in range(h)]  # fmt: skip


def _ref_f(pred: list[list[int]], gt: list[list[int]], bound_th: float = 0.008) -> float:
    h, w = len(gt), len(gt[0])
    r = math.ceil(bound_th * math.hypot(h, w))
    bp, bg = _ref_seg2bmap(pred), _ref_seg2bmap(gt)
    n_p, n_g = sum(map(sum, bp)), sum(map(sum, bg))
    if n_p == 0 and n_g == 0:
        return 1.0
    if n_p == 0 or n_g == 0:
        return 0.0
    dg, dp = _ref_dilate(bg, r), _ref_dilate(bp, r)
    precision = sum(bp[y][x] and dg[y][x] for y in range(h) for x in range(w)) / n_p
    recall = sum(bg[y][x] and dp[y][x] for y in range(h) for x in range(w)) / n_g
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def test_boundary_is_davis_seg2bmap_on_a_hand_case() -> None:
    from evr1_rewards.masks import boundary

    square = [[0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]]
    # a pixel differs from its east / south / south-east neighbour: the square's edges and the pixels just before them
    assert _bits_grid(boundary(_grid_mask(square)), 4, 4) == [
        [1, 1, 1, 0],
        [1, 0, 1, 0],
        [1, 1, 1, 0],
        [0, 0, 0, 0],
    ]
    # the last row / column compare east / south only, so the image border itself is never a boundary in DAVIS
    full = [[1, 1, 1], [1, 1, 1]]
    assert _bits_grid(boundary(_grid_mask(full)), 2, 3) == [[0, 0, 0], [0, 0, 0]]
    corner = [[0, 0, 0], [0, 1, 1], [0, 1, 1]]
    assert _bits_grid(boundary(_grid_mask(corner)), 3, 3) == [[1, 1, 1], [1, 0, 0], [1, 0, 0]]


def test_disk_dilation_is_not_a_square() -> None:
    from evr1_rewards.masks import dilate

    dot = _grid_mask([[1 if (y, x) == (3, 3) else 0 for x in range(7)] for y in range(7)])
    grown = _bits_grid(dilate(dot.bits, 7, 7, 2), 7, 7)
    assert sum(map(sum, grown)) == 13  # skimage disk(2): 13 pixels, a 5x5 square would be 25
    assert grown[1][1] == 0
    assert grown[1][3] == grown[3][1] == grown[2][2] == 1


@pytest.mark.parametrize("seed", range(12))
def test_boundary_f_matches_davis_definitions_on_random_masks(seed: int) -> None:
    import random

    from evr1_rewards.masks import boundary, dilate

    rng = random.Random(seed)
    h, w = rng.randint(3, 40), rng.randint(3, 40)

    def blobs() -> list[list[int]]:
        g = [[0] * w for _ in range(h)]
        for _ in range(rng.randint(0, 3)):
            y0, x0 = rng.randrange(h), rng.randrange(w)
            y1, x1 = min(h, y0 + rng.randint(1, h)), min(w, x0 + rng.randint(1, w))
            for y in range(y0, y1):
                for x in range(x0, x1):
                    g[y][x] = 1 if rng.random() < 0.9 else g[y][x]
        return g

    pred, gt = blobs(), blobs()
    assert _bits_grid(boundary(_grid_mask(gt)), h, w) == _ref_seg2bmap(gt)
    radius = rng.randint(1, 4)
    assert _bits_grid(dilate(_grid_mask(gt).bits, h, w, radius), h, w) == _ref_dilate(gt, radius)
    bound_th = rng.choice([0.008, 0.05, 0.1])
    assert boundary_f(_grid_mask(pred), _grid_mask(gt), bound_th) == pytest.approx(_ref_f(pred, gt, bound_th))
