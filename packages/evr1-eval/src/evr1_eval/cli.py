"""`evr1-eval`: argparse subcommands, one module each in `evr1_eval.commands`.

Each command module exposes `add_parser(subparsers) -> None` (which sets `run` as the parser's default) and
`run(args) -> int`. Heavy imports stay inside `run`, so `evr1-eval --help` and `list` start instantly.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from evr1_eval.commands import inspect as inspect_cmd
from evr1_eval.commands import list as list_cmd
from evr1_eval.commands import precompute as precompute_cmd
from evr1_eval.commands import report as report_cmd
from evr1_eval.commands import run as run_cmd
from evr1_eval.commands import score as score_cmd

COMMANDS = (list_cmd, inspect_cmd, score_cmd, precompute_cmd, run_cmd, report_cmd)

EPILOG = """examples:
  evr1-eval list
  evr1-eval inspect videomme --annotations videomme.json
  evr1-eval score videomme --annotations videomme.json --predictions preds.jsonl --out scored/videomme
  evr1-eval report runs/qwen3vl-8b runs/qwen3vl-8b-rl --out report/
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evr1-eval",
        description="Asynchronous multi-benchmark video VLM evaluation with official scoring protocols.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (FileNotFoundError, KeyError, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"evr1-eval {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"evr1-eval {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
