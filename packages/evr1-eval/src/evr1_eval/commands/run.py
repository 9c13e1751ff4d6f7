"""`evr1-eval run`: evaluate a model on benchmarks with the asynchronous runner (resumable, shardable)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from evr1_cache import add_media_path_args
from evr1_eval.commands.score import add_reading_args, reading_of, report_load_errors

EXAMPLE = """examples:
  evr1-eval run --model Qwen/Qwen3-VL-8B-Instruct --benchmarks videomme,mvbench \\
      --annotations-dir data/eval --media-root data/videos --cache-dir cache/ --out runs/qwen3vl-8b
  # two machines, one half each (then: evr1-eval report runs/qwen3vl-8b)
  evr1-eval run ... --rank 0 --world-size 2
  evr1-eval run ... --rank 1 --world-size 2
  # re-running the same command resumes; other settings are refused (use another --out)
  # a model family's published settings, and a checkpoint trained in the evr1 answer format
  evr1-eval run --preset qwen3_vl_official --model Qwen/Qwen3-VL-8B-Instruct --benchmarks videomme ...
  evr1-eval run --protocol evr1 --evr1-settings train_settings.json --model ckpt/ --benchmarks mvbench ...
  # a checkpoint of evr1-train, asked and stopped exactly as it was trained (prompt, chat template, frames, EOS)
  evr1-train export-heldout runs/quickstart data/heldout/
  evr1-eval run --from-train runs/quickstart --backend hf --benchmarks evr1_data \
      --annotations-dir data/heldout --cache-dir runs/quickstart/cache --out runs/quickstart-eval
"""


def _json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {text!r} ({exc.msg})") from exc


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="evaluate a model on benchmarks (async, resumable)",
        description=(
            "Frames come from --cache-dir when present (evr1-cache, same SamplingSpec as training), else are decoded "
            "on the fly; up to --max-concurrency samples are in flight; each answer is scored at once and appended to "
            "OUT/<benchmark>/results.jsonl. Re-running resumes; changed settings are refused. Greedy by default."
        ),
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model",
        default=None,
        help="checkpoint folder or hub id (served model name for openai); with --from-train: the checkpoint's model",
    )
    p.add_argument(
        "--from-train",
        type=Path,
        default=None,
        metavar="RUN_OR_CHECKPOINT",
        help="an evr1-train run or checkpoint folder: its model, asked with its training prompt, chat template, frame "
        "settings, EOS / suppressed tokens and answer length (evr1_train_protocol.json); other settings given here "
        "are applied and named in a warning",
    )
    p.add_argument("--benchmarks", required=True, help="comma-separated benchmark names (see `evr1-eval list`)")
    p.add_argument("--annotations-dir", required=True, type=Path, help="folder holding <benchmark>.json(l)")
    p.add_argument(
        "--media-root", type=Path, default=None, help="folder the annotations' media paths are relative to and stay in"
    )
    add_media_path_args(p)
    p.add_argument("--out", required=True, type=Path, help="run folder (one sub-folder per benchmark)")
    p.add_argument("--backend", default="vllm", help="vllm (default), hf, openai")
    p.add_argument("--cache-dir", type=Path, default=None, help="evr1-cache folder (see `evr1-eval precompute`)")
    p.add_argument("--write-cache", action="store_true", help="store frames decoded on a cache miss in --cache-dir")
    p.add_argument("--max-concurrency", type=int, default=32, help="samples in flight at once (memory bound)")
    p.add_argument("--media-workers", type=int, default=2, help="threads loading / decoding frames")
    p.add_argument("--limit", type=int, default=None, help="only the first N samples of each benchmark")
    p.add_argument("--rank", type=int, default=0, help="this machine's share (0-based) of each benchmark")
    p.add_argument("--world-size", type=int, default=1, help="number of machines sharing the benchmarks")
    p.add_argument("--retry-errors", action="store_true", help="run error rows of an earlier attempt again")
    p.add_argument("--request-timeout", type=float, default=None, help="seconds before a request is an error row")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(
        "--tools",
        default=None,
        help="answer with tools over each sample's first video, e.g. get_frames,zoom (multi-turn; every turn is "
        "recorded in results.jsonl; frames come from --cache-dir, written through on first use)",
    )
    p.add_argument("--tool-max-turns", type=int, default=4, help="with --tools: model turns per sample (default 4)")
    p.add_argument(
        "--without-video",
        action="store_true",
        help="send no videos (text and images only): the baseline run for Video-MMMU's Δknowledge in `report`",
    )

    r = p.add_argument_group("protocol and preset (recorded in each benchmark's manifest.json)")
    r.add_argument(
        "--protocol",
        choices=("official", "evr1"),
        default=None,
        help="official: each benchmark's own prompt and answer format (default); evr1: the training answer format "
        "(<think>/<answer>) from --evr1-settings or --from-train (its default). Both protocols' scores are computed "
        "for every answer.",
    )
    r.add_argument("--preset", default=None, help="a model family's published settings, e.g. qwen3_vl_official")
    r.add_argument("--prompt-variant", default=None, help="official protocol: official (default) or qwen3_vl")
    r.add_argument("--evr1-settings", type=Path, default=None, help="JSON of Evr1Settings (prompt template, stop...)")
    r.add_argument(
        "--response-filter", choices=("none", "after_think"), default=None, help="read the answer after </think>"
    )
    add_reading_args(r)

    g = p.add_argument_group("generation (recorded; greedy by default; explicit flags win over a preset)")
    g.add_argument("--max-tokens", type=int, default=None, help="default 1024")
    g.add_argument("--temperature", type=float, default=None, help="default 0 (greedy)")
    g.add_argument("--top-p", type=float, default=None)
    g.add_argument("--top-k", type=int, default=None)
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--stop", action="append", default=None, metavar="TEXT", help="a stop string (repeatable)")
    g.add_argument("--system-prompt", default=None)
    g.add_argument(
        "--sampling",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a SamplingSpec field for every benchmark (fps, nframes, max_frames, max_pixels...)",
    )

    e = p.add_argument_group("engine")
    e.add_argument("--dtype", default="auto")
    e.add_argument("--max-model-len", type=int, default=None)
    e.add_argument("--max-num-seqs", type=int, default=None, help="vLLM: sequences batched together")
    e.add_argument("--max-num-batched-tokens", type=int, default=None, help="vLLM: tokens per step (chunk size)")
    e.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=None)
    e.add_argument("--tensor-parallel-size", type=int, default=1)
    e.add_argument("--data-parallel-size", type=int, default=1)
    e.add_argument("--gpu-memory-utilization", type=float, default=None)
    e.add_argument("--enforce-eager", action="store_true", help="vLLM: no CUDA graphs / compilation (CPU, debugging)")
    e.add_argument(
        "--limit-mm-per-prompt", type=_json_arg, default=None, help='JSON, e.g. \'{"video": 1, "image": 4}\''
    )
    e.add_argument("--mm-processor-kwargs", type=_json_arg, default=None, help="JSON passed to the HF processor")
    e.add_argument("--engine-kwargs", type=_json_arg, default=None, help="JSON of extra backend arguments")
    e.add_argument(
        "--base-url",
        default=None,
        help="openai backend: server URL, e.g. http://localhost:8000/v1 (for videos, start `vllm serve` with "
        "--trust-request-mm-kwargs)",
    )
    e.add_argument("--api-key-env", default="OPENAI_API_KEY", help="openai backend: env var holding the key")
    e.add_argument("--device", default="auto", help="hf backend: cpu, cuda, auto")
    e.add_argument(
        "--threads", type=int, default=0, help="hf backend on CPU: torch threads (default: 1 for a tiny model)"
    )

    j = p.add_argument_group("LLM judge (for judged benchmarks; without one those rows stay pending)")
    j.add_argument("--judge-base-url", default=None)
    j.add_argument("--judge-model", default=None)
    p.set_defaults(run=run)


def backend_config(args: argparse.Namespace, settings: Any = None) -> Any:
    """The engine flags (each named as its `BackendConfig` field), the model, the chat template of the evr1 settings
    and, with tools, room for the clips and crops they add."""
    from evr1_eval.backends import BackendConfig

    names = {f.name for f in dataclasses.fields(BackendConfig)}
    given = {k: v for k, v in vars(args).items() if k in names and v is not None}  # an unset flag: the default
    given.update(model=model_of(args, settings), chat_template=settings.chat_template() if settings else None)
    if args.limit_mm_per_prompt is None and hasattr(args, "tools") and (agent := _agent(args)) is not None:
        from evr1_eval.agent import media_limit  # each tool call may add a clip or a crop to the conversation

        given["limit_mm_per_prompt"] = media_limit(agent.budget)
    return BackendConfig(**given)


def model_of(args: argparse.Namespace, settings: Any = None) -> str:
    """`--model`, else the `--from-train` checkpoint's model folder."""
    if args.model:
        return str(args.model)
    trained = getattr(settings, "trained", None)
    if trained is not None:
        return str(trained.model_dir)
    raise ValueError("--model is required (a checkpoint folder or hub id), unless --from-train names the checkpoint")


def _settings(args: argparse.Namespace) -> Any:
    """The run's protocol, preset and the settings derived from them (see evr1_eval.jobs.RunSettings); resolved
    once per command (reading a `--from-train` record) and kept on `args`."""
    from evr1_eval.jobs import resolve_settings

    cached = getattr(args, "_resolved_settings", None)
    if cached is not None:
        return cached
    names = ("protocol", "preset", "prompt_variant", "evr1_settings", "response_filter", "system_prompt", "from_train")
    settings = resolve_settings(**{name: getattr(args, name, None) for name in names})  # the flags' own names
    args._resolved_settings = settings
    return settings


def load_jobs(args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    """Benchmarks + samples, and the validated frame-setting overrides (shared with `precompute`)."""
    from evr1_eval.benchmarks import get_benchmark
    from evr1_eval.jobs import load_job, parse_overrides, sampling_overrides

    names = [n.strip() for n in args.benchmarks.split(",") if n.strip()]
    if not names:
        raise ValueError("--benchmarks is empty; name at least one (see `evr1-eval list`)")
    benches = [get_benchmark(n) for n in names]
    settings = _settings(args)
    model = getattr(args, "model", None) or (str(settings.trained.model_dir) if settings.trained else None)
    overrides = sampling_overrides(benches[0].sampling, parse_overrides(args.sampling), model)
    jobs = []
    for bench in benches:
        job = load_job(
            bench, args.annotations_dir, args.media_root, settings.protocol,
            allow_outside_media=args.allow_outside_media, allow_remote_media=args.allow_remote_media,
        )  # fmt: skip
        job = dataclasses.replace(
            job, sampling_overrides=sampling_overrides(bench.sampling, settings.sampling_for(bench.name), model)
        )
        if job.load_errors:
            report_load_errors(bench.name, len(job.samples), [e.reason for e in job.load_errors])
        jobs.append(job)
    return jobs, overrides


async def _evaluate(args: argparse.Namespace, jobs: list[Any], overrides: dict[str, Any]) -> list[Any]:
    from contextlib import AsyncExitStack

    from evr1_cache import MediaLoader
    from evr1_eval.backends import GenerationParams, create_backend
    from evr1_eval.jobs import image_spec_for
    from evr1_eval.runner import RunConfig, run_async, sampling_for

    settings = _settings(args)
    explicit = {k: getattr(args, k) for k in ("max_tokens", "temperature", "top_p", "top_k", "seed", "stop")}
    params = GenerationParams(**settings.generation({k: v for k, v in explicit.items() if v is not None}))
    for line in settings.announcements():
        print(f"note: {line}", file=sys.stderr)
    shown = {job.benchmark.name: sampling_for(job.benchmark, {**job.sampling_overrides, **overrides}) for job in jobs}
    image_spec = image_spec_for(shown[jobs[0].benchmark.name], settings.image_sampling())
    if settings.trained is not None:
        from evr1_eval.train_protocol import differences

        warn_differences(
            settings.trained,
            differences(
                settings.trained,
                params=params,
                video_specs=shown,
                image_spec=image_spec,
                system_prompt=settings.system_prompt,
                model=args.model,
                response_filter=settings.response_filter,
                without_video=args.without_video,
            ),
        )
    config = RunConfig(
        out_dir=args.out,
        params=params,
        max_in_flight=args.max_concurrency,
        media_workers=args.media_workers,
        limit=args.limit,
        rank=args.rank,
        world_size=args.world_size,
        request_timeout_s=args.request_timeout,
        retry_errors=args.retry_errors,
        sampling_overrides=overrides,
        system_prompt=settings.system_prompt,
        without_video=args.without_video,
        preset=settings.preset.record() if settings.preset else None,
        response_filter=settings.response_filter,
        reading=reading_of(args),
        agent=_agent(args),
        progress=not args.no_progress,
        info={
            "command": sys.argv,
            # where the samples came from, for `report` to re-score the rows (evr1_eval.results.recorded_sources)
            "sources": {
                "annotations_dir": str(Path(args.annotations_dir).absolute()),
                "media_root": None if args.media_root is None else str(Path(args.media_root).absolute()),
                "cache_dir": None if args.cache_dir is None else str(Path(args.cache_dir).absolute()),
                "allow_outside_media": bool(args.allow_outside_media),
                "allow_remote_media": sorted(args.allow_remote_media),
            },
            "backend_config": repr(backend_config(args, settings)),
            **({"from_train": _trained_info(settings.trained)} if settings.trained is not None else {}),
        },
    )
    if args.cache_dir and not args.write_cache and not Path(args.cache_dir).is_dir():  # else: every video decoded
        raise FileNotFoundError(
            f"--cache-dir {args.cache_dir}: no such folder (run `evr1-eval precompute`, or add --write-cache)"
        )
    media = MediaLoader(args.cache_dir, image_spec=image_spec, write_cache=args.write_cache)
    backend = create_backend(args.backend, backend_config(args, settings))
    async with AsyncExitStack() as stack:
        judge = None
        judge_settings = None
        if args.judge_base_url or args.judge_model:
            if not (args.judge_base_url and args.judge_model):
                raise ValueError("an LLM judge needs both --judge-base-url and --judge-model")
            from evr1_eval.scoring import openai_judge

            judge = await stack.enter_async_context(openai_judge(args.judge_base_url, args.judge_model))
            judge_settings = {"base_url": args.judge_base_url, "model": args.judge_model, "temperature": 0.0}
        elif any(getattr(job.benchmark, "needs_judge", False) for job in jobs):
            print("note: some rows are LLM-judged; without --judge-* they stay pending (not scored)", file=sys.stderr)
        return await run_async(backend, jobs, config, media=media, judge=judge, judge_settings=judge_settings)


def _agent(args: argparse.Namespace) -> Any:
    """`--tools` -> the tool settings of the run; without it, a `--from-train` agent's own tools, turns, budgets and
    sampling (its record's `agent`); None for neither. The tools' frames share --cache-dir."""
    from evr1_cache.tools import ToolBudget, ToolConfig
    from evr1_eval.agent import AgentEval, parse_tools

    settings = _settings(args)
    recorded = settings.trained.record.agent if settings.trained is not None else None
    if not args.tools and not recorded:
        return None
    from evr1_cache import MediaLoader
    from evr1_eval.backends.base import model_family

    loader = MediaLoader(args.cache_dir, write_cache=args.cache_dir is not None, media_root=args.media_root)
    if not args.tools:  # the trained agent's tools, exactly as it was trained with them
        rec = dict(recorded or {})
        return AgentEval(
            tools=tuple(rec["tools"]), loader=loader, max_turns=int(rec["max_turns"]),
            budget=ToolBudget.from_mapping(rec.get("budget")), config=ToolConfig(**dict(rec.get("tool_config") or {})),
            max_turn_tokens=rec.get("max_turn_tokens"),
        )  # fmt: skip
    family = model_family(model_of(args, settings))  # the tools' frames follow the model's size rule (Qwen3-VL: 32 px)
    config = ToolConfig(family=family.name if family is not None else None)
    return AgentEval(tools=parse_tools(args.tools), loader=loader, max_turns=args.tool_max_turns, config=config)


def _trained_info(trained: Any) -> dict[str, Any]:
    return {"checkpoint": str(trained.folder), "model": str(trained.model_dir), "step": trained.step}


def warn_differences(trained: Any, lines: list[str]) -> None:
    """One warning naming every evaluation setting that differs from the checkpoint's training settings."""
    if not lines:
        print(f"note: evaluating {trained.describe()} with its training settings", file=sys.stderr)
        return
    print(
        f"warning: {len(lines)} evaluation setting(s) differ from how {trained.describe()} was trained, so the scores "
        "are not the trainer's held-out numbers:",
        file=sys.stderr,
    )
    for line in lines:
        print(f"  {line}", file=sys.stderr)


def _verified(res: Any) -> bool:
    """No problem in the rows a resume kept, and the finished results verify (when checked: single machine)."""
    return not res.resume_problems and (res.verification is None or res.verification.ok)


def _report_verification(res: Any) -> None:
    """ "verified N/N", or every problem found in the stored rows (before the resume, and after the run)."""
    for problem in res.resume_problems:
        print(f"warning: {res.benchmark} (stored before this run): {problem}", file=sys.stderr)
    if res.verification is not None:
        for problem in res.verification.problems:
            print(f"warning: {res.benchmark}: {problem}", file=sys.stderr)
        print(res.verification.line())


def run(args: argparse.Namespace) -> int:
    from evr1_eval.backends import BackendError, check_backend
    from evr1_eval.results import SettingsMismatch

    settings = _settings(args)  # a bad --from-train is a usage error (exit 2, one line)
    try:
        check_backend(args.backend, backend_config(args, settings))  # a missing engine or model costs nothing else
    except BackendError as exc:
        print(f"evr1-eval run: {exc}", file=sys.stderr)
        return 1
    jobs, overrides = load_jobs(args)
    empty = [job.benchmark.name for job in jobs if not job.samples]
    if empty:
        print(f"evr1-eval run: no row of {', '.join(empty)} could be loaded (reasons above); nothing to evaluate",
              file=sys.stderr)  # fmt: skip
        return 1
    try:
        results = asyncio.run(_evaluate(args, jobs, overrides))
    except SettingsMismatch as exc:
        print(f"evr1-eval run: {exc}", file=sys.stderr)
        return 2
    except BackendError as exc:
        kept = any(Path(args.out).glob("*/results*.jsonl"))
        tail = "\nFinished rows are kept; re-run to resume." if kept else ""
        print(f"evr1-eval run: backend failed: {exc}{tail}", file=sys.stderr)
        return 1
    for res in results:
        metric = ""
        if res.summary is not None:
            value = res.summary.metrics.get(res.summary.primary)
            metric = f"  {res.summary.primary}={value:.2f}" if isinstance(value, (int, float)) else ""
            evr1 = res.summary.evr1_metrics.get("accuracy")
            metric += f"  evr1 accuracy={evr1:.2f}" if isinstance(evr1, (int, float)) else ""
            metric += " (official scores read <answer> tags: --answer-tags read)" if args.answer_tags == "read" else ""
            if args.reasoning_tags != "official":
                metric += f" (reasoning tags: --reasoning-tags {args.reasoning_tags})"
        print(
            f"{res.benchmark}: {res.selected} selected, {res.skipped} already done, {res.ran} run, "
            f"{res.errors} errors{metric}  -> {res.out_dir}"
        )
        _report_verification(res)
    failed = sum(len(job.load_errors) for job in jobs)
    if any(not _verified(res) for res in results):
        print("evr1-eval run: stored results NOT verified (problems above); exit 1", file=sys.stderr)
        return 1
    if failed:
        files = sorted(str(f) for f in Path(args.out).glob("*/load_errors*.json"))
        where = f" (see above and {', '.join(files)})" if files else " (see above)"
        print(f"evr1-eval run: {failed} annotation row(s) could not be loaded and were not evaluated{where}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0
