"""Charades-STA test (TALL, ICCV'17): 3,720 query-moment pairs; R@1 at IoU >= {0.3, 0.5, 0.7} and mIoU.

Official protocol (reference: lmms-eval 0.7.3 `tasks/charades_sta/utils.py` + `charades.yaml`): the prompt "Please find
the visual event described by a sentence in the video, determining its starting and ending times. The format should
be: 'The event happens in the start time - end time'. …<sentence>. Please return its start time and end time.";
`extract_time` on the response after reasoning-tag stripping: lower-cased, "to" replaced by "-" everywhere, split into
sentences at ! ? and newlines, the sentences with a time keyword ("starts", "ends", "happens in", "start time", "end
time", "start", "end", "happen") tried first; then, in this order, "m:ss - m:ss" ranges, "a - b" number ranges, pairs
of clock times ("starts at 00:00:04 and ends at 00:00:12"), pairs of first numbers of consecutive sentences
("Start time: 24.3\\nEnd time: 30.4"), and "a s - b s"; the FIRST span found, swapped when reversed. JSON such as
{"time": [s, e]} and a bare "[s, e]" read as the reference reads them. IoU over the hull; unparsable = 0.
Aggregation: rows sharing (video, sentence, span) count once (the reference keys its results by them; the later
row, in id order, wins); R@m = share with IoU >= m; mIoU = the mean IoU (both in %). EasyVideoR1's file stores the
truth as `<think>{"time": [s, e]}</think><[PLHD…]>`; the loader unwraps it. The official txt layout is read too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from evr1_eval.api.adapters import charades_official
from evr1_eval.api.aggregation import Result, pct
from evr1_eval.api.base import Benchmark
from evr1_eval.api.extractors import capped
from evr1_eval.api.loading import RowView
from evr1_eval.api.references import lmms_eval
from evr1_eval.api.registry import register
from evr1_eval.api.scoring_rules import doc_of
from evr1_eval.types import Outcome, Sample, ScoredSample

PRE_PROMPT = (
    "Please find the visual event described by a sentence in the video, determining its starting and ending times. "
    "The format should be: 'The event happens in the start time - end time'. For example, The event 'person turn a "
    "light on' happens in the 24.3 - 30.4 seonds. Now I will give you the textual sentence: "
)
POST_PROMPT = "Please return its start time and end time."
_EXAMPLE = "A specific example is : 20.8 - 30.0 seconds".lower()
_KEYWORDS = ("starts", "ends", "happens in", "start time", "end time", "start", "end", "happen")
_SENTENCES = re.compile(r"[!?\n]")
_CLOCK_RANGE = re.compile(r"\b(\d{1,2}:\d{2}(?::\d{2})?)\s*[–-]\s*(\d{1,2}:\d{2}(?::\d{2})?)\b")
_RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*[–-]\s*(\d+(?:\.\d+)?)")
_NUMBER = re.compile(r"\b(\d+(?:\.\d+)?)\b")
_CLOCK = re.compile(r"\b(\d{1,2}:\d{2}(?::\d{2})?)\b")
_FALLBACK = re.compile(r"(\d+(?:\.\d+)?)\s*s?\s*[–-]\s*(\d+(?:\.\d+)?)\s*s?")


def official_doc(view: RowView) -> dict[str, Any]:
    span = json.loads(view.truth)["time"]
    return {"video": view.videos[0] if view.videos else "", "caption": view.question, "timestamp": span}


def official_prompt(doc: Mapping[str, Any]) -> str:
    return f"{PRE_PROMPT}{doc['caption']}. {POST_PROMPT}"


def _seconds(clock: str) -> float:
    parts = [float(p) for p in clock.split(":")]
    return parts[0] * 3600 + parts[1] * 60 + parts[2] if len(parts) == 3 else parts[0] * 60 + parts[1]


def _pairs(values: list[float]) -> list[list[float]]:
    values = values[: len(values) // 2 * 2]
    return [[values[i], values[i + 1]] for i in range(0, len(values), 2)]


def _first_ranges(sentences: list[str], pattern: re.Pattern[str], to_seconds: Any) -> list[list[float]]:
    """Every range `pattern` finds in the first sentence where it finds any."""
    for sentence in sentences:
        found = pattern.findall(sentence)
        if found:
            return [[to_seconds(a), to_seconds(b)] for a, b in found]
    return []


def extract_time(paragraph: str) -> list[list[float]]:
    """The reference's `extract_time`: at most one [start, end] span (ordered)."""
    text = paragraph.lower().replace(_EXAMPLE, "").replace("to", "-")
    sentences = _SENTENCES.split(text)
    candidates = [s for s in sentences if any(k in s for k in _KEYWORDS)] or sentences
    spans = _first_ranges(candidates, _CLOCK_RANGE, _seconds) or _first_ranges(candidates, _RANGE, float)
    if not spans:
        spans = _pairs([_seconds(t) for s in candidates for t in _CLOCK.findall(s)])
    if not spans:
        spans = _pairs([float(m[0]) for m in (_NUMBER.findall(s) for s in candidates) if m])
    if not spans:
        spans = _first_ranges(candidates, _FALLBACK, float)
    return [[s, e] if e > s else [e, s] for s, e in spans[:1]]


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    denom = max(a[1], b[1]) - min(a[0], b[0])
    return 0.0 if denom <= 0 else max(min(a[1], b[1]) - max(a[0], b[0]), 0) / denom


def rule(sample: Sample, response: str) -> Outcome:
    doc = doc_of(sample)
    gt = [float(v) for v in doc["timestamp"]]
    details: dict[str, Any] = {"scorer": "charades-extract_time", "key": f"{doc['video']}>>>{doc['caption']}>>>{gt}"}
    spans = extract_time(capped(response))
    if len(spans) != 1:
        return Outcome(score=0.0, extracted=None, details={**details, "parsed": False})
    return Outcome(score=iou(gt, spans[0]), extracted=json.dumps(spans[0]), details=details)


def _order(row: ScoredSample) -> tuple[int, float, str]:
    try:
        return (0, float(row.id), row.id)
    except ValueError:
        return (1, 0.0, row.id)


def dedupe(rows: Sequence[ScoredSample]) -> list[ScoredSample]:
    """One row per (video, sentence, span) key, the last in id order (the reference's results dict)."""
    by_key: dict[str, ScoredSample] = {}
    for row in sorted(rows, key=_order):
        by_key[str(row.details.get("key", row.id))] = row
    return list(by_key.values())


def aggregate(bench: Benchmark, rows: Sequence[ScoredSample]) -> Result:
    kept = dedupe(rows)
    ious = [r.score for r in kept]
    metrics = {"miou": pct(ious), **{f"r@{m}": pct(float(v >= m) for v in ious) for m in (0.3, 0.5, 0.7)}}
    repeated = len(rows) - len(kept)
    notes = [f"{repeated} rows repeat another row's (video, sentence, span): counted once"] if repeated else []
    return "miou", metrics, notes


BENCHMARK = register(
    Benchmark(
        name="charades_sta",
        title="Charades-STA",
        problem_types=("temporal_grounding",),
        adapter=charades_official,
        question_templates={"temporal_grounding": 'When does this happen in the video: "{question}"?'},
        reference=lmms_eval("charades_sta"),
        official_doc=official_doc,
        official_prompt=official_prompt,
        scorer=rule,
        reasoning_blocks="strip",
        aggregator=aggregate,
        sampling_defaults={"fps": 2.0, "min_frames": 4, "max_frames": 128},
    )
)
