"""TempCompass (arXiv 2403.00476): 410 videos, temporal dimensions (action, speed, direction, order, attribute
change) over MC / yes-no / caption-matching / captioning formats; accuracy per format x dimension.

Two layouts load:
- EasyVideoR1's annotation rows (`problem`, `options`, `solution`, ...).
- The official release's `questions/{multi-choice,yes_no,caption_matching,captioning}.json`: one document per format,
  `{video_id: {dimension: [{question, answer}, ...]}}`, videos at `<media-root>/<video_id>.mp4`. Pass one file, or the
  folder (as `--annotations`, or as `<annotations-dir>/tempcompass/`) to load all four. Sample ids are
  `<format>/<video_id>/<dimension>/<n>`.

Official protocol (reference: llyx97/TempCompass `eval_multi-choice.py`, `eval_yes_no.py`, `eval_caption_matching.py`
@e1b4631; prompts from its `run_*.py`; lmms-eval 0.7.3 `tasks/tempcompass/utils.py` has the same rules): the question
as released plus "\nPlease directly give the best option:" / "\nPlease answer yes or no:"; the response with `</s>`
removed and stripped; multi-choice right when it equals the answer, is a bare letter, or starts "X." / "X)" with the
answer's letter; yes/no by `startswith("yes"|"no")` (lower-cased: "Yes, it is" reads yes, "The answer is yes" matches
nothing); caption matching by the reference's `eval_rule` (a whole option line, an option sentence, or an option label
— "Option 2", "Caption B", "Sentence A" or just "B"). An answer no rule matches goes to the ChatGPT judge in the
reference: without a judge it stays pending here (`accuracy_judge_failed_as_wrong` = the reference with
`--disable_llm`). Captioning rows need a judge. Caption-matching rows keep the release's own labels in the official
prompt; the evr1 prompt letters them A, B, ... like multiple choice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import evr1_eval.api.aggregation as aggregation
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import capped
from evr1_eval.api.loading import LETTERS, RowView
from evr1_eval.api.references import TEMPCOMPASS
from evr1_eval.api.registry import register
from evr1_eval.types import Outcome, Sample, ScoredSample

#: File stems of the official release -> format name used in groups and ids.
FORMATS = {
    "multi-choice": "multi-choice",
    "multi_choice": "multi-choice",
    "yes_no": "yes_no",
    "caption_matching": "caption_matching",
    "captioning": "captioning",
}
_LETTERED = re.compile(r"^([A-Z])\.\s*(\S.*)$")  # the release has "C.Both events ..."
_CAPTION_LABEL = re.compile(r"^(?:Option|Sentence|Caption)\s+([A-Z]|\d{1,2})\s*:\s*(.*)$")
_INFORMATION = re.compile(r"^Information\s+[A-Z]\s*:", re.MULTILINE)


def flatten(document: Mapping[str, Any], stem: str) -> list[Any]:
    """`{video_id: {dimension: [{question, answer}]}}` -> one row per question (the format from the file name, else
    guessed per question by `official_row`)."""
    rows: list[Any] = []
    fmt = FORMATS.get(stem.lower())
    for video_id, dims in document.items():
        if not isinstance(dims, Mapping):
            rows.append({"video_id": video_id, "invalid": f"video {video_id!r} maps to {type(dims).__name__}"})
            continue
        for dimension, questions in dims.items():
            if not isinstance(questions, list):
                rows.append({"video_id": video_id, "invalid": f"{video_id}/{dimension} is not a list of questions"})
                continue
            for n, q in enumerate(questions):
                row = dict(q) if isinstance(q, Mapping) else {"invalid": f"question is {type(q).__name__}"}
                rows.append({**row, "video_id": video_id, "dimension": dimension, "n": n, "format": fmt})
    return rows


def _split_lines(question: str, pattern: re.Pattern[str]) -> tuple[str, list[tuple[str, str]]]:
    """Question stem and the (label, text) option lines that end it."""
    lines = question.strip().splitlines()
    options: list[tuple[str, str]] = []
    while lines:
        m = pattern.match(lines[-1].strip())
        if not m:
            break
        options.insert(0, (m.group(1), m.group(2).strip()))
        lines.pop()
    return "\n".join(lines).strip(), options


def _guess_format(question: str, answer: str) -> str:
    if answer.strip().lower() in ("yes", "no"):
        return "yes_no"
    if _INFORMATION.search(question):
        return "captioning"
    if _split_lines(question, _CAPTION_LABEL)[1]:
        return "caption_matching"
    return "multi-choice"


def _validated(row: Any) -> tuple[str, str, str]:
    """(question, answer, video id) of a flattened official question, or a ValueError naming what is missing."""
    if not isinstance(row, Mapping):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    if "invalid" in row:
        raise ValueError(str(row["invalid"]))
    question, answer = row.get("question"), row.get("answer")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("official row has no `question` text")
    if not isinstance(answer, str) or not answer.strip():
        raise ValueError("official row has no `answer`")
    video_id = str(row.get("video_id", "")).strip()
    if not video_id:
        raise ValueError("official row has no `video_id`")
    return question, answer, video_id


def _lettered(fmt: str, question: str, answer: str) -> tuple[str, list[str], int]:
    """Question stem, option texts and the answer's index of a multi-choice or caption-matching question."""
    pattern = _CAPTION_LABEL if fmt == "caption_matching" else _LETTERED
    stem, options = _split_lines(question, pattern)
    if len(options) < 2:
        raise ValueError(f"{fmt} question has fewer than 2 option lines: {question[-80:]!r}")
    m = pattern.match(answer.strip())
    answer_text = m.group(2).strip() if m else answer.strip()
    labels, texts = [label for label, _ in options], [text for _, text in options]
    if m and m.group(1) in labels and texts[labels.index(m.group(1))] == answer_text:
        return stem, texts, labels.index(m.group(1))
    if answer_text in texts:
        return stem, texts, texts.index(answer_text)
    raise ValueError(f"answer {answer[:60]!r} matches none of the options {labels}")


def official_row(row: Any) -> Mapping[str, Any]:
    """One flattened official question -> an EasyVideoR1 row (ValueError naming what is wrong)."""
    question, answer, video_id = _validated(row)
    fmt = row.get("format") or _guess_format(question, answer)
    out: dict[str, Any] = {
        "official_question": question,
        "official_answer": answer,
        "problem_id": f"{fmt}/{video_id}/{row.get('dimension')}/{row.get('n')}",
        "path": video_id if "." in video_id.rsplit("/", 1)[-1] else f"{video_id}.mp4",
        "dimension": row.get("dimension"),
        "format": fmt,
        "format_dimension": f"{fmt}/{row.get('dimension')}",
    }
    if fmt in ("yes_no", "captioning"):
        kind = "boolean" if fmt == "yes_no" else "open_ended"
        return {**out, "problem": question.strip(), "solution": answer.strip(), "problem_type": kind}
    stem, texts, index = _lettered(fmt, question, answer)
    return {
        **out,
        "problem": stem,
        "options": [f"{LETTERS[i]}. {text}" for i, text in enumerate(texts)],
        "solution": f"<answer>{LETTERS[index]}</answer>",
        "problem_type": "multiple_choice",
    }


#: The answer instruction each format's question gets (TempCompass `run_qwen2_vl.py`, `answer_prompt`).
ANSWER_PROMPT = {
    "multi-choice": "\nPlease directly give the best option:",
    "yes_no": "\nPlease answer yes or no:",
    "caption_matching": "\nPlease directly give the best option:",
    "captioning": "",
}


def official_doc(view: RowView) -> dict[str, Any]:
    """The released question and answer (official layout), or their equivalent built from an EasyVideoR1 row."""
    row = view.row
    fmt = str(row.get("format") or ("yes_no" if view.problem_type == "boolean" else "multi-choice"))
    question, answer = row.get("official_question"), row.get("official_answer")
    if not isinstance(question, str) or not isinstance(answer, str):
        if view.problem_type == "multiple_choice":
            question = view.question + "\n" + "\n".join(f"{k}. {t}" for k, t in view.options)
            answer = next(f"{k}. {t}" for k, t in view.options if k == view.truth)
        else:
            question, answer = view.question, str(view.truth).lower()
    return {"question": question, "answer": answer, "format": fmt, "dim": row.get("dimension")}


def official_prompt(doc: Mapping[str, Any]) -> str:
    return str(doc["question"]) + ANSWER_PROMPT.get(str(doc["format"]), "")


def multi_choice_rating(pred: str, answer: str) -> int | None:
    if pred == answer:
        return 1
    if pred in ("A", "B", "C", "D"):
        return int(pred == answer[0])
    if any(pred.startswith(p) for p in ("A.", "B.", "C.", "D.")):
        return int(pred.split(".")[0] == answer[0])
    if any(pred.startswith(p) for p in ("A)", "B)", "C)", "D)")):
        return int(pred.split(")")[0] == answer[0])
    return None


def yes_no_rating(pred: str, answer: str) -> int | None:
    low = pred.lower()
    word = "yes" if low.startswith("yes") else "no" if low.startswith("no") else None
    return None if word is None else int(word == answer)


def caption_matching_rating(pred: str, question: str, answer: str) -> int | None:
    """`eval_rule`: the output must be a whole option line, an option sentence (also after "X) "), or an option label
    with or without its word ("Option 2" / "2", "Caption B" / "B"); the last match of each kind wins."""
    option_strs = question.split("\n")[1:]
    option_sents = [opt.split(": ")[1] for opt in option_strs]
    option_inds = [opt.split(": ")[0] for opt in option_strs] + [
        opt.split(": ")[0].replace("Sentence ", "").replace("Option ", "").replace("Caption ", "")
        for opt in option_strs
    ]
    matched = None
    for option in option_strs:
        if option == pred:
            matched = option
    for sent in option_sents:
        if sent == pred or (") " in pred and sent == pred.split(") ")[1]):
            matched = sent
    for ind in option_inds:
        if ind == pred or ind == pred.replace(".", ""):
            matched = ind
    if matched is None:
        return None
    hit = (matched == answer, matched == answer.split(":")[0], matched == answer.split(": ")[1])
    return int(any(hit) or matched == answer.split(": ")[0].split()[1])


def rule(sample: Sample, response: str) -> Outcome:
    doc = sample.extras.get("official_doc") or {}
    fmt = str(doc.get("format"))
    pred = capped(response).replace("</s>", "").strip()
    if fmt == "yes_no":
        rating = yes_no_rating(pred, str(doc["answer"]))
    elif fmt == "caption_matching":
        rating = caption_matching_rating(pred, str(doc["question"]), str(doc["answer"]))
    else:
        rating = multi_choice_rating(pred, str(doc["answer"]))
    details = {"scorer": f"tempcompass-{fmt}", "match_success": rating is not None}
    return Outcome(score=float(rating or 0), extracted=pred[:200], details=details, needs_judge=rating is None)


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> tuple[str, dict[str, float], list[str]]:
    """Item accuracy with per-dimension, per-format and format x dimension breakdowns, plus `format_avg` (the mean of
    the per-format accuracies, the leaderboard's "Avg") when the rows carry their format."""
    primary, metrics, notes = aggregation.micro(bench, rows)
    formats = aggregation.by_group(rows, "format")
    if formats:
        metrics["format_avg"] = aggregation.pct(aggregation.pct(r.score for r in g) / 100 for g in formats.values())
    return primary, metrics, notes


BENCHMARK = register(
    Benchmark(
        name="tempcompass",
        title="TempCompass",
        problem_types=("multiple_choice", "boolean", "open_ended"),
        group_fields={
            "dimension": ("dim", "dimension", "temporal_dimension", "task_type"),
            "format": ("format",),
            "format_dimension": ("format_dimension",),
        },
        flatten=flatten,
        adapter=official_row,
        reference=TEMPCOMPASS,
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=rule,
        aggregator=aggregate,
        judged_types=frozenset({"open_ended"}),
        judge_fallback_types=frozenset({"multiple_choice", "boolean"}),
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
        notes=(
            "captioning rows need a judge (the reference's ChatGPT reads the caption and answers a multi-choice question)",
        ),
    )
)
