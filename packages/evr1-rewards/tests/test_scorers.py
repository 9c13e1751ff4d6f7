"""Table-driven accuracy cases for every scorer; one comment per case says what it pins down.

"EVR1" marks a behaviour where EasyVideoR1 scores differently (see docs/rewards.md for the full list).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evr1_rewards import score

OPTS = ["A. a red car", "B. a blue bus", "C. a dog", "D. nothing"]
ST_GT = json.dumps(
    {"time": [1, 4], "boxes": {"1": [0, 0, 10, 10], "2": [0, 0, 10, 10], "3": [0, 0, 10, 10], "4": [0, 0, 10, 10]}}
)
TRACK_GT = json.dumps(
    {"boxes": {"0": [0, 0, 10, 10], "1": [10, 10, 20, 20], "2": [20, 20, 30, 30], "3": [30, 30, 40, 40]}}
)

# (problem_type, response, ground_truth, extras, expected accuracy)
CASES = [
    # ---------------------------------------------------------------- multiple choice
    ("multiple choice", "<answer>B</answer>", "B", {}, 1.0),  # EVR1 name with a space
    ("multiple_choice", "<answer>(B)</answer>", "B", {}, 1.0),  # parenthesised
    ("mcq", "<answer>B.</answer>", "<answer>B</answer>", {}, 1.0),  # GT wrapped in answer tags; trailing period
    ("mcq", "<answer>B) a blue bus</answer>", "B", {}, 1.0),  # letter + right paren + text
    ("mcq", "<answer>**B**</answer>", "B", {}, 1.0),  # markdown bold
    ("mcq", "Answer: B", "B", {}, 1.0),  # 'Answer:' declaration without tags
    ("mcq", "I choose B", "B", {}, 1.0),  # EVR1 reads the pronoun as option I
    (
        "mcq",
        "I choose B",
        "I",
        {"options": [f"{c}. x{c}" for c in "ABCDEFGHIJ"]},
        0.0,
    ),  # even with 10 options "I" here is the pronoun
    ("mcq", "a dog", "A", {}, 0.0),  # EVR1 reads the article as option A
    ("mcq", "The answer is a red car", "A", {}, 0.0),  # EVR1: 'answer is a …' → A; prose article is no option
    ("mcq", "<answer>a dog</answer>", "C", {"options": OPTS}, 1.0),  # the answer repeats option C's text
    ("mcq", "<answer>a red car</answer>", "A", {"options": OPTS}, 1.0),  # option text, not the article, gives A
    ("mcq", "<answer>b</answer>", "B", {}, 1.0),  # lower-case letter standing alone
    ("mcq", "<answer>the answer is b because</answer>", "B", {}, 0.0),  # lower-case b inside prose is not an option
    ("mcq", "<answer>E</answer>", "A", {"options": OPTS}, 0.0),  # E is not among the 4 options: no letter
    ("mcq", "<answer>E</answer>", "E", {"options": []}, 1.0),  # an empty options column means "no options": A-J
    ("mcq", "<think>Maybe A? The answer is A.</think><answer>C</answer>", "C", {}, 1.0),  # reasoning letters ignored
    ("mcq", "<think>A seems right</think>After checking, the answer is (D).", "D", {}, 1.0),  # statement after think
    ("mcq", "The answer is B. Wait, no: the answer is C.", "C", {}, 1.0),  # the last declaration wins
    ("mcq", "<answer>Option C</answer>", "C", {}, 1.0),  # 'Option X'
    ("mcq", "The answer is B, not option A.", "B", {}, 1.0),  # a later mention does not override a declaration
    ("mcq", "Option A is wrong and option C is wrong; I pick D", "D", {}, 1.0),  # mentions vs a declaration
    ("mcq", "<answer>C is the correct answer</answer>", "C", {}, 1.0),  # 'X is the correct answer'
    ("mcq", "<answer>答案是C</answer>", "C", {}, 1.0),  # Chinese declaration
    ("mcq", "<answer>选B</answer>", "B", {}, 1.0),  # Chinese 'choose B'
    ("mcq", "<answer>\\boxed{D}</answer>", "D", {}, 1.0),  # boxed inside the tag
    ("mcq", "<answer>A or B</answer>", "A", {}, 0.0),  # two letters, no declaration: no answer
    ("mcq", "", "A", {}, 0.0),  # empty response
    ("mcq", "Considering the scene, so B.", "B", {}, 1.0),  # standalone capital ending the answer
    # ---------------------------------------------------------------- numerical
    ("numerical", "<answer>3</answer>", "3.0", {}, 1.0),  # 3 equals 3.0 (EVR1 eval: '.' parity makes it 0)
    ("numerical", "<answer>1,000</answer>", "1000", {}, 1.0),  # thousands separator
    ("numerical", "<answer>1,234,567.5</answer>", "1234567.5", {}, 1.0),  # several separators + decimals
    ("number", "<answer>one hundred</answer>", "100", {}, 1.0),  # EVR1 reads 'one hundred' as 101
    ("numerical", "<answer>twenty-one</answer>", "21", {}, 1.0),  # hyphenated number words
    ("numerical", "<answer>two thousand and five</answer>", "2005", {}, 1.0),  # scales and 'and'
    ("numerical", "<answer>三十五</answer>", "35", {}, 1.0),  # Chinese numerals
    ("numerical", "<answer>一百零二</answer>", "102", {}, 1.0),  # 零 marks a skipped place
    ("numerical", "<answer>两万三千</answer>", "23000", {}, 1.0),  # 两 and 万
    ("numerical", "<answer>一亿二千万</answer>", "120000000", {}, 1.0),  # 亿 above 万
    ("numerical", "<answer>十二</answer>", "12", {}, 1.0),  # a leading 十 is one ten
    ("numerical", "<answer>三点五</answer>", "3.5", {}, 1.0),  # 点 is the decimal point
    ("numerical", "<answer>负五</answer>", "-5", {}, 1.0),  # 负 is the sign
    ("numerical", "<answer>百分之五十</answer>", "50", {}, 1.0),  # 百分之 is per cent, read as written
    ("numerical", "<answer>百分之五十</answer>", "0.5", {}, 0.0),
    ("numerical", "<answer>二〇二四</answer>", "2024", {}, 1.0),  # bare digits read positionally
    ("numerical", "<answer>贰拾</answer>", "20", {}, 1.0),  # financial numerals
    ("numerical", "<answer>1.5万</answer>", "15000", {}, 1.0),  # an Arabic number scaled by 万
    ("numerical", "<answer>第1步算出，共有三十五个</answer>", "35", {}, 1.0),  # the number written last wins
    ("numerical", "<answer>三个人中选出2个</answer>", "2", {}, 1.0),  # … whichever script it is in
    ("numerical", "<answer>3/4</answer>", "0.75", {}, 1.0),  # fraction
    ("numerical", "<answer>$\\frac{3}{4}$</answer>", "0.75", {}, 1.0),  # LaTeX fraction
    ("numerical", "<answer>50%</answer>", "50", {}, 1.0),  # a percentage is read as written (% is a unit) …
    ("numerical", "<answer>50%</answer>", "0.5", {}, 0.0),  # … never also as 0.5: one answer, one gold
    ("numerical", "<answer>1.5e3</answer>", "1500", {}, 1.0),  # scientific notation (EVR1 reads the mantissa)
    ("numerical", "<answer>1.5 × 10^3</answer>", "1500", {}, 1.0),  # written scientific notation
    ("numerical", "<answer>−7</answer>", "-7", {}, 1.0),  # unicode minus
    ("numerical", "<answer>0.02</answer>", "0.01", {}, 0.0),  # EVR1's absolute 0.015 tolerance calls these equal
    ("numerical", "<answer>1/3</answer>", "0.33", {}, 1.0),  # GT with 2 decimals accepts answers rounding to it
    ("numerical", "<answer>There are 3 people and 2 dogs, so 5 animals</answer>", "5", {}, 1.0),  # the last number
    ("numerical", "<answer>x = 12</answer>", "12", {}, 1.0),  # the number after '='
    ("numerical", "<answer>12-20</answer>", "20", {}, 1.0),  # a range dash is not a minus sign
    ("numerical", "<answer>about 101</answer>", "100", {"rel_tol": 0.05}, 1.0),  # tolerance override from extras
    ("numerical", "<answer>no idea</answer>", "4", {}, 0.0),  # no number
    ("numerical", "<answer>三</answer>", "3", {}, 1.0),  # a single Chinese digit
    # ---------------------------------------------------------------- regression (MRA)
    ("regression", "<answer>2</answer>", "2", {}, 1.0),  # exact
    ("regression", "<answer>2.5</answer>", "2", {}, 0.5),  # boundary: EVR1 gives 0.6 (eps + float drift)
    ("regression", "<answer>2.2</answer>", "2", {}, 0.8),  # 10 % error passes t = 0.50 … 0.85
    ("regression", "<answer>0</answer>", "0", {}, 1.0),  # g = 0 → exact match
    ("regression", "<answer>0.1</answer>", "0", {}, 0.0),  # g = 0, any error → 0
    ("regression", "<answer>about 2,000 m</answer>", "2000", {}, 1.0),  # units and separators
    # ---------------------------------------------------------------- boolean
    ("boolean", "<answer>Yes</answer>", "yes", {}, 1.0),  # case-insensitive
    ("binary classification", "<answer>true</answer>", "Yes", {}, 1.0),  # EVR1 alias; true = yes
    ("boolean", "I KNOW", "no", {}, 0.0),  # EVR1 eval substring 'NO' in 'KNOW'
    ("boolean", "<answer>Notably, yes.</answer>", "yes", {}, 1.0),  # 'Notably' is not 'no'
    ("boolean", "<answer>No... actually yes</answer>", "yes", {}, 1.0),  # the last declaration wins
    ("boolean", "<answer>是</answer>", "yes", {}, 1.0),  # Chinese yes
    ("boolean", "<answer>maybe</answer>", "no", {}, 0.0),  # neither
    # ---------------------------------------------------------------- temporal grounding
    ("temporal grounding", '<answer>{"time": [12.5, 20]}</answer>', '{"time": [12.5, 20]}', {}, 1.0),  # exact JSON
    ("temporal_grounding", '<answer>{"time": [10, 20]}</answer>', '{"time": [15, 25]}', {}, 1 / 3),  # partial overlap
    ("temporal_grounding", '<answer>{"time": [0, 5]}</answer>', '{"time": [10, 20]}', {}, 0.0),  # disjoint → 0
    (
        "temporal_grounding",
        '<answer>{"time": [20, 12.5]}</answer>',
        '{"time": [12.5, 20]}',
        {},
        0.0,
    ),  # reversed: format error in reward mode
    ("temporal_grounding", "<answer>from 12.5 to 20 s</answer>", '{"time": [12.5, 20]}', {}, 1.0),  # prose span
    ("temporal_grounding", "<answer>00:12–00:20</answer>", '{"time": [12, 20]}', {}, 1.0),  # mm:ss with en dash
    ("temporal_grounding", "<answer>12.5-20 seconds</answer>", '{"time": [12.5, 20]}', {}, 1.0),  # dash range
    (
        "temporal_grounding",
        '<answer>{"time": ["00:12", "00:20"]}</answer>',
        '{"time": [12, 20]}',
        {},
        1.0,
    ),  # mm:ss in JSON
    ("temporal_grounding", "<answer>[12, 20]</answer>", "[12, 20]", {}, 1.0),  # bare list both sides
    ("temporal_grounding", "<answer>I am not sure</answer>", '{"time": [1, 2]}', {}, 0.0),  # nothing parseable
    # ---------------------------------------------------------------- spatial grounding
    (
        "spatial grounding",
        '<answer>{"boxes": [0, 0, 10, 10]}</answer>',
        '{"boxes": [0, 0, 10, 10]}',
        {},
        1.0,
    ),  # identical
    (
        "spatial_grounding",
        '<answer>{"boxes": [0, 0, 10, 10]}</answer>',
        '{"boxes": [5, 0, 15, 10]}',
        {},
        1 / 3,
    ),  # half overlap
    (
        "spatial_grounding",
        '<answer>[{"bbox_2d": [0, 0, 10, 10], "label": "cat"}]</answer>',
        "[0, 0, 10, 10]",
        {},
        1.0,
    ),  # Qwen JSON
    ("spatial_grounding", "<answer>The cat is at [0, 0, 10, 10].</answer>", "[0, 0, 10, 10]", {}, 1.0),  # box in prose
    ("spatial_grounding", '<answer>{"boxes": [10, 10, 0, 0]}</answer>', "[0, 0, 10, 10]", {}, 0.0),  # inverted box → 0
    ("spatial_grounding", '<answer>{"boxes": [5, 5, 5, 9]}</answer>', "[0, 0, 10, 10]", {}, 0.0),  # zero-width box → 0
    # Qwen2.5-VL absolute pixels vs a ground truth in Qwen3-VL's 0-1000 convention (image 200x100):
    (
        "spatial_grounding",
        "<answer>[20, 10, 100, 50]</answer>",
        "[100, 100, 500, 500]",
        {"pred_box_format": "absolute", "gt_box_format": "norm1000", "image_size": [200, 100]},
        1.0,
    ),
    # Qwen3-VL 0-1000 prediction vs an absolute-pixel ground truth:
    (
        "spatial_grounding",
        "<answer>[100, 100, 500, 500]</answer>",
        "[20, 10, 100, 50]",
        {"pred_box_format": "qwen3", "gt_box_format": "absolute", "image_size": [200, 100]},
        1.0,
    ),
    (
        "spatial_grounding",
        "<answer>[100, 100, 500, 500]</answer>",
        "[100, 100, 500, 500]",
        {"box_format": "norm1000"},
        1.0,
    ),  # same convention: no size needed
    # ---------------------------------------------------------------- spatio-temporal grounding
    ("spatial-temporal grounding", f"<answer>{ST_GT}</answer>", ST_GT, {}, 1.0),  # EVR1 name; perfect
    # EVR1: one correct box earns full mIoU (0.5·1 + 0.5·1); here vIoU = 1/4 (3 missing frames) → 0.5·1 + 0.5·0.25
    ("spatiotemporal_grounding", '<answer>{"time": [1, 4], "boxes": {"1": [0, 0, 10, 10]}}</answer>', ST_GT, {}, 0.625),
    # extra frames cost too: 4 right + 4 spurious → vIoU = 4/8
    (
        "spatiotemporal_grounding",
        '<answer>{"time": [1, 4], "boxes": {"1": [0,0,10,10], "2": [0,0,10,10], "3": [0,0,10,10], "4": [0,0,10,10], '
        '"5": [0,0,1,1], "6": [0,0,1,1], "7": [0,0,1,1], "8": [0,0,1,1]}}</answer>',
        ST_GT,
        {},
        0.75,
    ),
    (
        "stvg",
        '<answer>{"time": [1.0, 4.0], "boxes": {"1.0": [0,0,10,10], "2.0": [0,0,10,10], "3.0": [0,0,10,10], "4": [0,0,10,10]}}</answer>',
        ST_GT,
        {},
        1.0,
    ),  # "9" == "9.0"
    (
        "spatiotemporal_grounding",
        '<answer>{"time": [1, 4]}</answer>',
        '{"time": [1, 4], "boxes": {}}',
        {},
        1.0,
    ),  # GT without boxes: tIoU only
    # ---------------------------------------------------------------- tracking
    ("tracking", f"<answer>{TRACK_GT}</answer>", TRACK_GT, {}, 1.0),  # perfect
    (
        "tracking",
        '<answer>{"boxes": {"0": [0, 0, 10, 10]}}</answer>',
        TRACK_GT,
        {},
        0.25,
    ),  # EVR1: 1.0 (missing frames ignored)
    (
        "tracking",
        '<answer>{"boxes": {"0.0": [0, 0, 10, 10], "1.0": [10, 10, 20, 20], "2": [20, 20, 30, 30], "3": [30, 30, 40, 40]}}</answer>',
        TRACK_GT,
        {},
        1.0,
    ),  # key normalisation
    (
        "tracking",
        '<answer>{"boxes": {"0": [0, 0, 10, 10], "1": [10, 10, 20, 20], "2": [20, 20, 30, 30], "3": [30, 30, 40, 40], "9": [1, 1, 2, 2]}}</answer>',
        TRACK_GT,
        {},
        0.8,
    ),  # a spurious frame costs
    ("tracking", '<answer>{"boxes": {"0": "left"}}</answer>', TRACK_GT, {}, 0.0),  # unreadable box = IoU 0
    # ---------------------------------------------------------------- OCR
    ("ocr", "<answer>STOP</answer>", "stop", {}, 1.0),  # case-normalised
    ("OCR", "<answer>hello   world</answer>", "Hello world", {}, 1.0),  # EVR1 upper-case name; spaces normalised
    ("ocr", "<answer>helo world</answer>", "hello world", {}, 1 - 1 / 11),  # one edit in 11 chars
    ("ocr", "<answer>exit</answer>", '["stop", "exit"]', {}, 1.0),  # several references → best
    ("ocr", "<answer>停车场</answer>", "停车场入口", {}, 0.6),  # Chinese: 2 missing chars of 5
    ("ocr", "<answer>abc</answer>", "xyz", {"anls_threshold": 0.5}, 0.0),  # ANLS threshold zeroes dissimilar answers
    # ---------------------------------------------------------------- open-ended
    ("open-ended", "<answer>Dolly zoom</answer>", "dolly zoom", {}, 1.0),  # exact (case-insensitive)
    ("open_ended", "<answer>cat</answer>", "cat", {}, 1.0),  # EVR1 video_rl caps a one-word answer at 0.667
    (
        "video qa",
        "<answer>the cat sat</answer>",
        "the cat sat on the mat",
        {},
        2 * 0.5 * 1 / 1.5,
    ),  # EVR1 alias; LCS 3 of 6
    ("free-form", "<answer>猫在桌子上</answer>", "猫在桌子上面", {}, 2 * 1 * (5 / 6) / (1 + 5 / 6)),  # CJK tokens
    ("open_ended", "<answer>completely unrelated</answer>", "dolly zoom", {}, 0.0),  # no overlap
    # ---------------------------------------------------------------- preference
    ("llava", "<answer>Response 2</answer>", "Response 2", {}, 1.0),  # EVR1 name
    (
        "critic",
        "<answer>Response 2 is better than Response 1</answer>",
        "Response 2",
        {},
        1.0,
    ),  # EVR1 substring order → 1
    ("preference", "<answer>Tie</answer>", "tie", {}, 1.0),  # tie label
    ("preference", "<answer>I prefer response 1</answer>", "Response 1", {}, 1.0),  # verdict phrase
    (
        "preference",
        "<answer>Response 1 and Response 2 are both fine</answer>",
        "Response 1",
        {},
        0.0,
    ),  # no single verdict
]


@pytest.mark.parametrize(("problem_type", "response", "gt", "extras", "expected"), CASES)
def test_accuracy(problem_type: str, response: str, gt: str, extras: dict, expected: float) -> None:
    result = score(response, gt, problem_type, extras=extras)
    assert result.accuracy == pytest.approx(expected, abs=1e-9), result.details


METRIC_CASES = [
    # reversed spans are swapped in metric mode (lmms-eval), 0 in reward mode
    ("temporal_grounding", '<answer>{"time": [20, 12.5]}</answer>', '{"time": [12.5, 20]}', {}, 1.0, 0.0),
    (
        "spatiotemporal_grounding",
        '<answer>{"time": [4, 1], "boxes": {}}</answer>',
        '{"time": [1, 4], "boxes": {}}',
        {},
        1.0,
        0.0,
    ),
    # the official VSI-Bench MRA uses <= : the 2.5-vs-2 boundary passes one more threshold
    ("regression", "<answer>2.5</answer>", "2", {"official": True}, 0.6, 0.5),
]


@pytest.mark.parametrize(("problem_type", "response", "gt", "extras", "metric", "reward"), METRIC_CASES)
def test_metric_mode(problem_type: str, response: str, gt: str, extras: dict, metric: float, reward: float) -> None:
    assert score(response, gt, problem_type, extras=extras, mode="metric").accuracy == pytest.approx(metric)
    assert score(response, gt, problem_type, extras=extras, mode="reward").accuracy == pytest.approx(reward)


FORMAT_CASES = [
    ("mcq", "<think>x</think><answer>B</answer>", "B", 1.0),  # structure + parseable payload
    ("mcq", "<answer>blue</answer>", "B", 0.0),  # payload is not a letter
    ("mcq", "B", "B", 0.0),  # no tags
    ("numerical", "<answer>seven</answer>", "7", 1.0),  # number words parse
    ("numerical", "<answer>many</answer>", "7", 0.0),  # not a number
    ("temporal_grounding", '<answer>{"time": [2, 1]}</answer>', "[1, 2]", 0.0),  # reversed span is a format error
    ("spatial_grounding", '<answer>{"boxes": [1, 2, 3]}</answer>', "[0, 0, 4, 4]", 0.0),  # 3 numbers is no box
    ("tracking", '<answer>{"boxes": {}}</answer>', '{"boxes": {"1": [0, 0, 1, 1]}}', 0.0),  # empty track
    ("open_ended", "<answer>anything</answer>", "x", 1.0),  # any non-empty text parses
]


@pytest.mark.parametrize(("problem_type", "response", "gt", "expected"), FORMAT_CASES)
def test_format(problem_type: str, response: str, gt: str, expected: float) -> None:
    assert score(response, gt, problem_type).format == expected


@settings(max_examples=400, deadline=None)
@given(
    sign=st.sampled_from(["", "-", "+"]),
    digits=st.integers(min_value=0, max_value=10**15),
    frac=st.one_of(st.just(""), st.integers(min_value=0, max_value=10**6).map(lambda f: f".{f}")),
    commas=st.booleans(),
    pct=st.sampled_from(["", "%"]),
    pad=st.sampled_from(["", " ", "\t "]),
)
def test_plain_number_fast_path_agrees_with_the_general_parser(sign, digits, frac, commas, pct, pad) -> None:
    from evr1_rewards.numbers import parse_number, parse_number_general

    body = f"{digits:,}" if commas else str(digits)
    text = f"{pad}{sign}{body}{frac}{pct}{pad}"
    assert parse_number(text) == parse_number_general(text), text


_SOUP = st.lists(
    st.sampled_from(["0", "3.4", "1,250", "12", "-5", "+2", "50%", "x", "10^3", "/", "4", "=", "×", "e5", "1e3",
                     "about", "or", "s", "(", ")", "3/4", "-", ",", ".", ":", "\\frac{1}{2}", "percent", "\t", "万"]),
    min_size=1, max_size=8,
).map(" ".join)  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(text=_SOUP)
def test_number_fast_paths_agree_with_the_general_parser_on_token_soup(text: str) -> None:
    from evr1_rewards.numbers import parse_number, parse_number_general

    assert parse_number(text) == parse_number_general(text), text
