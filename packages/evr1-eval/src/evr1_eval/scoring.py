"""Score existing predictions with a benchmark's official rules: no model, no engine.

Every annotated sample gets exactly one row: a prediction scored by the benchmark, or an error row when the
prediction is missing or marked failed (so a lost prediction is counted per the benchmark's policy, never dropped).
Prediction lines that cannot be read, or that name ids absent from the annotations, are reported back.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evr1_eval.types import OFFICIAL_READING, Judge, Reading, Sample, ScoredSample

if TYPE_CHECKING:
    from evr1_eval.api.base import Benchmark


@dataclass(frozen=True, slots=True)
class Prediction:
    id: str
    response: str | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PredictionFile:
    predictions: dict[str, Prediction]
    #: "line N: what is wrong" for every line that could not be used.
    problems: list[str] = field(default_factory=list)


def read_predictions(path: Path) -> PredictionFile:
    """Read `{"id", "response"}` JSONL rows (`"error"` marks a failed sample); a later row for an id wins. Each
    problem names the file and its 1-based line: unreadable rows, a repeated id (and the line it repeats), a row
    with neither `response` nor `error` (scored as an error row)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"predictions file {path} does not exist")
    preds: dict[str, Prediction] = {}
    problems: list[str] = []
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path.name} line {lineno}: not JSON ({exc.msg})")
            continue
        if not isinstance(row, Mapping) or row.get("id") is None:
            problems.append(f'{path.name} line {lineno}: expected {{"id": ..., "response": ...}}')
            continue
        response = row.get("response")
        error = row.get("error")
        if response is not None and not isinstance(response, str):
            problems.append(f"{path.name} line {lineno}: `response` must be a string or null")
            continue
        ident = str(row["id"])
        if ident in first_line:
            problems.append(
                f"{path.name} line {lineno}: id {ident!r} repeats line {first_line[ident]} (this later row is scored)"
            )
        first_line.setdefault(ident, lineno)
        if response is None and not error:
            error = "prediction has no response"
            problems.append(f"{path.name} line {lineno}: id {ident!r} has no `response` (scored as an error row)")
        preds[ident] = Prediction(ident, response, None if not error else str(error))
    return PredictionFile(preds, problems)


def score_samples(
    bench: Benchmark,
    samples: Sequence[Sample],
    predictions: Mapping[str, Prediction],
    *,
    progress: bool = False,
    reading: Reading = OFFICIAL_READING,
) -> list[ScoredSample]:
    """One row per sample, in annotation order; `reading` as in `Benchmark.score`."""
    rows: list[ScoredSample] = []
    it: Iterable[Sample] = samples
    if progress:
        from tqdm import tqdm

        it = tqdm(samples, desc=f"score {bench.name}", unit="sample")
    for sample in it:
        pred = predictions.get(sample.id)
        if pred is None:
            rows.append(bench.error_row(sample, "no prediction for this id"))
        elif pred.error is not None or pred.response is None:
            rows.append(bench.error_row(sample, pred.error or "prediction has no response"))
        else:
            rows.append(bench.score(sample, pred.response, reading=reading))
    return rows


async def judge_rows(
    bench: Benchmark,
    samples: Sequence[Sample],
    rows: Sequence[ScoredSample],
    judge: Judge,
    *,
    concurrency: int = 16,
    reading: Reading = OFFICIAL_READING,
) -> list[ScoredSample]:
    """Send the rows the official protocol judges to `judge` (pending ones, and rule-scored optional types), up to
    `concurrency` at a time; others pass through unchanged. Order is kept."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    by_id = {s.id: s for s in samples}
    gate = asyncio.Semaphore(concurrency)

    async def one(row: ScoredSample) -> ScoredSample:
        wants_judge = row.needs_judge or row.problem_type in bench.judge_optional_types
        if not wants_judge or row.error is not None or row.id not in by_id:
            return row
        async with gate:
            return await bench.score_with_judge(by_id[row.id], row.response or "", judge, reading=reading)

    return list(await asyncio.gather(*(one(r) for r in rows)))


def unknown_ids(samples: Sequence[Sample], predictions: Mapping[str, Prediction]) -> list[str]:
    known = {s.id for s in samples}
    return sorted(i for i in predictions if i not in known)


@asynccontextmanager
async def openai_judge(
    base_url: str, model: str, *, max_tokens: int = 512, transport: Any = None
) -> AsyncIterator[Judge]:
    """A greedy judge on any OpenAI-compatible server (the `openai` backend); closed when the block exits.
    `transport` is an httpx transport for tests."""
    from evr1_eval.backends.base import BackendConfig, GenerationParams, Request
    from evr1_eval.backends.openai import OpenAIBackend

    backend = OpenAIBackend(BackendConfig(model=model, base_url=base_url), transport=transport)
    await backend.start()
    params = GenerationParams(max_tokens=max_tokens, temperature=0.0)
    counter = itertools.count()

    async def judge(prompt: str) -> str:
        generation = await backend.generate(Request(id=f"judge-{next(counter)}", prompt=prompt), params)
        return generation.text

    try:
        yield judge
    finally:
        await backend.close()
