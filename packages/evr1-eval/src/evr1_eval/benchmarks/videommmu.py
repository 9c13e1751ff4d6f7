"""Video-MMMU (arXiv 2501.13826): 900 questions (Perception / Comprehension / Adaptation x 300), MC with up to 10
options plus open numerical answers; accuracy per track, and Δknowledge on Adaptation.

Official protocol (reference: lmms-eval 0.7.3 `tasks/videommmu/utils.py` + `_default_template_yaml`): prompts per
track — Perception / Comprehension: "<question>\\n<A. …>\\nPlease ignore the Quiz question in last frame of the
video."; Adaptation (the rows with a question image): "You should watch and learn the video content. Then apply what
you learned to answer the following multi-choice question. The image for this question is at the end of the
video.\\n<question>\\n<A. …>" (open-ended: "… answer the following open-ended question. …"). MC: the shared
`extract_mcq_answer` over the row's letters on the response after reasoning-tag stripping, else "No Answer Found."
(wrong). Open answers: `parse_open_response` (the tail after an indicator phrase of each sentence, plus every number
in it; numbers rounded to 2 decimals, so "3.43" matches a ground truth of 3.429; a range "3.4-3.5" or "3.43 ± 0.01"
yields each number) and `eval_open` (correct if any extracted number equals the rounded ground truth, or the
normalised ground-truth text occurs in an extracted string). An empty open answer is an "API Error" and leaves the
denominator. Accuracy = the instance-level mean, rounded to 5 decimals (of a fraction); per subject (`id`
`<split>_<Subject>_<n>`, from the video's file name in EasyVideoR1's files) and per track. Δknowledge needs a second
run without the lecture video (`run --without-video`); `report` over both runs computes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from evr1_eval.api.aggregation import Result, micro, rounded_pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import capped, extract_mcq_answer
from evr1_eval.api.loading import LETTERS, RowView
from evr1_eval.api.references import lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import doc_of
from evr1_eval.types import Outcome, Sample, ScoredSample

_PRE = "You should watch and learn the video content. Then apply what you learned to "
_MCQ = "answer the following multi-choice question. The image for this question is at the end of the video.\n"
_OPEN = "answer the following open-ended question. The image for this question is at the end of the video.\n"
_PERCEPTION = "\nPlease ignore the Quiz question in last frame of the video."
_ID = re.compile(r"^[^_]+_(.+?)_\d+$")
_INDICATORS = (
    "could be ", "so ", "is ", "thus ", "therefore ", "final ", "answer ", "result ", "are ", "in total ", "total ",
    "identify ", "recognize ", "calculated as ", "counted as ", "measured as ", "observed as ", "concluded as ",
    "found to be ", "equals ", "determined to be ", "number of ", "value is ", "adds up to ", "have ", "has ",
)  # fmt: skip
_TRIVIAL = (":", ",", ".", "!", "?", ";", "'")
_SUBRESPONSES = re.compile(r"\.\s(?=[A-Z])|\n")
_NUM_COMMAS = re.compile(r"-?\b\d{1,3}(?:,\d{3})+\b")
_NUM_SCIENTIFIC = re.compile(r"-?\d+(?:\.\d+)?[eE][+-]?\d+")
_NUM_SIMPLE = re.compile(r"-?(?:\d+\.\d+|\.\d+|\d+\b)(?![eE][+-]?\d+)(?![,\d])")


def _track(view: RowView) -> str:
    return view.groups.get("track") or ("Adaptation" if view.images else "Perception")


def official_doc(view: RowView) -> dict[str, Any]:
    stem = PurePosixPath(view.videos[0]).stem if view.videos else view.sample_id
    mc = view.problem_type == "multiple_choice"
    return {
        "id": stem.removesuffix("_image"),
        "question": view.question,
        "options": [t for _, t in view.options],
        "answer": view.truth,
        "question_type": "multiple-choice" if mc else "open",
        "track": _track(view),
    }


def parse_options(options: Sequence[str]) -> str:
    letters = [chr(ord("A") + i) for i in range(len(options))]
    if all(option.startswith(f"{letter}.") for option, letter in zip(options, letters, strict=True)):
        return "\n".join(options)
    return "\n".join(f"{letter}. {option}" for letter, option in zip(letters, options, strict=True))


def official_prompt(doc: Mapping[str, Any]) -> str:
    question = str(doc["question"])
    if doc["track"] != "Adaptation":
        return f"{question}\n{parse_options(doc['options'])}{_PERCEPTION}"
    if doc["question_type"] == "multiple-choice":
        return f"{_PRE}{_MCQ}{question}\n{parse_options(doc['options'])}"
    return f"{_PRE}{_OPEN}{question}"


def extract_numbers(text: str) -> list[str]:
    return _NUM_COMMAS.findall(text) + _NUM_SCIENTIFIC.findall(text) + _NUM_SIMPLE.findall(text)


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def normalize_str(text: str) -> list[str | float]:
    text = text.strip()
    if _is_number(text):
        return [round(float(text.replace(",", "")), 2)]
    text = text.lower()
    return [" " + text, text + " "] if len(text) == 1 else [text]


def _key_subresponses(response: str) -> list[str]:
    text = response.strip().strip(".").lower()
    subs = _SUBRESPONSES.split(text)
    keys: list[str] = []
    for index, sub in enumerate(subs):
        indicators = [*_INDICATORS, "="] if index == len(subs) - 1 else list(_INDICATORS)
        shortest: str | None = None
        for indicator in indicators:
            if indicator in sub:
                tail = sub.split(indicator)[-1].strip()
                if not shortest or len(tail) < len(shortest):
                    shortest = tail
        if shortest and shortest.strip() not in _TRIVIAL:
            keys.append(shortest)
    return keys or [text]


def parse_open_response(response: str) -> list[str | float] | None:
    """Every normalised candidate of an open answer; None for the reference's "API Error" (an empty answer)."""
    if response in ("API Error", ""):
        return None
    keys = _key_subresponses(response)
    preds: list[str] = [*keys, *(n for k in keys for n in extract_numbers(k))]
    out: list[str | float] = []
    for p in preds:
        out.extend(normalize_str(p))
    return list(dict.fromkeys(out))  # the reference's set(): order is irrelevant, only membership is read


def eval_open(gold: str, preds: Sequence[str | float]) -> bool:
    answers = normalize_str(gold)
    for pred in preds:
        if isinstance(pred, str):
            if any(isinstance(a, str) and a in pred for a in answers):
                return True
        elif pred in answers:
            return True
    return False


def rule(sample: Sample, response: str) -> Outcome:
    doc = doc_of(sample)
    text = capped(response)
    if doc["question_type"] == "multiple-choice":
        choices = [LETTERS[i] for i in range(len(doc["options"]))]
        pred = extract_mcq_answer(text, choices) or "No Answer Found."
        return Outcome(score=float(pred == doc["answer"]), extracted=pred, details={"scorer": "videommmu-mcq"})
    parsed = parse_open_response(text)
    if parsed is None:
        return Outcome(score=0.0, extracted=None, details={"scorer": "videommmu-open", "api_error": True})
    shown = ", ".join(str(p) for p in parsed[:10])
    return Outcome(
        score=float(eval_open(doc["answer"], parsed)), extracted=shown[:200], details={"scorer": "videommmu-open"}
    )


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    valid = [r for r in rows if not r.details.get("api_error")]
    _, metrics, _ = micro(bench, valid, rounded_pct)
    dropped = len(rows) - len(valid)
    notes = [f"{dropped} empty open answers are 'API Error' rows, outside the denominator"] if dropped else []
    return "accuracy", metrics, notes


def _subject(row: Mapping[str, Any]) -> str | None:
    video = row.get("path") or row.get("video") or row.get("id")
    m = _ID.match(PurePosixPath(str(video)).stem) if isinstance(video, str) else None
    return m.group(1) if m else None


def _adaptation(row: Mapping[str, Any]) -> str | None:
    """EasyVideoR1's file has no track field; its 300 rows with an image are the Adaptation track."""
    return "Adaptation" if row.get("image_path") else None


BENCHMARK = register(
    Benchmark(
        name="videommmu",
        title="Video-MMMU",
        problem_types=("multiple_choice", "numerical"),
        group_fields={"track": ("track", "question_type", "category")},
        derived_groups={"track": _adaptation, "subject": _subject},
        reference=lmms_eval("videommmu"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=rule,
        reasoning_blocks="strip",
        aggregator=aggregate,
        notes=("Δknowledge (Adaptation): add a `run --without-video` baseline and `report` both runs",),
    )
)
