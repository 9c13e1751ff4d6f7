"""`evr1-cache build --plan`: plan every row, then cache only what fits -- drop or resample the rows over the limit.

The kept rows are built with the spec given; each distinct resampled budget is built as its own spec (its own cache
folder: entries are keyed by their spec), and the output dataset lists every surviving row in input order. A
resampled row carries `evr1_plan` = {"action": "resample", "video": <its SamplingSpec settings>, "reason": ...};
every decision (and every row that could not be planned) is a line of the JSONL report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evr1_cache.atomic import atomic_open
from evr1_cache.build import build_cache_from_args
from evr1_cache.dataset import read_rows
from evr1_cache.families import ModelFamily, family_for_model, get_family
from evr1_cache.plan.report import Decision, decide, summary, write_report
from evr1_cache.plan.row_spec import PLAN_COLUMN
from evr1_cache.plan.tokens import default_messages, load_text_counter, plan_rows
from evr1_cache.spec import SamplingSpec
from evr1_cache.spec_args import specs_from_args

INDEX = "evr1_plan_index"


def build_planned(args: argparse.Namespace) -> int:
    rows, resampled, report_path = build_with_plan(args)
    spec, image_spec = specs_from_args(args)
    data = Path(args.data)
    out = Path(args.out)
    target = Path(args.output_data) if args.output_data else out / f"{data.stem}.evr1.jsonl"
    media_root = args.media_root or str(data.resolve().parent)
    groups: dict[str, tuple[SamplingSpec, list[dict[str, Any]]]] = {}  # "": the kept rows, else a resampled spec's key
    for row in rows:
        d = resampled.get(row[INDEX])
        s = spec if d is None else SamplingSpec(**(d.video_spec or {}))
        groups.setdefault("" if d is None else s.key(), (s, []))[1].append(row)
    outputs: list[Path] = []
    status = 0
    for key, (group_spec, group) in groups.items():
        part = out / "plan" / f"{data.stem}.{key or 'main'}.jsonl"
        write_rows(part, group)
        built = target.with_name(f".{target.name}.{key or 'main'}.part")
        report = build_cache_from_args(args, part, group_spec, image_spec, media_root=media_root, output_data=built)
        what = "kept rows" if not key else f"resampled rows (spec {key})"
        print(
            f"{what}: rows {report.rows} | built {report.built} | skipped (done before) {report.skipped} | "
            f"failed {report.failed}"
        )
        for line in report.errors:
            print(f"FAILED {line}")
        status = max(status, 0 if report.ok else 1)
        if report.output_data:
            outputs.append(report.output_data)
    if args.world_size > 1:
        print("note: with --rank/--world-size, re-run once without them to write the output dataset")
        return status
    merged: list[tuple[int, dict[str, Any]]] = []
    for path in outputs:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                index = int(row.pop(INDEX))
                if index in resampled:
                    d = resampled[index]
                    row[PLAN_COLUMN] = {"action": "resample", "video": dict(d.video_spec or {}), "reason": d.reason}
                merged.append((index, row))
        path.unlink()
    merged.sort(key=lambda item: item[0])
    write_rows(target, [row for _, row in merged])
    print(f"dataset: {target} ({len(merged)} rows)")
    print(f"plan report: {report_path}")
    return status


def resolve_family(args: argparse.Namespace) -> ModelFamily:
    """The family from --family, else the model folder's config.json; the spec args then name it."""
    if args.family is not None:
        return get_family(args.family)
    model = getattr(args, "model", None) or getattr(args, "tokenizer", None)
    if model:
        fam = family_for_model(model)
        args.family = fam.name
        return fam
    raise ValueError("the planner needs the model family: give --family NAME or --model CHECKPOINT_FOLDER")


def run_plan(
    args: argparse.Namespace, data_file: str, rows: list[dict[str, Any]] | None = None, *, fresh: bool = False
) -> tuple[Any, ...]:
    """(family, spec, image_spec, counter, rows, messages, plans) for the parsed arguments. `fresh`: plan every row
    under the given spec, dropping any `evr1_plan` override an earlier `build --plan` wrote (build re-decides)."""
    family = resolve_family(args)
    spec, image_spec = specs_from_args(args)
    tok = args.tokenizer or args.model
    counter = load_text_counter(tok) if tok else None
    if rows is None:
        rows = read_rows(data_file)
    if fresh:
        rows = [{k: v for k, v in row.items() if k != PLAN_COLUMN} for row in rows]
    messages = []
    for row in rows:
        try:
            messages.append(default_messages(row, args.prompt_key))
        except ValueError:
            messages.append([])
    plans = plan_rows(
        rows,
        family,
        spec,
        image_spec,
        counter=counter,
        prompt_key=args.prompt_key,
        data_file=data_file,
        media_root=args.media_root,
        allow_outside_media=getattr(args, "allow_outside_media", False),
        allow_remote_media=getattr(args, "allow_remote_media", ()),
    )
    return family, spec, image_spec, counter, rows, messages, plans


def build_with_plan(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[int, Decision], Path]:
    """Plan the input rows; returns (kept rows, each with its input index under `INDEX`, {row index: its resample
    decision}, report path). Prints a summary."""
    if args.max_prompt_length is None:
        raise ValueError("build --plan needs --max-prompt-length (the limit rows are checked against)")
    margin = int(getattr(args, "prompt_margin", 0) or 0)
    if not 0 <= margin < args.max_prompt_length:
        raise ValueError(f"--prompt-margin must be >= 0 and below --max-prompt-length, got {margin}")
    limit = args.max_prompt_length - margin
    family, spec, image_spec, counter, rows, messages, plans = run_plan(args, args.data, fresh=True)
    decisions = decide(plans, rows, messages, family, spec, image_spec, limit, args.on_over_limit, counter)
    report = Path(args.report) if args.report else Path(args.out) / "plan-report.jsonl"
    write_report(report, plans, decisions, limit)
    dropped = {d.index for d in decisions if d.action == "drop"}
    resampled = {d.index: d for d in decisions if d.action == "resample"}
    for d in decisions:
        print(f"plan: row {d.row_id} (line {d.index + 1}): {d.action}: {d.reason}", file=sys.stderr)
    info = summary(plans, limit)
    reserved = f" ({args.max_prompt_length} - margin {margin})" if margin else ""
    print(
        f"plan: {info['rows']} rows, {info['over_limit']} over {limit} tokens{reserved}: "
        f"{len(dropped)} dropped, {len(resampled)} resampled, "
        f"{sum(d.action == 'keep' for d in decisions)} kept over; report {report}"
    )
    kept = [{**row, INDEX: i} for i, row in enumerate(rows) if i not in dropped]
    return kept, resampled, report


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Rows as JSONL, atomically (the filtered input `build` reads after planning)."""
    with atomic_open(path, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    return path


__all__ = ["build_planned"]
