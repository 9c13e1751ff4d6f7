"""`evr1-cache build --plan`: plan every row, then cache only what fits -- drop or resample the rows over the limit.

The kept rows are built with the spec given; each distinct resampled budget is built as its own spec (its own cache
folder: entries are keyed by their spec), and the output dataset lists every surviving row in input order. A
resampled row carries `evr1_plan` = {"action": "resample", "video": <its SamplingSpec settings>, "reason": ...};
every decision (and every row that could not be planned) is a line of the JSONL report.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from evr1_cache.plan.cli import build_with_plan, write_rows
from evr1_cache.plan.row_spec import PLAN_COLUMN

INDEX = "evr1_plan_index"


def build_planned(args: argparse.Namespace) -> int:
    from evr1_cache.build import build_cache
    from evr1_cache.cli import specs_from_args
    from evr1_cache.spec import SamplingSpec

    rows, resampled, report_path = build_with_plan(args)
    spec, image_spec = specs_from_args(args)
    data = Path(args.data)
    out = Path(args.out)
    target = Path(args.output_data) if args.output_data else out / f"{data.stem}.evr1.jsonl"
    media_root = args.media_root or str(data.resolve().parent)
    reasons = _reasons(report_path)
    groups: dict[str, list[dict[str, Any]]] = {}
    specs: dict[str, SamplingSpec] = {"": spec}
    for row in rows:
        index = int(row.pop("_evr1_original_index"))
        row = {**row, INDEX: index}
        if index in resampled:
            s = SamplingSpec(**resampled[index])
            specs[s.key()] = s
            groups.setdefault(s.key(), []).append(row)
        else:
            groups.setdefault("", []).append(row)
    outputs: list[Path] = []
    status = 0
    for key, group in groups.items():
        part = out / "plan" / f"{data.stem}.{key or 'main'}.jsonl"
        write_rows(part, group)
        built = target.with_name(f".{target.name}.{key or 'main'}.part")
        report = build_cache(
            part,
            out,
            specs[key],
            image_spec,
            media_root=media_root,
            allow_outside_media=args.allow_outside_media,
            decoder=args.decoder,
            workers=args.workers,
            rank=args.rank,
            world_size=args.world_size,
            progress=not args.no_progress,
            output_data=built,
            threads=args.threads,
        )
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
                    row[PLAN_COLUMN] = {"action": "resample", "video": resampled[index], "reason": reasons.get(index)}
                merged.append((index, row))
        path.unlink()
    merged.sort(key=lambda item: item[0])
    write_rows(target, [row for _, row in merged])
    print(f"dataset: {target} ({len(merged)} rows)")
    print(f"plan report: {report_path}")
    return status


def _reasons(report: Path) -> dict[int, str]:
    out: dict[int, str] = {}
    with open(report, encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            decision = record.get("decision")
            if decision:
                out[int(record["index"])] = str(decision.get("reason"))
    return out


__all__ = ["build_planned"]
