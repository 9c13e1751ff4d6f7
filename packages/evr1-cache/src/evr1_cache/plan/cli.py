"""`evr1-cache plan` and `evr1-cache build --plan`: the planner's command-line side (argparse in evr1_cache.cli)."""

from __future__ import annotations

import argparse
import sys

from evr1_cache.plan.memory import PRESETS

PLAN_EXAMPLES = """examples:
  evr1-cache plan data/train.jsonl --model ckpt/Qwen3-VL-8B --max-prompt-length 16384 --micro-batch 1 --sp 4
  evr1-cache plan cache/train.evr1.jsonl --family qwen2_5_vl --max-frames 64 --model-size qwen2_5_vl_7b
  evr1-cache build data/train.jsonl --out cache/ --plan --model ckpt/ --max-prompt-length 16384 --on-over-limit resample
"""


def add_plan_args(p: argparse.ArgumentParser, *, in_build: bool = False) -> None:
    g = p.add_argument_group("token and memory planner (docs/plan.md)")
    if in_build:
        g.add_argument("--plan", action="store_true", help="plan every row first and act on the rows over the limit")
        g.add_argument(
            "--on-over-limit",
            choices=("drop", "resample", "keep"),
            default="drop",
            help="rows over --max-prompt-length: drop them, resample (fewer frames, then smaller) or keep them",
        )
        g.add_argument(
            "--prompt-margin",
            type=int,
            default=0,
            help="tokens reserved for text the trainer adds to each prompt (evr1-train's lead-in and answer format): "
            "rows must fit --max-prompt-length minus this (default 0; docs/plan.md)",
        )
    g.add_argument("--model", help="local checkpoint folder: tokenizer + chat template, config.json and model family")
    g.add_argument("--tokenizer", help="local tokenizer/processor folder for exact text counts (default: --model)")
    g.add_argument("--prompt-key", default="problem", help="column holding the question (default: problem)")
    g.add_argument("--max-prompt-length", type=int, help="name (or act on) the rows whose prompt is longer")
    g.add_argument("--report", help="JSONL report path (default: OUT/plan-report.jsonl for build)")
    if not in_build:
        g.add_argument("--show", type=int, default=20, help="how many over-limit rows to name (default 20)")
        g.add_argument("--bins", type=int, default=10)
        m = p.add_argument_group("activation memory (per GPU; docs/plan.md has the formula)")
        m.add_argument("--model-config", help="config.json (or checkpoint folder) for the estimate (default: --model)")
        m.add_argument("--model-size", help="a named size instead: " + ", ".join(sorted(PRESETS)))
        m.add_argument("--micro-batch", type=int, default=1)
        m.add_argument("--sp", type=int, default=1, help="Ulysses sequence-parallel degree")
        m.add_argument("--response-length", type=int, default=1024, help="tokens generated per prompt")
        m.add_argument("--checkpointing", action="store_true", help="gradient (activation) checkpointing on")
        m.add_argument("--attention", choices=("flash", "sdpa", "eager"), default="flash")


def plan_command(args: argparse.Namespace) -> int:
    from evr1_cache.plan.build import run_plan
    from evr1_cache.plan.memory import ModelShape, activation_memory
    from evr1_cache.plan.report import histogram, over_limit, summary, write_report

    family, spec, _, counter, _, _, plans = run_plan(args, args.data)
    limit = args.max_prompt_length
    info = summary(plans, limit)
    kind = "exact (tokenizer + chat template)" if counter is not None else "text bounded by UTF-8 bytes + template"
    print(f"{info['planned']} of {info['rows']} rows planned for {family.name} (spec {spec.key()}), {kind}")
    print(
        f"prompt tokens: min {info['min']} | p50 {info['p50']} | p90 {info['p90']} | p99 {info['p99']} | max {info['max']}"
    )
    print(histogram(plans, args.bins, limit=limit))
    for p in plans:
        if not p.ok:
            print(f"ERROR row {p.row_id} (line {p.index + 1}): {p.error}", file=sys.stderr)
    bad = over_limit(plans, limit)
    if limit is not None:
        print(f"{len(bad)} row(s) over --max-prompt-length {limit}")
        for p in bad[: args.show]:
            print(f"OVER row {p.row_id} (line {p.index + 1}): {p.total} tokens ({p.text} text + {p.vision} vision)")
        if len(bad) > args.show:
            print(f"... and {len(bad) - args.show} more (see --report)")
    estimate = None
    source = args.model_config or args.model
    if args.model_size or source:
        shape = ModelShape.preset(args.model_size) if args.model_size else ModelShape.from_config(source)
        fits = [p for p in plans if p.ok and (limit is None or p.total <= limit)]
        prompt = limit if limit is not None else max((p.total for p in fits), default=0)
        vision = max((p.vision for p in fits), default=0)
        seq = prompt + args.response_length
        estimate = activation_memory(
            shape,
            seq,
            args.micro_batch,
            args.sp,
            checkpointing=args.checkpointing,
            attention=args.attention,
            vision_tokens=vision,
        )
        print(
            f"memory ({shape.name}, micro-batch {args.micro_batch} x {seq} tokens = prompt {prompt} + response "
            f"{args.response_length}, sp {args.sp}, {args.attention} attention): {estimate.describe()}"
        )
    if args.report:
        extra = {"memory": estimate.as_dict()} if estimate is not None else None
        print(f"report: {write_report(args.report, plans, (), limit, extra)}")
    errors = sum(1 for p in plans if not p.ok)
    return 1 if (bad and limit is not None) or errors else 0
