"""Shared answer extraction: order, think handling, statements, boxed, format structure."""

from __future__ import annotations

import pytest

from evr1_rewards import extract, extract_answer
from evr1_rewards.extract import MAX_RESPONSE_CHARS, Response, clean_payload, last_boxed, structure_ok

EXTRACT_CASES = [
    ("<think>x</think><answer> B </answer>", "B", "answer_tag"),  # plain tagged answer, stripped
    (
        "<answer>A</answer> then <answer>C</answer>",
        "C",
        "answer_tag",
    ),  # the LAST complete tag wins (unified_rl took the first)
    ("<answer>A</answer><answer>C", "A", "answer_tag"),  # an unclosed trailing tag is not complete
    ("<ANSWER>D</ANSWER>", "D", "answer_tag"),  # tags are case-insensitive
    ("<answer>  </answer> so \\boxed{7}", "7", "boxed"),  # an empty tag counts as absent
    ("first \\boxed{1} then \\boxed{\\frac{1}{2}}", "\\frac{1}{2}", "boxed"),  # last balanced boxed, nested braces
    ("\\boxed{2} and \\boxed{3", "2", "boxed"),  # an unbalanced boxed is skipped, the previous one used
    ("Reasoning...\nThe final answer is 42.", "42", "statement"),  # statement, trailing period stripped
    ("So the answer is: (C)", "(C)", "statement"),  # colon after 'is'
    ("**Final Answer:** B", "B", "statement"),  # markdown bold around the declaration
    (
        "I need to answer this question carefully.\nIt is 5",
        "I need to answer this question carefully.\nIt is 5",
        "text",
    ),  # 'to answer this' is no statement
    ("The answer is:\nB", "B", "statement"),  # payload on the next line
    ("我们看到视频。答案是B", "B", "statement"),  # Chinese declaration
    ("<think>the answer is A</think>The answer is B", "B", "statement"),  # think never mined when a later answer exists
    ("<think>the answer is A</think>B", "B", "after_think"),  # the text after </think>
    ("just text", "just text", "text"),  # whole text fallback
    ("", "", "text"),  # empty response
]


@pytest.mark.parametrize(("response", "expected", "source"), EXTRACT_CASES)
def test_extraction_order(response: str, expected: str, source: str) -> None:
    got = extract(response)
    assert (got.text, got.source) == (expected, source)


def test_think_only_boxed_is_used_when_nothing_follows() -> None:
    # When nothing follows </think> the region is the whole text, so a boxed answer inside think is still found.
    first = Response("<think>\\boxed{A}</think>").candidates()[0]
    assert (first.text, first.source) == ("A", "boxed")


def test_extract_answer_returns_text() -> None:
    assert extract_answer("<answer>x</answer>") == "x"
    assert extract_answer(None) == ""  # type: ignore[arg-type]
    assert extract_answer(b"<answer>y</answer>") == "y"  # bytes are decoded


def test_last_boxed_bounds() -> None:
    assert last_boxed("\\boxed{" * 10_000) is None  # unbalanced flood: bounded tries, no answer
    assert last_boxed("\\boxed{a{b}c}") == "a{b}c"


@pytest.mark.parametrize(
    ("payload", "clean"),
    [
        ("$\\boxed{B}$", "B"),  # math mode + boxed
        ("**B**", "B"),  # markdown bold
        ('"yes"', "yes"),  # quotes
        ("\\text{red}", "red"),  # \text{}
        ("\\boxed{1} + \\boxed{2}", "\\boxed{1} + \\boxed{2}"),  # not a single boxed: untouched
    ],
)
def test_clean_payload(payload: str, clean: str) -> None:
    assert clean_payload(payload) == clean


STRUCTURE_CASES = [
    ("<think>r</think><answer>B</answer>", "optional", True),  # canonical
    ("<answer>B</answer>", "optional", True),  # think optional
    ("<answer>B</answer>", "required", False),  # think required but absent
    ("<think>r</think>\n<answer>B</answer>\n", "required", True),  # whitespace allowed around
    ("<think>r</think><answer>B</answer>", "forbidden", False),  # think forbidden
    ("<answer>B</answer><answer>C</answer>", "optional", False),  # two answers
    ("<answer>B</answer> trailing words", "optional", False),  # text after the answer
    ("<answer></answer>", "optional", False),  # empty answer
    ("<answer>B</think></answer>", "optional", False),  # stray close tag inside
    ("<think>a<think>b</think></think><answer>B</answer>", "optional", False),  # nested think
    ("<answer>B</answer><think>late</think>", "optional", False),  # think after the answer
    ("preamble <think>r</think><answer>B</answer>", "required", False),  # required think must open the response
    ("B", "optional", False),  # no tags at all
]


@pytest.mark.parametrize(("response", "think", "ok"), STRUCTURE_CASES)
def test_structure(response: str, think: str, ok: bool) -> None:
    assert structure_ok(Response(response), think) is ok  # type: ignore[arg-type]


def test_truncation_keeps_tail_and_fails_format() -> None:
    r = Response("x" * (MAX_RESPONSE_CHARS + 10) + "<answer>B</answer>")
    assert r.truncated
    assert r.answer_tag == "B"
    assert not structure_ok(r)
