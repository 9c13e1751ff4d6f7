"""Reward hacking, second round: each attack through the public `score` API (the attacker's answer, the gold, the
score it must get), next to the honest answers that keep scoring; then the property that bounds every type — summed
over every possible gold, one answer earns at most 1 — checked with hypothesis on each type's family of golds.
The rules are stated in docs/rewards.md ("Reward hacking: the rules")."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evr1_rewards import RewardInput, RewardRouter, available_types, normalize_problem_type, score

WHOLE_FRAME_SEG = json.dumps({"boxes": [0, 0, 16, 16], "positive_points": [[8, 8]], "negative_points": [[0, 0]]})
SEG_GOLD = json.dumps({"size": [16, 16], "polygons": [[4, 4, 12, 4, 12, 12, 4, 12]]})  # an 8x8 square in the middle

# (attack class, problem type, answer, gold, expected accuracy)
ATTACKS = [
    # one answer, one gold: a percentage is read as written
    ("percent", "numerical", "<answer>300%</answer>", "3", 0.0),
    ("percent", "numerical", "<answer>300%</answer>", "300", 1.0),
    ("percent", "math", "<answer>300%</answer>", "3", 0.0),
    ("percent", "math", "<answer>300%</answer>", "300", 1.0),
    ("percent", "math", "<answer>300\\%</answer>", "3", 0.0),
    ("percent", "regression", "<answer>300%</answer>", "3", 0.0),
    ("percent", "numerical", "<answer>百分之五十</answer>", "0.5", 0.0),
    # a negated or rejected answer scores 0
    ("negation", "multiple choice", "<answer>not B</answer>", "B", 0.0),
    ("negation", "multiple choice", "<answer>B is wrong</answer>", "B", 0.0),
    ("negation", "multiple choice", "I would not choose B.", "B", 0.0),
    ("negation", "numerical", "<answer>not 42</answer>", "42", 0.0),
    ("negation", "numerical", "The answer is not 42.", "42", 0.0),
    ("negation", "boolean", "<answer>not yes</answer>", "yes", 0.0),
    ("negation", "boolean", "I can't say yes", "yes", 0.0),
    ("negation", "preference", "Response 2 is worse", "Response 2", 0.0),
    ("negation", "preference", "<answer>Response 2 is worse</answer>", "Response 2", 0.0),
    # the final answer outside the reasoning block wins
    ("think", "multiple choice", "<think><answer>B</answer></think> The answer is A.", "B", 0.0),
    ("think", "multiple choice", "<think><answer>B</answer></think> The answer is A.", "A", 1.0),
    ("think", "numerical", "<think><answer>7</answer></think> So the count is 8.", "7", 0.0),
    # compatibility forms read alike for every type
    ("nfkc", "multiple choice", "<answer>Ｂ</answer>", "B", 1.0),
    ("nfkc", "boolean", "<answer>ｙｅｓ</answer>", "yes", 1.0),
    ("nfkc", "preference", "<answer>Response ２</answer>", "Response 2", 1.0),
    ("nfkc", "numerical", "<answer>４２</answer>", "42", 1.0),
    ("nfkc", "multiple choice", "<answer>𝐁</answer>", "B", 1.0),  # mathematical bold
    # constant / whole-frame / whole-video answers
    ("constant", "temporal grounding", '<answer>{"time": [0, 100]}</answer>', '{"time": [10, 30]}', 0.0),
    ("constant", "spatial grounding", '<answer>{"boxes": [0, 0, 640, 480]}</answer>', '{"boxes": [100, 100, 300, 300]}', 0.0),
    ("constant", "segmentation", f"<answer>{WHOLE_FRAME_SEG}</answer>", SEG_GOLD, 0.0),
    ("constant", "segmentation", '<answer>{"polygon": [[0, 0], [16, 0], [16, 16], [0, 16]]}</answer>', SEG_GOLD, 0.0),
    ("constant", "tracking", '<answer>{"boxes": {"1": [0, 0, 640, 480], "2": [0, 0, 640, 480]}}</answer>',
     '{"boxes": {"1": [100, 100, 300, 300], "2": [110, 100, 310, 300]}}', 0.0),
    ("constant", "spatiotemporal grounding", '<answer>{"time": [0, 100], "boxes": {"1": [0, 0, 640, 480]}}</answer>',
     '{"time": [10, 30], "boxes": {"1": [100, 100, 300, 300]}}', 0.0),
    # hedges over the options, every phrasing
    ("hedge", "multiple choice", "<answer>one of A, B, C, D</answer>", "D", 0.0),
    ("hedge", "multiple choice", "It is one of A, B, C, D.", "D", 0.0),
    ("hedge", "multiple choice", "could be A, B, C or D", "D", 0.0),
    ("hedge", "multiple choice", "<answer>any of A/B/C/D</answer>", "D", 0.0),
    ("hedge", "multiple choice", "The options are:\nA\nB\nC\nD", "D", 0.0),
    ("hedge", "multiple choice", "Answer:\nA\nB\nC\nD", "A", 0.0),
    ("hedge", "multiple choice", "- A\n- B\n- C\n- D", "A", 0.0),
    ("hedge", "multiple choice", "Options:\n(A)\n(B)\n(C)\n(D)", "D", 0.0),
]  # fmt: skip

HONEST = [
    ("multiple choice", "The answer is B, not C.", "B", 1.0),
    ("multiple choice", "A is incorrect, so the answer is B.", "B", 1.0),
    ("multiple choice", "<think>A is not right</think><answer>B</answer>", "B", 1.0),
    ("multiple choice", "Options:\nA\nB\nC\nD\nThe answer is B.", "B", 1.0),
    ("boolean", "No, the man is not holding a cup.", "no", 1.0),
    ("boolean", "Yes, it is not raining.", "yes", 1.0),
    ("numerical", "not 4 but 5", "5", 1.0),
    ("numerical", "<answer>50%</answer>", "50", 1.0),
    ("preference", "Response 2 is better", "Response 2", 1.0),
    ("math", "<answer>\\frac{3}{4}</answer>", "0.75", 1.0),
    ("math", "<think>x</think><answer>$\\dfrac{3}{4}$</answer>", "\\frac{3}{4}", 1.0),
    ("temporal grounding", '<answer>{"time": [12, 30]}</answer>', '{"time": [10, 30]}', 0.9),
    ("spatial grounding", '<answer>{"boxes": [100, 100, 300, 300]}</answer>', '{"boxes": [100, 100, 300, 300]}', 1.0),
    ("segmentation", '<answer>{"boxes": [4, 4, 12, 12], "positive_points": [[8, 8]], "negative_points": [[0, 0]]}'
     "</answer>", SEG_GOLD, 1.0),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "ptype", "answer", "gold", "expected"), ATTACKS)
def test_attack(kind: str, ptype: str, answer: str, gold: str, expected: float) -> None:
    res = score(answer, gold, ptype)
    assert res.accuracy == pytest.approx(expected), (kind, res.details)


@pytest.mark.parametrize(("ptype", "answer", "gold", "expected"), HONEST)
def test_honest_answers_keep_scoring(ptype: str, answer: str, gold: str, expected: float) -> None:
    assert score(answer, gold, ptype).accuracy == pytest.approx(expected)


def test_programs_and_their_tests_are_not_folded() -> None:
    # Folding is for reading answers; a program's full-width literal is what it prints, and a test expects it exactly.
    from evr1_rewards.sandbox import SandboxUnavailableError, backend_for

    try:
        backend_for(None)
    except SandboxUnavailableError:
        pytest.skip("no sandbox on this machine (bubblewrap is installed in the project's test environment)")
    program = '```python\nprint("ｙｅｓ")\n```'
    assert score(program, '[{"input": "", "output": "ｙｅｓ"}]', "code").accuracy == 1.0
    assert score(program, '[{"input": "", "output": "yes"}]', "code").accuracy == 0.0


def test_metric_mode_keeps_the_plain_iou() -> None:
    # The gate is a reward rule: evaluation reports the benchmarks' own IoU.
    inp = RewardInput(response='<answer>{"time": [0, 100]}</answer>', ground_truth='{"time": [10, 30]}',
                      problem_type="temporal grounding")  # fmt: skip
    res = RewardRouter(mode="metric").score(inp)
    assert res.accuracy == pytest.approx(0.2)


# --- summed over every possible gold, one answer earns at most 1 -------------------------------------------------


def _boxes(ptype_key: str) -> list[str]:
    quads = [[0, 0, 50, 50], [50, 0, 100, 50], [0, 50, 50, 100], [50, 50, 100, 100]]
    if ptype_key == "spatial_grounding":
        return [json.dumps({"boxes": q}) for q in quads]
    if ptype_key == "tracking":
        return [json.dumps({"boxes": {"1": q, "2": q}}) for q in quads]
    return [json.dumps({"time": [10 * i, 10 * i + 10], "boxes": {"1": q}}) for i, q in enumerate(quads)]


GOLDS: dict[str, list[str]] = {
    "multiple_choice": list("ABCD"),
    "boolean": ["yes", "no"],
    "preference": ["Response 1", "Response 2", "Tie"],
    "numerical": ["3", "300", "0.03", "0.5", "30", "4"],
    "regression": ["1", "3", "9", "27"],  # MRA > 0 only within 50 % of the gold: these ranges are disjoint
    "math": ["3", "300", "0.03", "0.5"],
    "temporal_grounding": [json.dumps({"time": [10 * i, 10 * i + 10]}) for i in range(4)],
    "spatial_grounding": _boxes("spatial_grounding"),
    "tracking": _boxes("tracking"),
    "spatiotemporal_grounding": _boxes("spatiotemporal_grounding"),
    "segmentation": [json.dumps({"size": [16, 16], "polygons": [p]})
                     for p in ([0, 0, 8, 0, 8, 8, 0, 8], [8, 0, 16, 0, 16, 8, 8, 8], [0, 8, 8, 8, 8, 16, 0, 16])],
    "ocr": ["cat", "dog", "fox"],  # pairwise entirely different
    "open_ended": ["a red car", "two dogs"],
    "code": ['[{"input": "", "output": "1"}]', '[{"input": "", "output": "2"}]'],
}  # fmt: skip
"""For each type, golds a question could have that are different answers (by that type's rule)."""

COMMON = ["<answer>", "</answer>", "<think>", "</think>", " or ", ", ", "\n", "one of ", "not ", "The answer is ",
          "\\boxed{", "}", "%", " is wrong", " is worse"]  # fmt: skip
PIECES: dict[str, list[str]] = {
    "multiple_choice": ["A", "B", "C", "D", "Ｂ", "(C)", "- D"],
    "boolean": ["yes", "no", "ｙｅｓ", "true", "I can't say "],
    "preference": ["Response 1", "Response 2", "tie", "both", "Response ２"],
    "numerical": ["3", "300", "0.03", "0.5", "30", "4", "百分之五十", "\\frac{1}{2}", "３"],
    "regression": ["1", "3", "9", "27", "2", "5", "0.7"],
    "math": ["3", "300", "0.03", "0.5", "\\%", "\\frac{1}{2}", "$", "3/100"],
    "temporal_grounding": ['{"time": [', "0, 40", "5, 15", "0, 20", "]}", "8, 22"],
    "spatial_grounding": ['{"boxes": ', "[0, 0, 100, 100]", "[25, 25, 75, 75]", "[0, 0, 50, 50]", "}"],
    "tracking": ['{"boxes": ', '{"1": [0, 0, 100, 100], "2": [0, 0, 100, 100]}', '{"1": [0, 0, 60, 60]}', "}"],
    "spatiotemporal_grounding": ['{"time": [0, 40], "boxes": {"1": [0, 0, 100, 100]}}', '{"time": [', "0, 20",
                                 '], "boxes": {"1": [25, 25, 75, 75]}}'],
    "segmentation": ['{"polygon": [[0, 0], [16, 0], [16, 16], [0, 16]]}',
                     '{"polygon": [[0, 0], [16, 0], [16, 8], [0, 8]]}',
                     '{"boxes": [0, 0, 16, 16], "positive_points": [[4, 4], [12, 4]], "negative_points": [[12, 12]]}',
                     '{"boxes": [0, 0, 16, 8], "positive_points": [[4, 4]], "negative_points": [[4, 12]]}'],
    "ocr": ["catdog", "cat", "dog", "fox", "ca", "do"],
    "open_ended": ["a red car", "two dogs", "red", "dogs", "a"],
}  # fmt: skip
SUM_TYPES = sorted(set(GOLDS) - {"open_ended", "code"})


@st.composite
def typed_answer(draw: st.DrawFn, ptype: str) -> str:
    """An answer assembled from the type's own tokens and the structure/negation/hedge words (plus noise)."""
    piece = st.sampled_from(PIECES[ptype] + COMMON) | st.text(max_size=3)
    return "".join(draw(st.lists(piece, min_size=1, max_size=10)))


def _answers(ptype: str) -> st.SearchStrategy[tuple[str, str]]:
    return typed_answer(ptype).map(lambda a: (ptype, a))


TYPED = st.one_of(*(_answers(t) for t in SUM_TYPES))


def test_every_type_has_a_gold_family() -> None:
    assert set(GOLDS) == {normalize_problem_type(t) for t in available_types()} | set(GOLDS)
    assert {normalize_problem_type(t) for t in available_types()} <= set(GOLDS)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=TYPED)
@example(case=("numerical", "<answer>300%</answer>"))  # the attacks of the first and second rounds, always tried
@example(case=("math", "<answer>300%</answer>"))
@example(case=("multiple_choice", "<answer>one of A, B, C, D</answer>"))
@example(case=("segmentation", f"<answer>{WHOLE_FRAME_SEG}</answer>"))
def test_one_answer_earns_at_most_one_summed_over_golds(case: tuple[str, str]) -> None:
    ptype, answer = case
    extras = {"anls_threshold": 0.5} if ptype == "ocr" else {}  # ANLS; the dense default is graded (below)
    total = sum(score(answer, gold, ptype, extras=extras).accuracy for gold in GOLDS[ptype])
    assert total <= 1.0 + 1e-9, (ptype, answer, total)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.one_of(_answers("open_ended"), _answers("ocr")))
def test_graded_types_give_full_marks_on_one_gold_at_most(case: tuple[str, str]) -> None:
    # open_ended (ROUGE-L) and ocr's dense default (1 - normalised edit distance) are graded similarities: "catdog"
    # is half-way to both "cat" and "dog", so the sum bound holds only with ANLS's threshold (above); what holds
    # for every answer is that it is fully right for at most one of several different golds.
    ptype, answer = case
    full = [g for g in GOLDS[ptype] if score(answer, g, ptype).accuracy >= 1.0 - 1e-9]
    assert len(full) <= 1, (answer, full)


@pytest.mark.parametrize(
    "program", ["print(1)", "print(2)", "print('1\\n2')", "import sys; print(1 if sys.stdin else 2)"]
)
def test_code_answer_passes_one_gold_at_most(program: str) -> None:
    from evr1_rewards.sandbox import SandboxUnavailableError, backend_for

    try:
        backend_for(None)
    except SandboxUnavailableError:
        pytest.skip("no sandbox on this machine (bubblewrap is installed in the project's test environment)")
    total = sum(score(f"```python\n{program}\n```", gold, "code").accuracy for gold in GOLDS["code"])
    assert total <= 1.0, program
