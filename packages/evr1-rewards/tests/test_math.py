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
    start = time.monotonic()
    res = score("<answer>x^2</answer>", "x^{2}", "math", extras={"math_timeout": 0.5})
    assert res.accuracy == 0.0
    assert time.monotonic() - start < 10
