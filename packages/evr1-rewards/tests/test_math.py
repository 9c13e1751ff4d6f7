"""Math rewards through math-verify (the `math` extra), its timeout, and the letter / number fast paths."""

from __future__ import annotations

import time

import pytest

from evr1_rewards import score

pytest.importorskip("math_verify", reason="math scorer needs the 'math' extra (installed by the rewards test group)")

CASES = [
    ("<answer>\\frac{1}{2}</answer>", "0.5", 1.0),  # LaTeX fraction vs decimal
    ("<answer>$x = 2$</answer>", "2", 1.0),  # equation RHS
    ("The final answer is \\boxed{\\{1, 2\\}}", "\\{2, 1\\}", 1.0),  # sets are unordered
    ("<answer>\\sqrt{4}</answer>", "2", 1.0),  # evaluates
    ("<answer>3</answer>", "\\frac{7}{2}", 0.0),  # wrong
    ("<answer>C</answer>", "C", 1.0),  # option letters go to multiple choice (math-verify parses letters to [])
    ("<answer>The answer is C</answer>", "C", 1.0),  # … with the MC extractor
    ("<answer>1,000</answer>", "1000", 1.0),  # plain numbers: fast path
    ("<answer>not math at all</answer>", "\\pi", 0.0),  # unparseable answer
]


@pytest.mark.parametrize(("response", "gt", "expected"), CASES)
def test_math(response: str, gt: str, expected: float) -> None:
    assert score(response, gt, "mathematics").accuracy == expected


def test_timeout_kills_the_worker_and_scores_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    from evr1_rewards.scorers import math as m

    hang = (
        "import sys, time\nsys.stdout.write('ready\\n'); sys.stdout.flush()\nfor line in sys.stdin: time.sleep(3600)\n"
    )
    monkeypatch.setattr(m, "_WORKER", hang)
    monkeypatch.setattr(m, "_POOL", m._Pool())
    monkeypatch.setattr(m, "_RESULTS", {})  # no verdict cached by an earlier test
    start = time.monotonic()
    res = score("<answer>x^2</answer>", "x^{2}", "math", extras={"math_timeout": 0.5})
    assert res.accuracy == 0.0
    assert time.monotonic() - start < 10
    assert m._RESULTS == {}  # a timeout is not remembered as a verdict


FORMS = ("\\frac{{{n}}}{{{d}}}", "\\dfrac{{{n}}}{{{d}}}", "{n}/{d}", "${n}/{d}$", "\\({n}/{d}\\)")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("n", "d"), [(3, 4), (1, 2), (6, 8), (10, 4), (-3, 4), (7, 3), (0, 5), (12, 1)])
@pytest.mark.parametrize("gold", ["0.75", "\\frac{3}{4}", "2.5", "-0.75", "7/3", "0", "12", "0.5"])
def test_exact_fast_path_agrees_with_math_verify(form: str, n: int, d: int, gold: str) -> None:
    # Plain numbers and numeric fractions are decided in-process (no worker round trip): the verdict must be the
    # one math-verify gives for the same pair.
    from math_verify import parse, verify

    from evr1_rewards.scorers.math import exact_number

    answer = form.format(n=abs(n), d=d)
    answer = ("-" + answer) if n < 0 and not answer.startswith(("$", "\\(")) else answer
    if n < 0 and answer.startswith(("$", "\\(")):
        answer = answer[0] + "-" + answer[1:] if answer[0] == "$" else "\\(-" + answer[2:]
    assert exact_number(answer) is not None, answer
    res = score(f"<answer>{answer}</answer>", gold, "math")
    assert res.details.get("verifier") in ("exact", "text"), res.details  # "text": written exactly as the gold
    reference = bool(
        verify(parse("$" + gold + "$"), parse(answer if "$" in answer or "\\(" in answer else f"${answer}$"))
    )
    assert res.accuracy == (1.0 if reference else 0.0), (answer, gold)
