"""The official extractors' tricky cases, run through each benchmark's whole scoring path (`Benchmark.score` on a
loaded row), not only the helper functions `test_official_pins.py` pins: a pipeline step in between (reasoning-tag
stripping, a length cap, an `<answer>` reading, a random fallback) would show here.

Each table names the official rule it mirrors; the expected letter is what that rule returns for the response, read
off the rule itself (the official files were read at the commits named in `evr1_eval.api.references`; lmms-eval's
task files are also unchanged on its main branch for these five functions):

- Video-MME: thanku-all/parse_answer `eval_your_results.py::extract_characters_regex` (@afd52cf), on the raw response.
- MVBench: lmms-eval `tasks/mvbench/utils.py::mcq_acc` (its inner `process`), after lmms-eval's reasoning-tag strip.
- LongVideoBench: lmms-eval `tasks/longvideobench/utils.py::parse_multi_choice_response`, after the strip.
- MINERVA: lmms-eval `tasks/minerva/utils.py::_extract_choice_letter`, after the strip.
- VideoMathQA: lmms-eval `tasks/videomathqa/utils.py::extract_characters_regex` (the old Video-MME prefix list), after
  the strip.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pytest

from evr1_eval.api.extractors import MAX_SCAN, STRIP_SCAN
from evr1_eval.api.scoring_rules import lmms_input
from evr1_eval.benchmarks import get_benchmark
from evr1_eval.types import Reading, Sample, ScoredSample

OPTS4 = ["A. one", "B. two", "C. three", "D. four"]
OPTS5 = [*OPTS4, "E. five"]
#: A response longer than MAX_SCAN (cut: the end the rule reads is kept) whose first letter (C) and last letter (D)
#: differ; and one over the old 100,000-character limit, read whole (a thinking model's 32K-token answer).
LONG = "C. " + "z " * (MAX_SCAN // 2 + 10) + "D"
THINKING = "C. " + "z " * (STRIP_SCAN // 2 + 10) + "D"
RANDOM = "<random>"


def _sample(tmp_path: Path, bench_name: str, truth: str, options: Sequence[str], **extra: Any) -> Sample:
    row: dict[str, Any] = {
        **extra,
        "problem_id": "1",
        "problem": "What happens?",
        "options": list(options),
        "solution": f"<answer>{truth}</answer>",
        "problem_type": "multiple choice",
        "path": "1.mp4",
        "data_type": "video",
    }
    path = tmp_path / f"{bench_name}.json"
    path.write_text(json.dumps([row]))
    loaded = get_benchmark(bench_name).load(path, None)
    assert loaded.errors == []
    return loaded.samples[0]


def _score(tmp_path: Path, bench_name: str, response: str, options: Sequence[str] = OPTS4) -> ScoredSample:
    row = get_benchmark(bench_name).score(_sample(tmp_path, bench_name, "B", options), response)
    assert row.error is None
    return row


#: extract_characters_regex: strip, delete the prefixes (case-sensitive, in list order), the FIRST of A-D anywhere in
#: the raw response (no reasoning strip), "" when none (the question is then unanswered).
VIDEOMME = [
    ("The answer is (B)", "B"),  # prefix deleted, then "(B)"
    ("Answer: The answer is C", "C"),  # "The answer is" goes first, then "Answer:"
    ("Both are wrong; the answer is D", "B"),  # lower-case "the answer is" is no prefix: the B of "Both"
    ("[C]", "C"),
    ("D)", "D"),
    ("b", ""),  # lower case is never read
    ("E", ""),  # E is not in A-D
    ("<think>A is wrong</think>The answer is D", "A"),  # the raw response: the letter inside the reasoning
    ("<answer>C</answer>", "C"),
    ("", ""),
    (LONG, "C"),  # the whole response is read: its first letter, however long it is
    (THINKING, "C"),
]


@pytest.mark.parametrize(("response", "expected"), VIDEOMME)
def test_videomme_scoring_path(tmp_path: Path, response: str, expected: str) -> None:
    row = _score(tmp_path, "videomme", response)
    assert row.extracted == expected
    assert row.details["answered"] is bool(expected)


#: mcq_acc's process: "X. text" -> X; otherwise punctuation removed or spaced, lower-cased, the first standalone a-e.
MVBENCH = [
    ("The answer is (B)", "B"),
    ("A dog runs. C", "A"),  # the article "a" is a standalone letter
    ("[B]", "B"),
    ("B.", "B"),  # no text after the period: the period is stripped, then "b"
    ("E", "E"),  # a-e whatever the row's options
    ("<think>C</think>D. four", "D"),  # lmms-eval strips the reasoning block first
    ("", ""),
    (LONG, "C"),  # the first letter of the whole response, however long
    (THINKING, "C"),
]


@pytest.mark.parametrize(("response", "expected"), MVBENCH)
def test_mvbench_scoring_path(tmp_path: Path, response: str, expected: str) -> None:
    row = _score(tmp_path, "mvbench", response)
    assert row.extracted == expected
    assert row.details["answered"] is bool(response)


#: parse_multi_choice_response: prefixes deleted, the FIRST of A-E anywhere (also on 4-option rows), else random.
LONGVIDEOBENCH = [
    ("The answer is (B)", "B"),
    ("Answer: D", "A"),  # "Answer:" is no prefix here: the A of "Answer"
    ("Everything suggests B", "E"),  # the E of "Everything", on a 4-option row
    ("The best option is C", "C"),
    ("<analysis>A first</analysis>\nD", "D"),  # stripped before parsing
    ("c", RANDOM),
    ("", RANDOM),
    (LONG, "C"),
    (THINKING, "C"),
]


@pytest.mark.parametrize(("response", "expected"), LONGVIDEOBENCH)
def test_longvideobench_scoring_path(tmp_path: Path, response: str, expected: str) -> None:
    row = _score(tmp_path, "longvideobench", response)
    assert row.details["random_fallback"] is (expected == RANDOM)
    if expected == RANDOM:
        assert row.extracted in "ABCD"  # a letter of the row's own options
    else:
        assert row.extracted == expected


#: _extract_choice_letter: the LAST "answer|option (is|:) X" (any case), else prefixes deleted and the LAST A-E, else
#: a random letter of A-E.
MINERVA = [
    ("The answer is (B)", "B"),  # "(" breaks the declaration; the last capital after the prefix is deleted
    ("answer is c", "C"),  # declarations are case-insensitive and upper-cased
    ("Option: A, but the answer is D", "D"),  # the last declaration
    ("The Best Answer Is E", "E"),
    ("B or maybe C", "C"),  # the last capital letter
    ("<think>the answer is A</think>B", "B"),  # stripped before parsing
    ("", RANDOM),
    (LONG, "D"),  # the LAST capital letter: the tail of a long response
    (THINKING, "D"),
]


@pytest.mark.parametrize(("response", "expected"), MINERVA)
def test_minerva_scoring_path(tmp_path: Path, response: str, expected: str) -> None:
    row = _score(tmp_path, "minerva", response, OPTS5)
    assert row.details["random_fallback"] is (expected == RANDOM)
    if expected == RANDOM:
        assert row.extracted in "ABCDE"
    else:
        assert row.extracted == expected


#: extract_characters_regex as VideoMathQA's task file has it: the old prefix list (two pairs concatenated by missing
#: commas, no "Answer:"), the FIRST of A-E anywhere, "" when none.
VIDEOMATHQA = [
    ("The answer is (B)", "B"),
    ("Best answer: C", "B"),  # "Best answer:" alone is no prefix: the B of "Best"
    ("Answer: D", "A"),
    ("<think>D</think>C", "C"),  # stripped before parsing
    ("E", "E"),
    ("c", ""),
    (LONG, "C"),
    (THINKING, "C"),
]


@pytest.mark.parametrize(("response", "expected"), VIDEOMATHQA)
def test_videomathqa_scoring_path(tmp_path: Path, response: str, expected: str) -> None:
    row = _score(tmp_path, "videomathqa", response, OPTS5)
    assert row.extracted == expected


def test_vsibench_first_token_of_a_long_response(tmp_path: Path) -> None:
    """thinking-in-space `lmms_eval/tasks/vsibench/utils.py::fuzzy_matching`: the first space-separated token of the
    raw response ("C." -> "C"), however long the response."""
    bench = get_benchmark("vsibench")
    sample = _sample(tmp_path, "vsibench", "C", OPTS4, question_type="route_planning")
    row = bench.score(sample, LONG)
    assert (row.extracted, row.score) == ("C", 1.0)


def test_lmms_input_keeps_the_end_a_rule_reads() -> None:
    """Whole up to MAX_SCAN; beyond it, without reasoning tags the head for first-match rules (stripping is then only
    `.strip()`); with an end tag the tail, where the answer after the reasoning is, whichever end the rule reads."""
    assert lmms_input(THINKING, keep="head") == lmms_input(THINKING) == THINKING
    assert lmms_input(LONG, keep="head").startswith("C. z")
    assert lmms_input(LONG).endswith("z D")
    thought = "<think>" + "A " * MAX_SCAN + "</think>B"
    assert lmms_input(thought, keep="head") == lmms_input(thought) == "B"
    assert lmms_input("  <think>A</think> C ", keep="head") == "C"


def test_tag_soup_is_cut_before_stripping() -> None:
    """Over STRIP_SCAN with many tags, the tail alone is stripped (stripping is quadratic in the number of blocks), so
    what precedes the tail is gone: the documented approximation for tag soup; a few tags keep the whole response."""
    assert lmms_input("A " + "<think>x</think>" * (STRIP_SCAN // 8) + "B") == "B"
    assert lmms_input("A " + "<think>x</think>" * 8 + "z" * STRIP_SCAN + " B").startswith("A z")


#: A reasoning block longer than MAX_SCAN naming C, then the answer B after it.
LONG_THOUGHT = "<think>" + "C " * (MAX_SCAN // 2 + 10) + "</think>B"


@pytest.mark.parametrize("reasoning", ["official", "strip", "keep"])
@pytest.mark.parametrize(
    ("bench_name", "long_letter", "raw_thought"),
    [("mvbench", "C", "C"), ("longvideobench", "C", "C"), ("videomathqa", "C", "C"), ("videomme", "C", "C"),
     ("minerva", "D", "B"),  # the last capital letter
     ("lvbench", "D", "C")],  # the cut tail starts with a standalone C: extract_mcq_answer's top priority
)  # fmt: skip
def test_long_responses_keep_the_end_their_rule_reads_under_every_reasoning_reading(
    tmp_path: Path, bench_name: str, long_letter: str, raw_thought: str, reasoning: Literal["official", "strip", "keep"]
) -> None:
    """Over MAX_SCAN, first-match rules read the head and last-match rules the tail whether or not reasoning blocks
    are stripped; with a block, stripping cuts to the tail (the answer follows the end tag) and reads B; a raw reading
    reads the rule's own end of the cut response."""
    bench = get_benchmark(bench_name)
    sample = _sample(tmp_path, bench_name, "B", OPTS5)
    reading = Reading(reasoning_tags=reasoning)
    assert bench.score(sample, LONG, reading=reading).extracted == long_letter
    strips = bench.strips_reasoning(reading)
    assert strips == (reasoning == "strip" or (reasoning == "official" and bench_name != "videomme"))
    assert bench.score(sample, LONG_THOUGHT, reading=reading).extracted == ("B" if strips else raw_thought)
