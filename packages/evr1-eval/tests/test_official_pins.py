"""The official protocols' per-sample rules, pinned case by case against the reference code's own outputs.

Every table below lists inputs and what the REFERENCE returns for them, produced by running the cited file at the
cited commit (lmms-eval tables: the real functions of `lmms-eval==0.7.3`, which `nox -s eval_lmms` also compares
directly on a few thousand responses). evr1-eval's re-implementations must reproduce each row — quirks included —
so this file runs in the default test session, where neither lmms-eval nor the official repositories are installed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import evr1_eval.api.extractors as extractors
from evr1_eval.api.extractors import (
    capped,
    extract_mcq_answer,
    first_letter_after_prefixes,
    mmmu_parse_multi_choice,
    strip_reasoning,
)
from evr1_eval.benchmarks import (
    charades_sta,
    longvideobench,
    minerva,
    motionbench,
    mvbench,
    tempcompass,
    videomathqa,
    videomme,
    videommmu,
    vsibench,
)
from evr1_eval.benchmarks.ovobench import rule as ovobench_rule
from evr1_eval.types import Sample

#: thanku-all/parse_answer `eval_your_results.py`@afd52cf `extract_characters_regex` (Video-MME's evaluation script):
#: prefixes deleted (two concatenated by missing commas; "Answer:" and "Option:" added at afd52cf), first A-D anywhere.
VIDEOMME = [
    ["B", "B"],
    ["The best answer is C", "C"],
    ["Answer: B", "B"],
    ["Option: D", "D"],
    ["Based on the video, the answer is C.", "B"],
    ["After watching the video it is B", "A"],
    ["The best option is D", "D"],
    ["Best answer: C", "B"],
    ["The correct option is B", "B"],
    ["The correct answer B", "B"],
    ["the answer is b", ""],
    ["the people in this clip are walking slowly towards the river bank at dusk today", ""],
    ["", ""],
    ["<think>A is wrong</think><answer>D</answer>", "A"],
    ["(C) because", "C"],
    ["答案是C", "C"],
    ["E", ""],
    ["I would say D.", "D"],
    ["Best option:B", "B"],
]


@pytest.mark.parametrize(("response", "expected"), VIDEOMME)
def test_videomme_official_regex(response: str, expected: str) -> None:
    assert (first_letter_after_prefixes(capped(response), videomme.PREFIXES, "ABCD") or "") == expected


#: lmms-eval 0.7.3 `tasks/_task_utils/mcq_extract.py::extract_mcq_answer` (LVBench, MLVU, Video-MMMU): every letter after
#: "the answer is" is a candidate and the latest wins; case-sensitive; restricted to the given letters.
MCQ = [
    ["The answer is B or C", "ABCD", "C"],
    ["the answer is B, not C.", "ABCD", "C"],
    ["Answer: B", "ABCD", "B"],
    ["answer: c", "ABCD", ""],
    ["I choose D", "ABCD", "D"],
    ["答案是C", "ABCD", "C"],
    ["选B", "ABCD", "B"],
    ["(B)", "ABCD", "B"],
    ["b", "ABCD", ""],
    ["F", "ABCDEF", "F"],
    ["F", "ABCD", ""],
    ["Option A or maybe B", "ABCD", "B"],
    ["B. because it fits", "ABCD", "B"],
    ["The answer is (D).", "ABCD", "D"],
    ["Between A and C I pick C", "ABCD", "C"],
    ["", "ABCD", ""],
    ["E", "ABCDE", "E"],
    ["A.B.C", "ABCD", "A"],
    ["<answer>C</answer>", "ABCD", "C"],
]


@pytest.mark.parametrize(("response", "letters", "expected"), MCQ)
def test_lmms_extract_mcq_answer(response: str, letters: str, expected: str) -> None:
    assert extract_mcq_answer(response, list(letters)) == expected


#: lmms-eval 0.7.3 `tasks/motionbench/utils.py::_extract_choice_letter`: three stages (standalone, marked, anywhere).
MOTIONBENCH = [
    ["答案是A", "A"],
    ["选项C", "C"],
    ["AB", "A"],
    ["a", "A"],
    ["<think>C</think>B", "B"],
    ["The answer is (E)", "E"],
    ["none of these", "E"],
    ["D)", "D"],
    ["ANSWER: F", "F"],
    ["x-ray", "A"],
]


@pytest.mark.parametrize(("response", "expected"), MOTIONBENCH)
def test_motionbench_three_stages(response: str, expected: str) -> None:
    assert motionbench.extract_choice_letter(response) == expected


#: lmms-eval 0.7.3 `tasks/video_holmes/utils.py::parse_multi_choice_response` (MMMU's parser), options A-F below; the
#: reference's `random.choice` fallback is shown as RANDOM. "答案是C" reads C: a letter followed by a space suffices.
HOLMES_OPTIONS = {
    "A": "the butler did it",
    "B": "the maid",
    "C": "nobody",
    "D": "a dog",
    "E": "the cat",
    "F": "a stranger",
}
HOLMES = [
    ["答案是C", "C"],
    ["(F)", "F"],
    ["It is B or maybe (A)", "A"],
    ["C.", "C"],
    ["I think the answer is E because", "E"],
    ["After all the clues I am sure the butler did it in the end", "A"],
    ["", "RANDOM"],
    ["A B", "B"],
    ["B.C.", "C"],
    ["答案是D。", "RANDOM"],
]


@pytest.mark.parametrize(("response", "expected"), HOLMES)
def test_video_holmes_mmmu_parser(response: str, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extractors, "random_choice", lambda sample_id, choices: "RANDOM")
    assert mmmu_parse_multi_choice(response, sorted(HOLMES_OPTIONS), HOLMES_OPTIONS, "x") == expected


#: lmms-eval 0.7.3 `tasks/videommmu/utils.py::parse_open_response` + `eval_open` (response, ground truth, correct;
#: None = "API Error", outside the denominator): numbers rounded to 2 decimals, ranges and "±" give every number.
VIDEOMMMU_OPEN = [
    ["3.43", "3.429", True],
    ["The value is 3.4-3.5", "3.5", False],
    ["3.43 ± 0.01", "0.01", True],
    ["about 1,200 m", "1200", True],
    ["3", "3.0", True],
    ["1.2e3", "1200", True],
    ["the answer is seven", "7", False],
    ["It equals 2.", "2.004", True],
    ["", "3", None],
]


@pytest.mark.parametrize(("response", "gold", "expected"), VIDEOMMMU_OPEN)
def test_videommmu_open_answers(response: str, gold: str, expected: bool | None) -> None:
    parsed = videommmu.parse_open_response(response)
    assert (None if parsed is None else videommmu.eval_open(gold, parsed)) == expected


#: lmms-eval 0.7.3 `tasks/charades_sta/utils.py::extract_time`: the FIRST span (ordered); JSON and "[s, e]" give none.
CHARADES = [
    ["Start time: 24.3\nEnd time: 30.4", [[24.3, 30.4]]],
    ["starts at 00:00:04 and ends at 00:00:12", [[4.0, 12.0]]],
    ["The event happens in the 30.4 - 24.3 seconds.", [[24.3, 30.4]]],
    ['{"time": [2, 9]}', []],
    ["[2.0, 9.0]", []],
    ["It happens at 1.0 - 2.0 and again at 3.0 - 4.0.", [[1.0, 2.0]]],
    ["from 10 to 0 seconds", [[0.0, 10.0]]],
    ["no idea", []],
    ["1:02 - 1:10", [[62.0, 70.0]]],
    ["between 3 and 8 seconds", []],
    ["The tomato is cut 5 - 7", [[5.0, 7.0]]],
]


@pytest.mark.parametrize(("response", "expected"), CHARADES)
def test_charades_extract_time(response: str, expected: list[list[float]]) -> None:
    assert charades_sta.extract_time(response) == expected


#: lmms-eval 0.7.3 `tasks/mvbench/utils.py::mcq_acc` (ground-truth letter, response, score): only 32 periods are
#: removed (`re.UNICODE` passed as the count), the article "a" reads as A.
MVBENCH = [
    ["A", "A. one", 1],
    ["B", "(B)", 1],
    ["A", "It is a dog", 1],
    ["C", "c", 1],
    ["B", "................................. x.b", 1],
    ["B", "............................... x.b", 0],
    ["D", "D.\nthe rest", 1],
    ["E", "e. the end", 1],
    ["B", "", 0],
]


@pytest.mark.parametrize(("gold", "response", "expected"), MVBENCH)
def test_mvbench_mcq_acc(gold: str, response: str, expected: int) -> None:
    assert int(mvbench.mcq_process(response) == mvbench.mcq_process(gold)) == expected


#: lmms-eval 0.7.3 `tasks/minerva/utils.py::_extract_choice_letter`: the last declaration, else the last capital letter.
MINERVA = [
    ["A is wrong, the answer is b", "B"],
    ["I pick A. No, C", "C"],
    ["Option: (E)", "E"],
    ["The answer is: D", "D"],
    ["Therefore, the final answer is: B", "B"],
    ["nothing", ""],
    ["answer:e", "E"],
    ["ABCDE", "E"],
]


@pytest.mark.parametrize(("response", "expected"), MINERVA)
def test_minerva_choice_letter(response: str, expected: str) -> None:
    assert minerva.extract_choice_letter(response) == expected


#: lmms-eval 0.7.3 `tasks/longvideobench/utils.py::parse_multi_choice_response` on a 4-option row: A-E are searched
#: whatever the row's options ("Everything" holds an E); no letter -> random (RANDOM here).
LONGVIDEOBENCH = [
    ["Answer: D", "A"],
    ["E", "E"],
    ["The answer is D", "D"],
    ["Everything considered: C", "E"],
    ["none", "RANDOM"],
    ["The best option is B", "B"],
]


@pytest.mark.parametrize(("response", "expected"), LONGVIDEOBENCH)
def test_longvideobench_fixed_letter_set(response: str, expected: str) -> None:
    found = first_letter_after_prefixes(response, longvideobench.PREFIXES, "ABCDE")
    assert (found or "RANDOM") == expected


#: lmms-eval 0.7.3 `tasks/videomathqa/utils.py::extract_characters_regex`: A-E also on the 2-option binary pairs.
VIDEOMATHQA = [
    ["E", "E"],
    ["C", "C"],
    ["The best option isThe correct option is B", "B"],
    ["Because A", "B"],
    ["no letters here at all in this long response from the model today", ""],
]


@pytest.mark.parametrize(("response", "expected"), VIDEOMATHQA)
def test_videomathqa_fixed_letter_set(response: str, expected: str) -> None:
    assert (first_letter_after_prefixes(response, videomathqa.PREFIXES, "ABCDE") or "") == expected


#: vision-x-nyu/thinking-in-space `lmms_eval/tasks/vsibench/utils.py`@51e089c (response, ground truth, MRA):
#: `to_float(fuzzy_matching(pred))`, `<=` over np.linspace(.5, .95, 10); 9 for 10 scores 0.9 (not 0.8).
VSIBENCH = [
    ["9", "10", 0.9],
    ["11", "10", 0.9],
    ["9.5", "10", 1.0],
    ["5", "10", 0.1],
    ["10.5", "10", 1.0],
    ["3 tables", "3", 1.0],
    ["three", "3", 0.0],
    ["4.", "3", 0.4],
    ["The answer is 3", "3", 0.0],
    ["3", "-3", 1.0],
    ["1e400", "3", 0.0],
    ["", "3", 0.0],
    ["2.0,", "2", 0.0],
]


@pytest.mark.parametrize(("response", "gold", "expected"), VSIBENCH)
def test_vsibench_mra(response: str, gold: str, expected: float) -> None:
    pred, target = vsibench.to_float(vsibench.fuzzy_matching(response)), vsibench.to_float(gold)
    value = 0.0 if pred is None or target is None else vsibench.mean_relative_accuracy(pred, target)
    assert value == pytest.approx(expected, abs=1e-12)


def test_vsibench_thresholds_are_numpy_linspace_bit_for_bit() -> None:
    reference = np.linspace(0.5, 0.95, int((0.95 - 0.5) / 0.05 + 2))
    assert len(vsibench.THRESHOLDS) == 10
    assert [float(x) for x in reference] == list(vsibench.THRESHOLDS)
    for start, stop in ((0.5, 0.95), (0.0, 1.0), (-3.3, 2.1), (0.1, 0.7)):
        for num in range(40):
            assert [float(x) for x in np.linspace(start, stop, num)] == list(vsibench.linspace(start, stop, num))
    assert 0.50 + 0.05 * 8 != vsibench.THRESHOLDS[8]  # the old evr1 thresholds rounded differently


def _ovo(problem_type: str, truth: str, task: str) -> Sample:
    return Sample(id="x", benchmark="ovobench", prompt="", ground_truth=truth, problem_type=problem_type,
                  groups={"task": task})  # fmt: skip


#: JoeLeelyf/OVO-Bench `utils/OVOBenchScore.py`@c34093f: backward / real-time (response, GT letter, score): substring.
OVO_BACKWARD = [
    ["The answer is B", "B", 1],
    ["D", "C", 0],
    ["Answer: C", "A", 1],
    ["c", "C", 0],
]
#: REC (response, count, correct): all digits concatenated.
OVO_REC = [
    ["1 and 2", 12, True],
    ["12", 12, True],
    ["3 or 4", 34, True],
    ["twelve", 12, False],
    ["12 times.", 12, True],
]
#: SSR / CRR (response, type (1 = Yes), score): exactly "Y" / "N" (not stripped), else case-sensitive "Yes" / "No".
OVO_YESNO = [
    ["N", 0, 1],
    ["N ", 0, 0],
    ["Y", 1, 1],
    ["No, not yet", 0, 1],
    ["I KNOW", 0, 0],
    ["Not sure", 0, 1],
    ["NO", 0, 0],
    ["Yes", 0, 0],
    ["yes", 1, 0],
    ["Yes.", 1, 1],
]


@pytest.mark.parametrize(("response", "gold", "expected"), OVO_BACKWARD)
def test_ovobench_backward_realtime(response: str, gold: str, expected: int) -> None:
    assert ovobench_rule(_ovo("multiple_choice", gold, "EPM"), response).score == expected


@pytest.mark.parametrize(("response", "count", "expected"), OVO_REC)
def test_ovobench_rec(response: str, count: int, expected: bool) -> None:
    assert ovobench_rule(_ovo("numerical", str(count), "REC"), response).score == float(expected)


@pytest.mark.parametrize(("response", "kind", "expected"), OVO_YESNO)
def test_ovobench_ssr_crr(response: str, kind: int, expected: int) -> None:
    assert ovobench_rule(_ovo("boolean", "yes" if kind else "no", "SSR"), response).score == expected


#: llyx97/TempCompass `eval_caption_matching.py`@e1b4631 `eval_rule` (prediction, question, answer, rating|"fail").
TEMPCOMPASS_CAPTION = [
    ["Option 2", "Which caption fits?\nOption 1: A man runs.\nOption 2: A man dunks.", "Option 2: A man dunks.", 1],
    ["2", "Which caption fits?\nOption 1: A man runs.\nOption 2: A man dunks.", "Option 2: A man dunks.", 1],
    ["A man dunks.", "Which caption fits?\nOption 1: A man runs.\nOption 2: A man dunks.", "Option 2: A man dunks.", 1],
    ["Option 1", "Which caption fits?\nOption 1: A man runs.\nOption 2: A man dunks.", "Option 2: A man dunks.", 0],
    [
        "Caption B",
        "Which sentence fits?\nCaption A: A man dunks.\nCaption B: A man sleeps.",
        "Caption A: A man dunks.",
        0,
    ],
    ["A", "Which sentence fits?\nCaption A: A man dunks.\nCaption B: A man sleeps.", "Caption A: A man dunks.", 1],
    ["A.", "Which sentence fits?\nCaption A: A man dunks.\nCaption B: A man sleeps.", "Caption A: A man dunks.", 1],
    [
        "(A) A man dunks.",
        "Which sentence fits?\nCaption A: A man dunks.\nCaption B: A man sleeps.",
        "Caption A: A man dunks.",
        1,
    ],
    [
        "I think Option 2",
        "Which caption fits?\nOption 1: A man runs.\nOption 2: A man dunks.",
        "Option 2: A man dunks.",
        "fail",
    ],
]
#: llyx97/TempCompass `eval_yes_no.py`@e1b4631 `extract_pred` (prediction, yes|no|False): `startswith`, lower-cased.
TEMPCOMPASS_YESNO = [
    ["Yes, it is", "yes"],
    ["yes.", "yes"],
    ["The answer is yes", False],
    ["No", "no"],
    ["nope", "no"],
    ["Not sure", "no"],
    ["YES", "yes"],
    [" yes", False],
    ["n", False],
]


@pytest.mark.parametrize(("pred", "question", "answer", "expected"), TEMPCOMPASS_CAPTION)
def test_tempcompass_caption_matching(pred: str, question: str, answer: str, expected: int | str) -> None:
    rating = tempcompass.caption_matching_rating(pred, question, answer)
    assert ("fail" if rating is None else rating) == expected


@pytest.mark.parametrize(("pred", "expected"), TEMPCOMPASS_YESNO)
def test_tempcompass_yes_no(pred: str, expected: str | bool) -> None:
    for answer in ("yes", "no"):
        rating = tempcompass.yes_no_rating(pred, answer)
        assert rating == (None if expected is False else int(expected == answer))


#: lmms-eval 0.7.3 `api/reasoning.py::strip_reasoning_tags` with the CLI's default tags (<think>, <analysis>).
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>A</think> B ", "B"),
        ("<think>A</think>B<think>C</think>D", "BD"),
        ("reasoning</think>C", "C"),
        ("<think>unclosed B", "<think>unclosed B"),
        ("<THINK>A</THINK>B", "<THINK>A</THINK>B"),
        ("<analysis>x</analysis>\nE", "E"),
        ("</think>A<think>B</think>C", "AC"),
    ],
)
def test_lmms_reasoning_strip(text: str, expected: str) -> None:
    assert strip_reasoning(text) == expected


def test_extractors_stay_linear_on_adversarial_input() -> None:
    """Scanning cost is bounded: a response over MAX_SCAN is cut (by default to its tail) before any regex runs."""
    huge = "A" * 1_000_000
    assert len(capped(huge)) == extractors.MAX_SCAN
    nasty: Sequence[str] = ["<think>" * 20_000, "</think>" * 20_000, "(" * 100_000, "answer is " * 10_000]
    for text in nasty:
        strip_reasoning(capped(text))
        extract_mcq_answer(capped(text), list("ABCD"))
        charades_sta.extract_time(capped(text))
