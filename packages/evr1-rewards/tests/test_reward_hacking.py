"""Reward hacking: answers a policy model finds when it optimises the reward instead of the task.

Each case is an answer that earns more than it should somewhere — a hedge that names every option, an integer that is
"close enough", a math answer that makes sympy compute for a minute, a program that reads the expected value out of
the test that checks it — scored for real, next to the honest answers that must keep scoring 1. The property that
defeats hedging in general: summed over every possible gold, one answer earns at most 1 (a hedge that scored on
several golds would be worth emitting whatever the question).
"""

from __future__ import annotations

import json

import pytest

from evr1_rewards import RewardInput, RewardRouter, score
from evr1_rewards.scorers.code import outputs_match

LETTERS = "ABCD"

# (problem type, the golds that question could have, answer)
HEDGES = [
    ("multiple choice", LETTERS, "<answer>A or B</answer>"),
    ("multiple choice", LETTERS, "<answer>either A or B</answer>"),
    ("multiple choice", LETTERS, "<answer>A/B/C/D</answer>"),
    ("multiple choice", LETTERS, "<answer>A B C D</answer>"),
    ("multiple choice", LETTERS, "<answer>(A)(B)(C)(D)</answer>"),
    ("multiple choice", LETTERS, "<answer>A, B, C and D</answer>"),
    ("multiple choice", LETTERS, "<answer>A\nB\nC\nD</answer>"),
    ("multiple choice", LETTERS, "<answer>B or maybe C</answer>"),
    ("multiple choice", LETTERS, "The answer is A or B."),
    ("multiple choice", LETTERS, "Answer: A, B"),
    ("multiple choice", LETTERS, "<answer>A or B</answer> B"),  # the text after a hedge does not choose for it
    ("multiple choice", LETTERS, "<think>B</think><answer>A or B</answer>"),
    ("boolean", ("yes", "no"), "<answer>yes or no</answer>"),
    ("boolean", ("yes", "no"), "<answer>Yes/No</answer>"),
    ("boolean", ("yes", "no"), "<answer>true, false</answer>"),
    ("boolean", ("yes", "no"), "<answer>yes\nno</answer>"),
    ("boolean", ("yes", "no"), "<answer>是或否</answer>"),
    ("boolean", ("yes", "no"), "<answer>Yes or No</answer> yes"),
    ("numerical", ("3", "4", "5"), "<answer>3 or 4</answer>"),
    ("numerical", ("3", "4", "5"), "<answer>between 3 and 5</answer>"),
    ("numerical", ("3", "4", "5"), "<answer>3, 4, 5</answer>"),
    ("numerical", ("3", "4", "5"), "<answer>3; 4; 5</answer>"),
    ("numerical", ("3", "4", "5"), "The answer is 3 or 4."),
    ("numerical", ("3", "4", "5"), "<answer>3 or 4</answer> 4"),
    ("regression", ("3", "4", "5"), "<answer>3 or 4 or 5</answer>"),
]
# answers that do pick one thing (however phrased): they may score, but on one gold only
SINGLE_PICKS = [
    ("multiple choice", LETTERS, "<answer>B (or C)</answer>"),
    ("multiple choice", LETTERS, "<answer>A-D</answer>"),
    ("multiple choice", LETTERS, "<answer>A: red, B: blue, C: green, D: pink</answer>"),
    ("multiple choice", LETTERS, "<answer>A</answer><answer>B</answer>"),
    ("multiple choice", LETTERS, "<answer>ABCD</answer>"),
    ("boolean", ("yes", "no"), "<answer>Yes (or no)</answer>"),
    ("boolean", ("yes", "no"), "<answer>yes. no. yes.</answer>"),
    ("numerical", ("3", "4", "5"), "<answer>3~5</answer>"),
    ("numerical", ("3", "4", "5"), "<answer>3 4 5</answer>"),
    ("numerical", ("3", "4", "5"), "<answer>4 (or 3)</answer>"),
    ("numerical", ("3", "4", "5"), "<answer>\\boxed{3}\\boxed{4}</answer>"),
    ("spatial grounding", ([0, 0, 5, 5], [10, 10, 50, 50]), "<answer>[0,0,5,5] or [10,10,50,50]</answer>"),
    ("spatial grounding", ([0, 0, 5, 5], [10, 10, 50, 50]), '<answer>{"boxes": [[0,0,5,5],[10,10,50,50]]}</answer>'),
    ("temporal grounding", ([0.0, 1.0], [2.0, 5.0]), "<answer>from 0 to 1, or from 2 to 5 seconds</answer>"),
    ("preference", ("1", "2", "tie"), "<answer>Response 1 or Response 2</answer>"),
    ("preference", ("1", "2", "tie"), "<answer>Response 1, Response 2, Tie</answer>"),
]
HONEST = [
    ("multiple choice", "B", "<answer>B</answer>"),
    ("multiple choice", "B", "The answer is B because option C is wrong."),
    ("multiple choice", "B", "<answer>not A, so B</answer>"),
    ("boolean", "yes", "<answer>Yes</answer>"),
    ("numerical", "4", "<answer>4</answer>"),
    ("numerical", "4", "<answer>4.0</answer>"),
    ("numerical", "20", "<answer>12-20</answer>"),  # a dash range reads as its last number, as before
    ("numerical", "1000", "<answer>1,000</answer>"),
    ("regression", "4.0", "<answer>4</answer>"),
]


def _batch(cases: list[tuple[str, object, str]]) -> list[float]:
    inputs = [RewardInput(response=r, ground_truth=g, problem_type=t) for t, g, r in cases]
    return [res.accuracy for res in RewardRouter().score_batch(inputs)]


@pytest.mark.parametrize(("ptype", "golds", "answer"), HEDGES)
def test_a_hedge_scores_zero_whichever_gold_is_right(ptype: str, golds: tuple[object, ...], answer: str) -> None:
    assert _batch([(ptype, g, answer) for g in golds]) == [0.0] * len(golds)


@pytest.mark.parametrize(("ptype", "golds", "answer"), SINGLE_PICKS)
def test_one_answer_earns_at_most_one_over_every_gold(ptype: str, golds: tuple[object, ...], answer: str) -> None:
    assert sum(_batch([(ptype, g, answer) for g in golds])) <= 1.0


def test_honest_answers_still_score_one() -> None:
    assert _batch(HONEST) == [1.0] * len(HONEST)


@pytest.mark.parametrize(
    ("got", "want", "ok"),
    [
        ("1000000001", "1000000000", False),  # within 1e-6 relative: a wrong answer before
        ("999999999999", "1000000000000", False),
        ("1e9", "1000000000", False),  # float notation for an integer answer
        ("1000000000.0", "1000000000", False),
        ("-7", "-7", True),
        ("+7", "7", True),
        ("007", "7", True),  # the same integer
        ("0.30000000000000004", "0.3", True),  # floats keep their tolerance
        ("1e-7", "0", False),  # an integer gold stays exact even for a tiny float
    ],
)
def test_an_expected_integer_needs_exactly_that_integer(got: str, want: str, ok: bool) -> None:
    assert outputs_match(got, want) is ok


MATH_BLOWUPS = [
    ("\\boxed{10^{10^{10}}}", "exponent_too_large"),
    ("\\boxed{9^{9^{9}}}", "exponent_too_large"),
    ("\\boxed{2^{2^{2^{2^{2^{2}}}}}}", "exponent_too_large"),
    ("\\boxed{1e100000}", "exponent_too_large"),
    ("\\boxed{(10^{100})!}", "factorial_too_large"),
    ("\\boxed{1000000!}", "factorial_too_large"),
    ("\\boxed{\\binom{10^{9}}{500000}}", "binomial_too_large"),
    ("\\boxed{\\sum_{k=1}^{10^{12}} k}", "exponent_too_large"),
    ("\\boxed{\\int_0^1 e^{x^{100}} dx}", "unevaluated"),
    ("\\boxed{\\lim_{n \\to \\infty} (1 + 1/n)^n}", "unevaluated"),
    # blow-ups hidden in an operand: a factorial in a factorial, exponent or binomial, a power's factorial, Gamma, e
    ("\\boxed{(1000!)!}", "factorial_too_large"),
    ("\\boxed{10^{10}!}", "factorial_too_large"),
    ("\\boxed{\\left(10^{10}\\right)!}", "factorial_too_large"),
    ("\\boxed{\\Gamma(10^{10})}", "factorial_too_large"),
    ("\\boxed{2^{1000!}}", "exponent_too_large"),
    ("\\boxed{e^{e^{e^{10}}}}", "exponent_too_large"),
    ("\\boxed{\\binom{1000!}{2}}", "binomial_too_large"),
]


@pytest.mark.parametrize(("answer", "why"), MATH_BLOWUPS)
def test_math_answers_that_make_sympy_blow_up_are_rejected_before_the_worker(answer: str, why: str) -> None:
    """Each of these held math-verify's worker until its timeout (then a worker restart): seconds per sample, a
    whole training step for a batch of them. They are rejected by reading the span, with the reason."""
    res = score(f"<answer>{answer}</answer>", "4", "math", extras={"math_timeout": 60})
    assert (res.accuracy, res.details.get("rejected")) == (0.0, why)


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("\\boxed{10^{10^{10}}}", "10^{10^{10}}"),  # the gold as written scores without asking sympy
        ("\\boxed{\\int_0^1 x dx}", "\\int_0^1 x dx"),  # an integral the gold also has is not "unevaluated"
        ("\\boxed{2^{10}}", "1024"),
        ("\\boxed{\\frac{10!}{8!}}", "90"),
        ("\\boxed{\\binom{10}{3}}", "120"),
        ("\\boxed{3 \\cdot 10^{5}}", "300000"),
        ("\\boxed{5!}", "120"),
        ("\\boxed{3!+4!}", "30"),
        ("\\boxed{\\Gamma(5)}", "24"),
        ("\\boxed{e^{2}}", "e^2"),
        ("\\boxed{\\pi^{2}/6}", "\\frac{\\pi^2}{6}"),
    ],
)
def test_honest_math_with_powers_and_factorials_still_scores_one(answer: str, gold: str) -> None:
    pytest.importorskip("math_verify", reason="math-verify is installed by the rewards test group")
    assert score(f"<answer>{answer}</answer>", gold, "math").accuracy == 1.0


HIDDEN = 987654321012
FRAME_THIEF = """def solve(x):
    import gc, sys
    f = sys._getframe(1)
    while f is not None:  # the test's own frames: its loop variables and constants
        for v in list(f.f_locals.values()) + list(f.f_globals.values()):
            if isinstance(v, int) and v > 10 ** 11:
                return v
            if isinstance(v, (list, tuple)):
                for t in v:
                    if isinstance(t, tuple) and len(t) == 2 and t[0] == x:
                        return t[1]
        f = f.f_back
    for o in gc.get_objects():  # or anywhere in the interpreter
        if isinstance(o, (list, tuple)):
            for t in o:
                if isinstance(t, tuple) and len(t) == 2 and t[0] == x and isinstance(t[1], int) and t[1] > 10 ** 11:
                    return t[1]
    return -1
"""
STOLEN_FORMS = {
    "a loop over constant pairs": f"for x, y in [(1, {HIDDEN}), (2, {HIDDEN + 1})]:\n    assert solve(x) == y",
    "all() over a constant table": f"PAIRS = [(1, {HIDDEN}), (2, {HIDDEN + 1})]\nassert all(solve(x) == y for x, y in PAIRS)",
    "HumanEval check(candidate)": (
        f"def check(candidate):\n    for x, y in [(1, {HIDDEN}), (2, {HIDDEN + 1})]:\n        assert candidate(x) == y\n"
        "check(solve)"
    ),
}  # fmt: skip


def test_expected_values_of_a_test_never_enter_the_sandbox() -> None:
    """A program that searches its caller's frames (and the whole heap) for the expected value passed every one of
    these forms when the test's loop ran inside the sandbox; the test's constants are now evaluated in the parent and
    only the calls `solve(1)`, `solve(2)` are probed. The same forms still pass an honest program."""
    honest = f"def solve(x):\n    return {HIDDEN} + x - 1"
    batch = [
        RewardInput(response=f"<answer>{prog}</answer>", ground_truth=json.dumps([test]), problem_type="code",
                    sample_id=f"{who}: {name}")
        for name, test in STOLEN_FORMS.items()
        for who, prog in (("thief", FRAME_THIEF), ("honest", honest))
    ]  # fmt: skip
    got = {i.sample_id: r.accuracy for i, r in zip(batch, RewardRouter(workers=2).score_batch(batch), strict=True)}
    assert got == {i.sample_id: 0.0 if i.sample_id.startswith("thief") else 1.0 for i in batch}
