"""`evr1-eval list`: the registered benchmarks (problem types, judge needs, official reference, frame defaults), or
the registered presets (`--presets`)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "list",
        help="list the registered benchmarks (or presets)",
        description=(
            "List every registered benchmark with its problem types, judge needs, the official code its official "
            "protocol reproduces and its frame defaults; with --presets, the model-family presets and their sources."
        ),
        epilog="examples:\n  evr1-eval list --json\n  evr1-eval list --presets",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--presets", action="store_true", help="list the presets (`run --preset NAME`) instead")
    p.set_defaults(run=run)


def _benchmarks() -> list[dict[str, Any]]:
    from evr1_eval.benchmarks import available_benchmarks, get_benchmark

    return [
        {
            "name": bench.name,
            "title": bench.title,
            "problem_types": list(bench.problem_types),
            "needs_judge": sorted(bench.judged_types | bench.judge_fallback_types),
            "reference": str(bench.reference) if bench.reference else None,
            "aliases": list(bench.aliases),
            "sampling": dict(bench.sampling_defaults),
        }
        for bench in map(get_benchmark, available_benchmarks())
    ]


def _presets() -> list[dict[str, Any]]:
    from evr1_eval.presets import available_presets, get_preset

    return [get_preset(name).record() for name in available_presets()]


def run(args: argparse.Namespace) -> int:
    rows = _presets() if args.presets else _benchmarks()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        if args.presets:
            print(f"{r['name']:<{width}}  {r['description']}")
            for source in r["sources"]:
                print(f"{'':<{width}}    {source['what']}: {source['where']}")
            continue
        judge = f"  [judge: {', '.join(r['needs_judge'])}]" if r["needs_judge"] else ""
        ref = r["reference"] or "no official code read"
        print(f"{r['name']:<{width}}  {r['title']}  ({', '.join(r['problem_types'])}){judge}  <- {ref}")
    return 0
