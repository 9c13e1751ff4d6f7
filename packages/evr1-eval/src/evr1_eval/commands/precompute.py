"""`evr1-eval precompute`: fill the frame cache for benchmarks ahead of a run (decode each video once, in parallel).

It loads the samples exactly as `run` does and hands their distinct media to `evr1_cache.build_cache` with the same
`SamplingSpec`, so `run --cache-dir` then finds every entry (and a trainer with the same spec finds the same entries).
Annotation rows that cannot be read and media that cannot be cached are listed (the first few on screen, all in the
cache's error report); every other sample is cached; the exit code is 1 when anything failed, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from evr1_cache import add_media_path_args
from evr1_eval.types import LoadError  # already loaded with the CLI (commands.score)

EXAMPLE = """example:
  evr1-eval precompute videomme mvbench --annotations-dir data/eval --media-root data/videos \\
      --cache-dir cache/ --model Qwen/Qwen3-VL-8B-Instruct --workers 8
"""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "precompute",
        help="fill the frame cache for benchmarks (before `run --cache-dir`)",
        description=__doc__,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("benchmarks", nargs="+", help="benchmark names (see `evr1-eval list`)")
    p.add_argument("--annotations-dir", required=True, type=Path, help="folder holding <benchmark>.json(l)")
    p.add_argument(
        "--media-root", type=Path, default=None, help="folder the annotations' media paths are relative to and stay in"
    )
    add_media_path_args(p)
    p.add_argument("--cache-dir", required=True, type=Path, help="evr1-cache folder to fill")
    p.add_argument("--model", default=None, help="checkpoint folder: picks the frame geometry (Qwen3-VL: 32 px)")
    p.add_argument(
        "--sampling", action="append", default=[], metavar="KEY=VALUE", help="same SamplingSpec overrides as `run`"
    )
    p.add_argument("--workers", type=int, default=2, help="decoding processes")
    p.add_argument("--decoder", default="auto", help="evr1-cache decoder (auto, pyav, ffmpeg)")
    p.add_argument("--rank", type=int, default=0, help="this machine's share of the media")
    p.add_argument("--world-size", type=int, default=1, help="machines sharing the work")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from evr1_cache import build_cache
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.jobs import image_spec_for, load_job, parse_overrides, sampling_overrides
    from evr1_eval.runner import sampling_for

    benches = [get_benchmark(n) for n in args.benchmarks]
    overrides = sampling_overrides(benches[0].sampling, parse_overrides(args.sampling), args.model)
    failed = 0
    for bench in benches:
        job = load_job(
            bench, args.annotations_dir, args.media_root,
            allow_outside_media=args.allow_outside_media, allow_remote_media=args.allow_remote_media,
        )  # fmt: skip
        spec = sampling_for(bench, overrides)
        if job.load_errors:
            failed += len(job.load_errors)
            print(f"{bench.name}: {len(job.load_errors)} annotation row(s) could not be read:", file=sys.stderr)
            for err in job.load_errors[:SHOWN]:
                print(f"  {_describe(err)}", file=sys.stderr)
            if len(job.load_errors) > SHOWN:
                print(f"  ... and {len(job.load_errors) - SHOWN} more", file=sys.stderr)
        distinct = {(*s.videos, "|", *s.images): s for s in job.samples if s.videos or s.images}
        # absolute: build_cache resolves relative paths against the (temporary) data file's folder
        rows = [
            {"videos": [os.path.abspath(v) for v in s.videos], "images": [os.path.abspath(i) for i in s.images]}
            for s in distinct.values()
        ]
        with tempfile.TemporaryDirectory(prefix="evr1-precompute-") as tmp:
            data = Path(tmp) / f"{bench.name}.jsonl"
            data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            report = build_cache(
                data,
                args.cache_dir,
                spec,
                image_spec_for(spec),
                decoder=args.decoder,
                workers=args.workers,
                rank=args.rank,
                world_size=args.world_size,
                progress=not args.no_progress,
                output_data=Path(tmp) / "out.jsonl",
                allow_outside_media=True,  # the paths were confined when the annotations were loaded
            )
        failed += report.failed
        print(
            f"{bench.name}: {len(job.samples)} samples, {report.videos} videos + {report.images} images for this rank: "
            f"{report.built} built, {report.skipped} already cached, {report.failed} failed ({report.seconds:.1f} s)"
        )
        for line in report.errors[:SHOWN]:
            print(f"  {line}", file=sys.stderr)
        if report.error_file is not None:
            print(f"  all failures: {report.error_file}", file=sys.stderr)
    if failed:
        print(f"evr1-eval precompute: {failed} row(s) or media failed; all others are cached (exit 1)", file=sys.stderr)
    return 1 if failed else 0


#: Failures printed on screen per benchmark.
SHOWN = 10


def _describe(err: LoadError) -> str:
    """One load error as a line: its id when it has one, then the reason (which names the file and 1-based line)."""
    return f"{f'id {err.id}: ' if err.id else ''}{err.reason}"
