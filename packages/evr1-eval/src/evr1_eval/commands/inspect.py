"""`evr1-eval inspect`: parse every row (and ground truth) of an annotation file and count problem types."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "inspect",
        help="parse an annotation file and report samples, problem types and bad rows",
        description=(
            "Load BENCH's annotation file the way a run would (every ground truth parsed) and print JSON "
            '{"benchmark", "samples", "problem_types", "errors"}. Exit status 1 when some rows could not be parsed.'
        ),
        epilog="example:\n  evr1-eval inspect charades_sta --annotations charades_sta.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("benchmark", help="benchmark name (see `evr1-eval list`)")
    p.add_argument("--annotations", required=True, type=Path, help="annotation file (JSON list, JSONL or txt)")
    p.add_argument("--media-root", type=Path, default=None, help="folder the annotation's video paths are relative to")
    p.add_argument("--show", type=int, default=0, metavar="N", help="also print the first N samples")
    p.add_argument("--protocol", choices=("official", "evr1"), default="official", help="whose prompts --show prints")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.protocol import ProtocolSettings

    bench = get_benchmark(args.benchmark)
    protocol = ProtocolSettings(protocol=args.protocol)
    result = bench.load(
        args.annotations, args.media_root, protocol=protocol, allow_outside_media=True
    )  # reads no media
    out: dict[str, Any] = {
        "benchmark": bench.name,
        "samples": len(result.samples),
        "problem_types": dict(sorted(Counter(s.problem_type for s in result.samples).items())),
        "errors": [{e.unit: e.row, "id": e.id, "reason": e.reason} for e in result.errors],
        "warnings": [{e.unit: e.row, "id": e.id, "reason": e.reason} for e in result.warnings],
    }
    if args.show:
        out["examples"] = [
            {
                "id": s.id,
                "problem_type": s.problem_type,
                "ground_truth": s.ground_truth,
                "videos": list(s.videos),
                "groups": dict(s.groups),
                "prompt": s.prompt,
            }
            for s in result.samples[: args.show]
        ]
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 1 if result.errors else 0
