"""`evr1-cache build|probe|inspect|verify`: build and check a frame cache from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evr1_cache.paths import add_media_path_args
from evr1_cache.plan.cli import PLAN_EXAMPLES, add_plan_args, plan_command
from evr1_cache.spec_args import add_spec_args, specs_from_args

EXAMPLES = """examples:
  evr1-cache build data/train.jsonl --out cache/ --fps 2 --max-frames 64 --max-pixels 200704 --workers 2
  evr1-cache build data/train.parquet --out cache/ --rank $SLURM_ARRAY_TASK_ID --world-size 8
  evr1-cache probe "videos/clip 01.mp4"
  evr1-cache inspect cache/videos/<spec>/ab/<key>.safetensors
  evr1-cache verify cache/ --delete
  evr1-cache plan data/train.jsonl --model ckpt/ --max-prompt-length 16384 --micro-batch 1 --sp 4
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="evr1-cache",
        description="Decode each video once into an exact, safe frame cache (safetensors, uint8, VideoMeta).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser(
        "build",
        help="cache every video and image of a dataset file",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument("data", help="dataset file: .json, .jsonl or .parquet (EasyVideoR1 schema: videos/images lists)")
    b.add_argument("--out", required=True, help="cache directory")
    b.add_argument("--media-root", help="base for relative media paths (default: the data file's folder)")
    add_media_path_args(b)
    b.add_argument("--output-data", help="output dataset path (default: OUT/<data stem>.evr1.jsonl)")
    b.add_argument("--decoder", default="auto", help="auto | pyav | ffmpeg")
    b.add_argument("--workers", type=int, default=1, help="decoding processes on this machine")
    b.add_argument("--threads", type=int, help="decoder threads per worker (default: all cores / workers)")
    b.add_argument("--rank", type=int, default=0, help="this shard (e.g. $SLURM_ARRAY_TASK_ID)")
    b.add_argument("--world-size", type=int, default=1, help="number of shards; no coordination needed")
    b.add_argument("--no-progress", action="store_true")
    add_spec_args(b)
    add_plan_args(b, in_build=True)

    pl = sub.add_parser(
        "plan",
        help="exact prompt lengths per row (histogram, rows over a limit) and the activation memory they cost",
        epilog=PLAN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pl.add_argument("data", help="dataset file (.json, .jsonl, .parquet): raw rows or the dataset `build` wrote")
    pl.add_argument("--media-root", help="base for relative media paths (default: the data file's folder)")
    add_media_path_args(pl)
    add_spec_args(pl)
    add_plan_args(pl)

    pr = sub.add_parser("probe", help="measure a video (true frame count, fps, duration, size, rotation)")
    pr.add_argument("video")
    pr.add_argument("--exact", action="store_true", help="decode every frame to time it (slow, authoritative)")

    i = sub.add_parser("inspect", help="show the header and shape of one cache entry")
    i.add_argument("file")

    v = sub.add_parser("verify", help="check every entry of a cache directory")
    v.add_argument("dir")
    v.add_argument(
        "--delete", action="store_true", help="remove bad entries and leftover temp files (while no build is running)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        commands = {"build": _build, "plan": plan_command, "probe": _probe, "inspect": _inspect, "verify": _verify}
        return commands[args.command](args)
    except (FileNotFoundError, ValueError, KeyError, RuntimeError) as exc:
        print(f"evr1-cache {args.command}: error: {exc}", file=sys.stderr)
        return 2


#: Failures printed on screen (all of them are in the error report).
_SHOWN = 20


def _build(args: argparse.Namespace) -> int:
    from evr1_cache.build import build_cache_from_args

    if args.plan:
        from evr1_cache.plan.build import build_planned

        return build_planned(args)
    spec, image_spec = specs_from_args(args)
    report = build_cache_from_args(
        args, args.data, spec, image_spec, media_root=args.media_root, output_data=args.output_data
    )
    print(
        f"rows {report.rows + report.bad_rows} ({report.bad_rows} malformed) | videos {report.videos} | "
        f"images {report.images} | built {report.built} | skipped (done before) {report.skipped} | "
        f"failed {report.failed} | "
        f"{report.bytes_written / 2**20:.1f} MiB written in {report.seconds:.1f} s"
    )
    if report.videos:
        print(
            f"variable-rate videos {report.vfr_videos} of {report.built} built | timeline {report.timeline} "
            "(which frame each sampled instant holds on them: docs/spec.md)"
        )
    for line in report.errors[:_SHOWN]:
        print(f"FAILED {line}", file=sys.stderr)
    if len(report.errors) > _SHOWN:
        print(f"... and {len(report.errors) - _SHOWN} more (see the error report)", file=sys.stderr)
    for note in report.notes:
        print(f"note: {note}")
    if report.output_data:
        print(f"dataset: {report.output_data}")
    if report.error_file:
        print(f"error report: {report.error_file}")
    if not report.ok:
        print(
            f"evr1-cache build: {report.failed} media and {report.bad_rows} rows failed; every other row was cached "
            "(exit 1)",
            file=sys.stderr,
        )
    return 0 if report.ok else 1


def _probe(args: argparse.Namespace) -> int:
    from evr1_cache.errors import MediaError
    from evr1_cache.probing import probe

    try:
        info = probe(args.video, exact=args.exact)
    except MediaError as exc:
        print(f"evr1-cache probe: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(info.as_dict(), indent=1, ensure_ascii=False))
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from evr1_cache.errors import CorruptEntry
    from evr1_cache.store import read_entry

    try:
        frames, header = read_entry(Path(args.file), mmap=True)
    except CorruptEntry as exc:
        print(f"evr1-cache inspect: corrupt: {exc}", file=sys.stderr)
        return 1
    out: dict[str, Any] = {"file": args.file, "shape": list(frames.shape), "dtype": str(frames.dtype)}
    for k, v in header.items():
        try:
            out[k] = json.loads(v) if k in ("meta", "spec", "source") else v
        except ValueError:
            out[k] = v
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from evr1_cache.verify import verify_cache

    report = verify_cache(args.dir, delete=args.delete)
    print(
        f"{report.entries} entries ({report.videos} videos, {report.images} images, {report.bytes / 2**20:.1f} MiB); "
        f"{len(report.corrupt)} bad; {len(report.temp_files)} leftover temp files"
        + (f"; {report.deleted} removed" if args.delete else "")
    )
    for rel, reason in report.corrupt:
        print(f"BAD {rel}: {reason}")
    for rel in report.temp_files:
        state = "removed" if args.delete else "`verify --delete` or a re-run of build removes it"
        print(f"TEMP {rel} (left by an interrupted write; {state})")
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
