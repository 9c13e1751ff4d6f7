"""`evr1-eval list`: the registered benchmarks, their problem types, judge needs and default frame settings."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "list",
        help="list the registered benchmarks",
        description="List every registered benchmark with its problem types, primary metric rule and frame defaults.",
        epilog="example:\n  evr1-eval list --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from evr1_eval.benchmarks import available_benchmarks, get_benchmark

    rows = []
    for name in available_benchmarks():
        bench = get_benchmark(name)
        rows.append(
            {
                "name": bench.name,
                "title": bench.title,
                "problem_types": list(bench.problem_types),
                "needs_judge": sorted(bench.judged_types),
                "aliases": list(bench.aliases),
                "sampling": dict(bench.sampling_defaults),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        judge = f"  [judge: {', '.join(r['needs_judge'])}]" if r["needs_judge"] else ""
        print(f"{r['name']:<{width}}  {r['title']}  ({', '.join(r['problem_types'])}){judge}")
    return 0
