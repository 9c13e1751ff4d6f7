"""`evr1-eval report`: compare run folders in a Markdown table, a summary.json and a PNG chart."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "report",
        help="compare runs: Markdown table, summary.json and a PNG chart",
        description=(
            "Re-aggregate every benchmark of each run folder (a `run --out` folder with <benchmark>/results*.jsonl, "
            "or one benchmark folder) with its official rules, merging the shards of multi-machine runs, and write "
            "report.md, summary.json and chart.png to --out. Every stored response is re-scored offline and the rows "
            "checked against the annotations and the run's record: exit 1 unless every benchmark reads "
            '"verified N/N".'
        ),
        epilog="examples:\n  evr1-eval report runs/base runs/rl-step200 --out report/\n  evr1-eval report runs/base runs/rl-step200 --html report/site/   # + sample viewer",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="DIR", help="run folders to compare (one column each)")
    p.add_argument("--out", type=Path, default=Path("evr1-report"), help="output folder (default: ./evr1-report)")
    p.add_argument(
        "--chart",
        choices=("auto", "matplotlib", "stdlib", "none"),
        default="auto",
        help="chart renderer: matplotlib (labelled; `pip install 'evr1-eval[report]'`), stdlib (bars only), none",
    )
    from evr1_eval.viewer import add_html_arguments

    add_html_arguments(p)  # --html DIR: the static sample viewer (evr1_eval.viewer)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from evr1_eval.report import collect_run, write_report
    from evr1_eval.results import Sources

    given = Sources(getattr(args, "annotations_dir", None), getattr(args, "media_root", None))
    runs = [collect_run(d, given) for d in args.runs]
    for run_report in runs:
        for problem in run_report.problems:
            print(f"warning: {problem}", file=sys.stderr)
        for found in run_report.verifications.values():
            print(f"{run_report.name}: {found.line()}", file=sys.stderr)
    if not any(r.summaries for r in runs):
        raise ValueError("no benchmark results in any of the given folders")
    written = write_report(runs, args.out, chart=args.chart)
    if written.get("chart_backend") == "stdlib":
        print(
            "note: matplotlib not installed; chart.png has bars only. pip install 'evr1-eval[report]'", file=sys.stderr
        )
    print((args.out / "report.md").read_text(encoding="utf-8"), end="")
    for key in ("markdown", "summary", "chart"):
        if key in written:
            print(f"wrote {written[key]}", file=sys.stderr)
    if getattr(args, "html", None) is not None:
        from evr1_eval.viewer import run_html

        run_html(args, runs)
    if not all(r.verified for r in runs):
        print("evr1-eval report: results NOT verified (problems above); exit 1", file=sys.stderr)
        return 1
    return 0
