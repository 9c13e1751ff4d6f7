"""TempCompass (arXiv 2403.00476): 410 videos, temporal dimensions (action, speed, direction, order, attribute
change) over MC / yes-no / caption-matching / captioning formats; accuracy per format x dimension.

Two layouts load:
- EasyVideoR1's annotation rows (`problem`, `options`, `solution`, ...).
- The official release's `questions/{multi-choice,yes_no,caption_matching,captioning}.json`: one document per format,
  `{video_id: {dimension: [{question, answer}, ...]}}`, videos at `<media-root>/<video_id>.mp4`. Pass one file, or the
  folder (as `--annotations`, or as `<annotations-dir>/tempcompass/`) to load all four. Sample ids are
  `<format>/<video_id>/<dimension>/<n>`.
Official scoring tries hand rules, then a ChatGPT judge. Here multi-choice and caption-matching rows are lettered
multiple choice (caption matching's "Option 1"/"Sentence A"/"Caption A" labels become A, B, ...) and yes/no rows are
boolean, all scored by rule with no judge fallback; captioning rows need a judge.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.benchmarks import aggregation
from evr1_eval.benchmarks.base import Benchmark, register
from evr1_eval.benchmarks.loading import LETTERS
from evr1_eval.types import ScoredSample

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


def official_row(row: Any) -> Mapping[str, Any]:
    """One flattened official question -> an EasyVideoR1 row (ValueError naming what is wrong)."""
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
    fmt = row.get("format") or _guess_format(question, answer)
    out: dict[str, Any] = {
        "problem_id": f"{fmt}/{video_id}/{row.get('dimension')}/{row.get('n')}",
        "path": video_id if "." in video_id.rsplit("/", 1)[-1] else f"{video_id}.mp4",
        "dimension": row.get("dimension"),
        "format": fmt,
        "format_dimension": f"{fmt}/{row.get('dimension')}",
    }
    if fmt == "yes_no":
        return {**out, "problem": question.strip(), "solution": answer.strip(), "problem_type": "boolean"}
    if fmt == "captioning":
        return {**out, "problem": question.strip(), "solution": answer.strip(), "problem_type": "open-ended"}
    pattern = _CAPTION_LABEL if fmt == "caption_matching" else _LETTERED
    stem, options = _split_lines(question, pattern)
    if len(options) < 2:
        raise ValueError(f"{fmt} question has fewer than 2 option lines: {question[-80:]!r}")
    m = pattern.match(answer.strip())
    answer_text = m.group(2).strip() if m else answer.strip()
    texts = [text for _, text in options]
    labels = [label for label, _ in options]
    if m and m.group(1) in labels and texts[labels.index(m.group(1))] == answer_text:
        index = labels.index(m.group(1))
    elif answer_text in texts:
        index = texts.index(answer_text)
    else:
        raise ValueError(f"answer {answer[:60]!r} matches none of the options {labels}")
    return {
        **out,
        "problem": stem,
        "options": [f"{LETTERS[i]}. {text}" for i, text in enumerate(texts)],
        "solution": f"<answer>{LETTERS[index]}</answer>",
        "problem_type": "multiple choice",
    }


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
        problem_types=("multiple choice", "boolean", "open-ended"),
        group_fields={
            "dimension": ("dim", "dimension", "temporal_dimension", "task_type"),
            "format": ("format",),
            "format_dimension": ("format_dimension",),
        },
        flatten=flatten,
        adapter=official_row,
        aggregator=aggregate,
        judged_types=frozenset({"open-ended"}),
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
        notes=(
            "official ChatGPT fallback for unmatched answers not applied (rule-based extraction only)",
            "caption matching is asked as lettered multiple choice; captioning rows need a judge",
        ),
    )
)
