"""Shared answer extraction: order, think handling, statements, boxed, format structure."""

from __future__ import annotations

import pytest

from evr1_rewards import extract, extract_answer
from evr1_rewards import score as _score
from evr1_rewards.end_of_turn import (
    END_OF_TURN_TOKENS,
    add_end_of_turn_tokens,
    end_of_turn_tokens,
    strip_end_of_turn,
)
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


# -- end-of-turn tokens ---------------------------------------------------------------------------------------------

FAMILY_TOKENS = {
    "Qwen": "<|im_end|>",
    "Llama 3": "<|eot_id|>",
    "Gemma": "<end_of_turn>",
    "Gemma eos": "<eos>",
    "DeepSeek": "<｜end▁of▁sentence｜>",
    "Mistral": "</s>",
    "Phi-3": "<|end|>",
    "GLM-4": "<|user|>",
    "InternLM": "<|im_end|>",
}


@pytest.mark.parametrize("family", sorted(FAMILY_TOKENS))
def test_end_of_turn_tokens_cost_nothing(family: str) -> None:
    token = FAMILY_TOKENS[family]
    assert token in END_OF_TURN_TOKENS
    for tail in (token, "\n" + token, token + "<|endoftext|>", token + "\n"):
        res = _score(f"<think>blue</think><answer>B</answer>{tail}", "B", "multiple choice")
        assert (res.overall, res.format) == (1.0, 1.0), (family, tail)
    assert _score(f"<answer>42</answer>{token}", "42", "numerical").overall == 1.0


def test_only_a_trailing_run_is_stripped() -> None:
    assert strip_end_of_turn("a</s>b") == "a</s>b"
    assert strip_end_of_turn("answer <|im_end|> \n<|endoftext|>\n") == "answer"
    assert strip_end_of_turn("plain text ") == "plain text "  # unchanged when there is no token
    # a token inside the answer still breaks the format
    assert _score("<answer>B</answer><|im_end|> more text", "B", "mcq").format == 0.0


def test_more_tokens_by_registration_router_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from evr1_rewards import RewardInput, RewardRouter
    from evr1_rewards import end_of_turn as eot

    inp = RewardInput(response="<answer>B</answer><|family_eot|>", ground_truth="B", problem_type="mcq")
    assert RewardRouter().score(inp).format == 0.0
    assert RewardRouter(end_of_turn_tokens=["<|family_eot|>"]).score(inp).format == 1.0
    monkeypatch.setattr(eot, "_EXTRA", [])
    monkeypatch.setattr(eot, "_CACHE", {})
    add_end_of_turn_tokens("<|family_eot|>")
    assert "<|family_eot|>" in end_of_turn_tokens()
    assert RewardRouter().score(inp).format == 1.0
    with pytest.raises(ValueError, match="non-empty"):
        add_end_of_turn_tokens("  ")
    monkeypatch.setattr(eot, "_CACHE", {})
    monkeypatch.setenv("EVR1_END_OF_TURN_TOKENS", "<|env_a|> <|env_b|>")
    assert {"<|env_a|>", "<|env_b|>"} <= set(end_of_turn_tokens())
    tokens = end_of_turn_tokens()
    assert list(tokens) == sorted(tokens, key=len, reverse=True)  # longest first


# -- stated answers beat letters mentioned afterwards ----------------------------------------------------------------
STATED = [
    ("The answer is B because option C is wrong.", "B"),
    ("C\n\nExplanation: the bus is red, so option D does not match.", "C"),
    ("Answer: B (option C is a distractor)", "B"),
    ("**Answer:** (B) — option A describes the car", "B"),
    ("The final answer is D, since options A and B contradict the clip.", "D"),
    ("I choose B. Option C is wrong and option D is irrelevant.", "B"),
    ("<think>A? no, C.</think><answer>B because C is wrong</answer>", "B"),
    ("The answer is A because the others fail.", "A"),
]


@pytest.mark.parametrize(("response", "letter"), STATED)
def test_stated_answer_beats_later_mentions(response: str, letter: str) -> None:
    res = _score(response, letter, "multiple choice", options=["A. red", "B. blue", "C. green", "D. white"])
    assert res.accuracy == 1.0, res.details


def test_articles_are_still_not_letters() -> None:
    assert _score("The answer is a dog.", "A", "mcq").accuracy == 0.0
    assert _score("<answer>A dog runs</answer>", "A", "mcq").accuracy == 0.0
