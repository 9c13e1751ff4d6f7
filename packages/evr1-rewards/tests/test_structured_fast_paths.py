"""The fast paths of structured answers and ground truths (tracks, spans, JSON) against the general readers they
stand in for, and the model outputs they must survive (a JSON integer beyond float range)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evr1_rewards import RewardInput, RewardRouter
from evr1_rewards.errors import GroundTruthError
from evr1_rewards.extract import _STMT_PREFIX_WORDS, Response, _statement_prefix_ok
from evr1_rewards.scorers._common import first_parsed
from evr1_rewards.scorers._tracks import boxes_by_frame, union_mean_iou
from evr1_rewards.scorers.numerical import is_hedge, parse_answer_number, parse_payload_number, rejects_number
from evr1_rewards.structured import (
    MIN_PRECISION,
    as_box,
    as_float,
    as_span,
    find_json,
    frame_key,
    iou_1d,
    iou_2d,
    json_value_at,
    reward_iou_1d,
    reward_iou_2d,
)
from evr1_rewards.truth import truth_json

HUGE = "1" + "0" * 400  # a JSON integer no float can hold

HUGE_ANSWERS = [  # (type, answer with H for the huge integer, gold, accuracy: what the rest of the answer earns)
    ("tracking", '{"boxes": {"0": [H, 1, 2, 3]}}', '{"boxes": {"0": [0, 0, 5, 5]}}', 0.0),
    ("spatial_grounding", '{"boxes": [H, 1, 2, 3]}', '{"boxes": [0, 0, 5, 5]}', 0.0),
    ("temporal_grounding", '{"time": [H, 1]}', '{"time": [0, 5]}', 0.0),
    ("spatiotemporal_grounding", '{"time": [0, 1], "boxes": {"0": [H, 1, 2, 3]}}',
     '{"time": [0, 5], "boxes": {"0": [0, 0, 5, 5]}}', 0.5 * 0.2),  # the span's tIoU; the box earns nothing
    ("spatiotemporal_grounding", '{"time": [H, 1], "boxes": {"0": [0, 0, 5, 5]}}',
     '{"time": [0, 5], "boxes": {"0": [0, 0, 5, 5]}}', 0.0),
]  # fmt: skip


@pytest.mark.parametrize(("ptype", "answer", "gold", "accuracy"), HUGE_ANSWERS)
def test_json_integers_beyond_float_range_are_read_as_unreadable(
    ptype: str, answer: str, gold: str, accuracy: float
) -> None:
    for mode in ("reward", "metric"):
        r = RewardRouter(mode=mode).score(
            RewardInput(response=f"<answer>{answer.replace('H', HUGE)}</answer>", ground_truth=gold, problem_type=ptype)
        )
        assert r.accuracy == pytest.approx(accuracy), (mode, r)


def test_huge_integers_are_no_number_box_or_span() -> None:
    assert as_float(10**400) is None
    assert as_float(-(10**400)) is None
    assert as_box([10**400, 0, 1, 1]) is None
    assert as_span([0, 10**400]) is None
    assert boxes_by_frame({"0": [0, 0, 10**400, 1]}) == {"0": None}
    with pytest.raises(GroundTruthError, match="invalid or empty boxes"):
        RewardRouter().score(
            RewardInput(response="x", ground_truth=f'{{"boxes": {{"0": [0, 0, {HUGE}, 1]}}}}', problem_type="tracking")
        )


def _general_boxes_by_frame(track: dict[object, object]) -> dict[str, object] | None:
    """What `boxes_by_frame` returns, through the general readers only (its docstring's promise)."""
    out: dict[str, object] = {}
    for k, b in track.items():
        key = frame_key(k)
        if key is None:
            return None
        box = as_box(b)
        out[key] = box if box is not None and box[2] > box[0] and box[3] > box[1] else None
    return out


_KEYS = st.one_of(
    st.integers(-3, 30).map(str),
    st.from_regex(r"0[0-9]{1,3}", fullmatch=True),
    st.from_regex(r"[0-9]{14,20}", fullmatch=True),
    st.sampled_from(["9.0", "9.50", "1e3", "x", "", "١٢", "+5", " 7"]),
    st.integers(-5, 40),
    st.floats(allow_nan=True, allow_infinity=True),
)
_COORD = st.one_of(st.integers(-50, 50), st.integers(-(10**400), 10**400), st.booleans(),
                   st.floats(-60, 60), st.sampled_from(["5", "x", None]))  # fmt: skip
_BOXES = st.one_of(
    st.lists(st.integers(-50, 50), min_size=4, max_size=4),
    st.lists(_COORD, min_size=3, max_size=5),
    st.dictionaries(st.sampled_from(["bbox_2d", "bbox", "other"]), st.lists(st.integers(0, 9), min_size=4, max_size=4)),
    st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(10, 20), st.integers(10, 20)),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _BOXES, max_size=6))
def test_boxes_by_frame_fast_path_reads_as_the_general_readers(track: dict[object, object]) -> None:
    fast, general = boxes_by_frame(track), _general_boxes_by_frame(track)
    assert fast == general
    if fast is not None and general is not None:
        assert list(fast) == list(general)
        for box in fast.values():
            assert box is None or all(type(x) is float for x in box)


_BOX = st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(0, 20), st.integers(0, 20)).map(
    lambda t: tuple(float(x) for x in t)
)


@settings(max_examples=300, deadline=None)
@given(_BOX, _BOX)
def test_gated_box_iou_is_the_documented_rule(pred: tuple[float, ...], gold: tuple[float, ...]) -> None:
    plain = iou_2d(pred, gold)  # type: ignore[arg-type]
    inter = max(0.0, min(pred[2], gold[2]) - max(pred[0], gold[0])) * max(
        0.0, min(pred[3], gold[3]) - max(pred[1], gold[1])
    )
    area = max(0.0, pred[2] - pred[0]) * max(0.0, pred[3] - pred[1])
    assert reward_iou_2d(pred, gold) == (plain if inter >= MIN_PRECISION * area else 0.0)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.tuples(st.integers(0, 30), st.integers(0, 30)), st.tuples(st.integers(0, 30), st.integers(0, 30)))
def test_gated_span_iou_is_the_documented_rule(a: tuple[int, int], b: tuple[int, int]) -> None:
    pred, gold = (float(min(a)), float(max(a))), (float(min(b)), float(max(b)))
    plain = iou_1d(pred, gold)
    inter = min(pred[1], gold[1]) - max(pred[0], gold[0])
    length = pred[1] - pred[0]
    gated = plain if plain == 0.0 or length <= 0.0 or inter >= MIN_PRECISION * length else 0.0
    assert reward_iou_1d(pred, gold) == gated


_TRACK = st.dictionaries(st.integers(0, 8).map(str), st.one_of(st.none(), _BOX), max_size=6)


@settings(max_examples=300, deadline=None)
@given(_TRACK, _TRACK.map(lambda t: {k: v for k, v in t.items() if v is not None}), st.booleans())
def test_union_mean_iou_counts_the_union(pred: dict, gold: dict, gated: bool) -> None:
    value, shared, union = union_mean_iou(pred, gold, ("absolute", "absolute", None), gated=gated)
    keys = set(pred) | set(gold)
    assert (shared, union) == (len(set(pred) & set(gold)), len(keys))
    iou = reward_iou_2d if gated else iou_2d
    total = sum(iou(pred[k], gold[k]) for k in gold if k in pred and pred[k] is not None)
    assert value == pytest.approx(total / len(keys) if keys else 0.0)


JSON_TEXTS = ['{"a": 1}', "[1, 2]", ' {"a": 1} ', '{"a": 1} tail', '{"a": 1}{"b": 2}', "\ufeff{}", "{", "[" * 100_000,
              '{"a": NaN}', '{"a": 1e999}', "", "   ", "```json\n{\"a\": 1}\n```", "42"]  # fmt: skip


def _loads(text: str) -> tuple[bool, object]:
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


@pytest.mark.parametrize("text", JSON_TEXTS, ids=range(len(JSON_TEXTS)))
def test_truth_json_reads_as_json_loads(text: str) -> None:
    ok, value = _loads(text.strip("`").removeprefix("json").strip() if text.startswith("```") else text.strip())
    if ok:
        got = truth_json(text)
        assert json.dumps(got) == json.dumps(value)
    else:
        with pytest.raises(GroundTruthError, match="not valid JSON"):
            truth_json(text)


@pytest.mark.parametrize("text", [*JSON_TEXTS, '"text"', '  {"a": 1}'], ids=range(len(JSON_TEXTS) + 2))
def test_json_value_at_is_raw_decode(text: str) -> None:
    try:
        expected: tuple[object, int] | None = json.JSONDecoder().raw_decode(text, 0)
    except (ValueError, RecursionError):
        expected = None
    got = json_value_at(text)
    assert (got is None) == (expected is None)
    if got is not None and expected is not None:
        assert (json.dumps(got[0]), got[1]) == (json.dumps(expected[0]), expected[1])


def test_find_json_whole_answer_and_embedded_values() -> None:
    assert find_json('{"time": [1, 2]}') == {"time": [1, 2]}
    assert find_json('```json\n{"time": [1, 2]}\n```') == {"time": [1, 2]}
    assert find_json('0 {"boxes": {"1": [0, 0, 2, 2]}} done') == {"boxes": {"1": [0, 0, 2, 2]}}
    assert find_json("[1, 2]", want=list) == [1, 2]
    assert find_json('{"a": 1} trailing {"b": 2}') == {"b": 2}
    assert find_json("[" * 100_000) is None
    assert find_json('{"a": [1, 2}') is None


RESPONSES = ["<answer>3.4</answer>", "<answer>3 or 4</answer>", "The answer is 3 or 4", "<think>x</think> 3 or 4",
             "<think>x</think> about 3 and 5.", "\\boxed{3, 4, 5} so 7", "7 then 3 or 4", "not 42", "<answer>0 3.4</answer>",
             "The answer is 12", "<think>hmm</think>\nThe answer is 3 or 4, so 5"]  # fmt: skip


@pytest.mark.parametrize("text", RESPONSES)
def test_one_hedge_test_per_candidate_gives_the_same_answers(text: str) -> None:
    """first_parsed tests the hedge once per candidate (skipping an unstated one that hedges), so the parser it is
    given may skip that test: the same value and source as the parser that makes it itself."""
    resp = Response(text)
    assert first_parsed(resp, parse_payload_number, is_hedge, rejects_number) == first_parsed(
        resp, parse_answer_number, is_hedge, rejects_number
    )


_NAIVE_LAST_WORD = re.compile(r"([a-z]+)[^a-z]{0,3}$")


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab tehfinalso\n.:*-#>,é1", max_size=40))
def test_statement_prefix_reads_the_last_word(before: str) -> None:
    """The statement prefix test finds the last word in linear time; the plain regex (quadratic in a run of letters)
    says which word that is."""
    text = before + "answer is B"
    head = text[max(0, len(before) - 24) : len(before)].rstrip(" \t*#-")
    m = _NAIVE_LAST_WORD.search(head)
    ok = (
        not head
        or head.endswith(("\n", ":", "：", ".", ",", ">"))
        or (m is not None and m.group(1) in _STMT_PREFIX_WORDS)
    )
    assert _statement_prefix_ok(text, len(before)) == ok
