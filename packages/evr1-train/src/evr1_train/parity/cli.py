"""`evr1-train parity`: does the model get the same input from the verl dataset, transformers and vLLM?

For N samples of a dataset written by `evr1-cache build`, each side prepares the prompt and media as it would in
training, rollout or evaluation; the sides are compared per sample (prompt token ids with the expanded vision tokens,
vision grids, temporal metadata, pixel values, and the log-probs of a fixed response under the HF forward and under
vLLM). Exit status 0: all equal; 1: a mismatch (the table says where); 2: bad arguments or a side that cannot run.

examples:
  # one environment with verl, vLLM and transformers (a GPU node of the training cluster):
  evr1-train parity --model Qwen/Qwen3-VL-8B-Instruct --data cache/train.evr1.jsonl --cache-dir cache -n 16
  # environments that cannot share transformers pins: dump each side where it runs, then compare the dumps
  evr1-train parity --model M --data D --cache-dir C --sides verl,hf --dump parity/    # in the verl env
  evr1-train parity --model M --data D --cache-dir C --sides vllm,hf --dump parity/    # in the vLLM env
  evr1-train parity --compare parity/verl.safetensors parity/vllm.safetensors
  # a tiny built-in model (random weights) instead of a checkpoint:
  evr1-train parity --model tiny:qwen2_5_vl --data D --cache-dir C
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evr1_train.parity.records import SIDES, SideRecord


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="evr1-train parity", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", help="checkpoint folder or Hugging Face id, or tiny:qwen2_5_vl / tiny:qwen3_vl")
    p.add_argument("--data", help="the dataset file `evr1-cache build` wrote (<name>.evr1.jsonl)")
    p.add_argument("--cache-dir", help="the `evr1-cache build --out` folder")
    p.add_argument("-n", "--samples", type=int, default=8, help="rows to compare (default 8)")
    p.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated subset of {','.join(SIDES)}")
    p.add_argument("--dump", help="folder to write each side's records to (<side>.safetensors)")
    p.add_argument("--compare", nargs="+", metavar="DUMP", help="compare dump files instead of running sides")
    p.add_argument("--no-logprobs", action="store_true", help="compare inputs only (no model forward)")
    p.add_argument("--vllm-dtype", default="float32", help="vLLM's dtype (Qwen3.5 on vLLM's CPU backend: bfloat16)")
    p.add_argument("--max-model-len", type=int, default=32768)
    return p


def resolve_model(model: str, work: Path) -> str:
    """A checkpoint path / id as given, or a tiny built-in model written under `work`."""
    if not model.startswith("tiny:"):
        return model
    from evr1_train.quickstart.model import ARCHS, TinyVLMSpec, save_tiny_vlm

    arch = model.split(":", 1)[1]
    if arch not in ARCHS:
        raise ValueError(f"--model {model}: tiny models are {', '.join(f'tiny:{a}' for a in ARCHS)}")
    return str(save_tiny_vlm(work / f"tiny_{arch}", TinyVLMSpec(arch=arch)))


def run_sides(
    model: str, data: Any, sides: Sequence[str], *, logprobs: bool, vllm_dtype: str, max_model_len: int
) -> dict[str, list[SideRecord]]:
    """Run the requested sides in this environment (a missing engine is an error naming the split-run recipe)."""
    from evr1_train.parity import sides as s

    out: dict[str, list[SideRecord]] = {}
    for side in sides:
        try:
            if side == "verl":
                out[side] = s.collect_verl(model, data)
            elif side == "hf":
                out[side] = s.collect_hf(model, data, logprobs=logprobs)
            else:
                out[side] = asyncio.run(_vllm(model, data, logprobs, vllm_dtype, max_model_len))
        except ImportError as exc:
            print(
                f"evr1-train parity: side {side!r} cannot run in this environment ({exc}); run it where its engine "
                f"is installed with --sides {side} --dump DIR, then compare the dumps with --compare",
                file=sys.stderr,
            )
            raise SystemExit(2) from exc
    return out


async def _vllm(model: str, data: Any, logprobs: bool, dtype: str, max_model_len: int) -> list[SideRecord]:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    from evr1_train.parity.sides import collect_vllm

    args = AsyncEngineArgs(
        model=model,
        dtype=dtype,
        max_model_len=max_model_len,
        enforce_eager=True,
        limit_mm_per_prompt={"image": 4, "video": 4},
        max_num_seqs=4,
        enable_prefix_caching=False,  # every prompt token's log-prob is computed, none served from the cache
        mm_processor_cache_gb=0,  # every request's processed tensors reach us (a cache hit would send none)
        # pixels normalised by the front-end, as transformers does (vLLM 0.32 defers it to the device for Qwen-VL,
        # which would leave its processed tensors un-normalised and not comparable)
        mm_device_do_normalize=False,
    )
    engine = AsyncLLM.from_engine_args(args)
    try:
        return await collect_vllm(engine, data, logprobs=logprobs, dtype=dtype)
    finally:
        engine.shutdown()


def report(sides: dict[str, list[SideRecord]]) -> int:
    """Print the per-sample table; 0 when every comparison matched, 1 otherwise."""
    from evr1_train.parity.compare import compare_sides, max_logprob_diff, table

    if len(sides) < 2:
        names = ", ".join(sides) or "none"
        print(f"[evr1] parity: only one side ({names}) here; nothing to compare yet (see --dump / --compare)")
        return 0
    results = compare_sides(sides)
    print(table(results))
    worst = max_logprob_diff(results)
    if worst is not None:
        print(f"largest log-prob difference: {worst:.3e} nats")
    return 1 if any(not r.ok for r in results) else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from evr1_train.parity.records import read_dump, write_dump

    if args.compare:
        loaded: dict[str, list[SideRecord]] = {}
        for path in args.compare:
            records = read_dump(path)
            side = records[0].side if records else Path(path).stem
            key = side if side not in loaded else f"{side}@{Path(path).parent.name}"
            loaded[key] = records
        return report(loaded)
    missing = [
        flag for flag, v in (("--model", args.model), ("--data", args.data), ("--cache-dir", args.cache_dir)) if not v
    ]
    if missing:
        build_parser().error(f"{', '.join(missing)} required (or --compare DUMP...)")
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = sorted(set(sides) - set(SIDES))
    if unknown:
        build_parser().error(f"--sides: unknown {unknown}; choose from {', '.join(SIDES)}")
    from evr1_train.parity.sides import load_parity_data

    with tempfile.TemporaryDirectory(prefix="evr1-parity-") as work:
        model = resolve_model(args.model, Path(work))
        data = load_parity_data(args.data, args.cache_dir, args.samples)
        got = run_sides(
            model,
            data,
            sides,
            logprobs=not args.no_logprobs,
            vllm_dtype=args.vllm_dtype,
            max_model_len=args.max_model_len,
        )
    if args.dump:
        for side, records in got.items():
            print(f"[evr1] parity: {side} -> {write_dump(Path(args.dump) / f'{side}.safetensors', records)}")
    return report(got)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
