"""The spec flags of the evr1-cache commands: `--fps`, `--max-pixels`, `--family`, ... read into a SamplingSpec + ImageSpec.

Shared by `evr1-cache build`, `plan` and `build --plan` (`evr1_cache.cli`, `evr1_cache.plan`), so that the planner
and the builder read the same flags the same way and no planning module imports the command-line entry point.
"""

from __future__ import annotations

import argparse

from evr1_cache.spec import TIMELINES, ImageSpec, SamplingSpec

__all__ = ["add_spec_args", "specs_from_args"]


def add_spec_args(p: argparse.ArgumentParser) -> None:
    """The SamplingSpec / ImageSpec flags (`--fps`, `--max-pixels`, `--family`, ...) of a command."""
    g = p.add_argument_group("video sampling (SamplingSpec; unset = the spec's defaults)")
    g.add_argument("--fps", type=float, help="target frames per second (Qwen default 2.0)")
    g.add_argument("--nframes", type=int, help="fixed number of frames instead of --fps")
    g.add_argument("--min-frames", type=int)
    g.add_argument("--max-frames", type=int)
    g.add_argument("--min-pixels", type=int, help="per-frame lower pixel bound")
    g.add_argument("--max-pixels", type=int, help="per-frame upper pixel bound")
    g.add_argument("--total-pixels", type=int, help="pixel budget over all frames")
    g.add_argument("--size-factor", type=int, help="28 for Qwen2/2.5-VL, 32 for Qwen3-VL")
    g.add_argument(
        "--family", help="model family whose own frame rule and budget apply (evr1_cache.families: glm4v, internvl)"
    )
    g.add_argument(
        "--timeline",
        choices=TIMELINES,
        help="variable-rate videos: the i-th frame as fetch_video takes it (reference, default) or the frame shown at "
        "the labelled instant (presentation: for answers in real seconds, e.g. temporal grounding); docs/spec.md",
    )
    g2 = p.add_argument_group("images (ImageSpec, independent of the video budget)")
    g2.add_argument("--image-min-pixels", type=int)
    g2.add_argument("--image-max-pixels", type=int)


def specs_from_args(args: argparse.Namespace) -> tuple[SamplingSpec, ImageSpec]:
    """The video and image specs the flags of `add_spec_args` name (unset flags: the specs' defaults)."""
    names: tuple[str, ...] = ("fps", "nframes", "min_frames", "max_frames", "min_pixels", "max_pixels", "total_pixels")
    names = (*names, "size_factor", "family", "timeline")
    kw = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    if args.nframes is not None and args.fps is None:
        kw["fps"] = None
    spec = SamplingSpec(**kw)
    image = {"min_pixels": args.image_min_pixels, "max_pixels": args.image_max_pixels}
    ikw = {k: v for k, v in {**image, "size_factor": args.size_factor, "family": args.family}.items() if v is not None}
    return spec, ImageSpec(**ikw)
