"""`evr1-eval score`: official metrics from existing predictions, no model needed."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from evr1_eval.types import ANSWER_TAGS, REASONING_TAGS, Reading


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "score",
        help="score existing predictions with the benchmark's official rules",
        description=(
            'Score {"id", "response"} JSONL predictions against BENCH\'s annotations. Writes OUT/results.jsonl (one '
            "row per sample; a missing prediction is an error row) and OUT/summary.json (official aggregation). "
            "LLM-judged rows stay pending unless --judge-base-url/--judge-model name an OpenAI-compatible judge. Every "
            "answer is scored under both protocols (official: the benchmark's own rules, the headline; evr1: "
            "evr1-rewards, as training scores). Exit status 1 when annotation rows could not be loaded (the count and "
            "the first reasons are printed; nothing is scored when no row loads), when predictions are malformed, "
            "repeat an id or name ids not in the annotations, or when the written results do not verify "
            '(evr1_eval.verify: "verified N/N"); 0 otherwise.'
        ),
        epilog=(
            "example:\n  evr1-eval score videomme --annotations videomme.json --predictions preds.jsonl "
            "--out scored/videomme"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("benchmark", help="benchmark name (see `evr1-eval list`)")
    p.add_argument("--annotations", required=True, type=Path, help="annotation file")
    p.add_argument("--predictions", required=True, type=Path, help='JSONL with {"id", "response"} rows')
    p.add_argument("--out", required=True, type=Path, help="output folder (results.jsonl, summary.json)")
    p.add_argument("--media-root", type=Path, default=None, help="folder the annotation's video paths are relative to")
    p.add_argument("--judge-base-url", default=None, help="OpenAI-compatible server for LLM-judged rows")
    p.add_argument("--judge-model", default=None, help="judge model name served at --judge-base-url")
    p.add_argument(
        "--response-filter", choices=("none", "after_think"), default="none", help="score the text after </think>"
    )
    add_reading_args(p)
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(run=run)


def add_reading_args(p: Any) -> None:
    """`--answer-tags` and `--reasoning-tags` (shared by `score` and `run`): how the official rule reads a response
    (`evr1_eval.types.Reading`, built by `reading_of`)."""
    p.add_argument(
        "--answer-tags",
        choices=ANSWER_TAGS,
        default="official",
        help="official (default): the whole response goes to each benchmark's official extractor, as its reference "
        "code does; read: the final <answer>...</answer>'s content goes to it when there is one (a named deviation, "
        "recorded in the run settings and reported in the summary)",
    )
    p.add_argument(
        "--reasoning-tags",
        choices=REASONING_TAGS,
        default="official",
        help="official (default): each benchmark's official pipeline (lmms-eval's tasks remove <think>/<analysis> "
        "blocks, Video-MME's script and the other official scripts read the raw response); strip: removed before "
        "every benchmark's rule (lmms-eval's pipeline everywhere); keep: never removed (lmms-eval with "
        "--reasoning_tags none). A named deviation, recorded in the run settings and reported in the summary",
    )


def reading_of(args: argparse.Namespace) -> Reading:
    """The `Reading` the command line asks for (argparse has refused unknown names already)."""
    return Reading(answer_tags=args.answer_tags, reasoning_tags=args.reasoning_tags)


def report_load_errors(name: str, loaded: int, reasons: list[str]) -> None:
    """The count and the first reasons on screen (`run` and `score` then exit non-zero)."""
    print(f"{name}: {len(reasons)} annotation row(s) could not be loaded ({loaded} loaded); first reasons:",
          file=sys.stderr)  # fmt: skip
    for reason in reasons[:5]:
        print(f"  {reason}", file=sys.stderr)


def _write_rows(path: Path, rows: list[Any]) -> None:
    from evr1_cache.atomic import atomic_open
    from evr1_eval.results import row_to_dict

    with atomic_open(path, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row_to_dict(row), ensure_ascii=False, default=str) + "\n")


def run(args: argparse.Namespace) -> int:
    from evr1_eval import manifest
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.jobs import file_digest
    from evr1_eval.presets import apply_response_filter
    from evr1_eval.results import write_json_atomic
    from evr1_eval.scoring import judge_rows, openai_judge, read_predictions, score_samples, unknown_ids
    from evr1_eval.verify import Annotations, record_written, verify_benchmark

    bench = get_benchmark(args.benchmark)
    loaded = bench.load(args.annotations, args.media_root, allow_outside_media=True)  # scoring reads no media
    if loaded.errors:
        report_load_errors("evr1-eval score", len(loaded.samples), [e.reason for e in loaded.errors])
    if not loaded.samples:
        print(f"evr1-eval score: no row of {args.annotations} could be loaded; nothing scored", file=sys.stderr)
        return 1
    preds = read_predictions(args.predictions)
    predictions = {
        k: dataclasses.replace(p, response=p.response and apply_response_filter(p.response, args.response_filter))
        for k, p in preds.predictions.items()
    }
    reading = reading_of(args)
    rows = score_samples(bench, loaded.samples, predictions, progress=not args.no_progress, reading=reading)
    if args.judge_base_url or args.judge_model:
        if not (args.judge_base_url and args.judge_model):
            raise ValueError("pass both --judge-base-url and --judge-model")

        async def judged() -> list[Any]:
            async with openai_judge(args.judge_base_url, args.judge_model) as judge:
                return await judge_rows(bench, loaded.samples, rows, judge, reading=reading)

        rows = asyncio.run(judged())
    summary = bench.aggregate(rows)
    extra_ids = unknown_ids(loaded.samples, preds.predictions)
    problems = [e.reason for e in loaded.errors] + [w.reason for w in loaded.warnings] + preds.problems
    if extra_ids:
        problems.append(f"{len(extra_ids)} predictions name ids not in the annotations, e.g. {extra_ids[:5]}")
    args.out.mkdir(parents=True, exist_ok=True)
    _write_rows(args.out / "results.jsonl", rows)
    record = {
        **dataclasses.asdict(summary),
        "annotations": str(args.annotations),
        "predictions": str(args.predictions),
        "load_errors": len(loaded.errors),
        "problems": problems,
    }
    write_json_atomic(args.out / "summary.json", record)
    fingerprint = {
        "benchmark": bench.name,
        "prompt_version": bench.prompt_version,
        "annotations": file_digest(args.annotations),
        "judge": {"base_url": args.judge_base_url, "model": args.judge_model} if args.judge_model else None,
        **reading.record(),
    }
    extra = {
        "predictions": file_digest(args.predictions),
        "response_filter": args.response_filter,
        "command": "score",
        "sources": {"annotations_file": str(Path(args.annotations).absolute())},  # for `report` to re-score the rows
    }
    counts = {"rows_loaded": len(loaded.samples), "load_errors": len(loaded.errors)}
    write_json_atomic(
        args.out / manifest.MANIFEST,
        manifest.build(fingerprint, reference=str(bench.reference or ""), annotations=counts, extra=extra),
    )
    record_written(args.out, ["results.jsonl", "summary.json"])
    selected = frozenset(s.id for s in loaded.samples)
    found = verify_benchmark(args.out, bench, Annotations({s.id: s for s in loaded.samples}, selected))
    problems += found.problems
    for line in problems[len(loaded.errors) :][:20]:
        print(f"warning: {line}", file=sys.stderr)
    if len(problems) > 20:
        print(f"warning: ... {len(problems) - 20} more in {args.out / 'summary.json'}", file=sys.stderr)
    print(json.dumps(dataclasses.asdict(summary), indent=2))
    print(found.line(), file=sys.stderr)
    return 1 if loaded.errors or extra_ids or preds.problems or not found.ok else 0
