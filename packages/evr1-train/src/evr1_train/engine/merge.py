"""`evr1-train merge CHECKPOINT [--out DIR] [--base MODEL]`: a LoRA checkpoint -> a full Hugging Face model folder.

CHECKPOINT is a run folder (its newest checkpoint), a `checkpoints/step_N` folder or its `actor/` adapter folder.
The adapter is merged into its base model's weights (peft's `merge_and_unload`), and the result is written with the
processor and the checkpoint's `evr1_train_protocol.json` — a folder transformers, vLLM and evr1-eval load as is.
Default output: `<step folder>/merged`. Exit codes: 0 written, 2 bad arguments or not a LoRA checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path


def merge_checkpoint(checkpoint: str | Path, out: str | Path | None = None, base: str | None = None) -> Path:
    """Write the merged model of `checkpoint` to `out` (atomically); returns the folder."""
    import torch
    from transformers import AutoProcessor

    from evr1_cache import TRAIN_SETTINGS_FILE, TrainSettings, resolve_model_path
    from evr1_train.atomic import atomic_folder
    from evr1_train.engine.lora import is_adapter_folder, load_merged

    actor = Path(resolve_model_path(str(checkpoint)))
    if not is_adapter_folder(actor):
        raise ValueError(
            f"{actor} is not a LoRA adapter folder (no adapter_config.json, or a full model's config.json): "
            "only checkpoints of runs with actor_rollout_ref.model.lora_rank > 0 need merging"
        )
    target = Path(out) if out is not None else actor.parent / "merged"
    model = load_merged(actor, torch.float32, base)
    processor = AutoProcessor.from_pretrained(str(actor))
    with atomic_folder(target) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        processor.save_pretrained(tmp)
        if (actor.parent / TRAIN_SETTINGS_FILE).exists():
            settings = TrainSettings.read(actor.parent)
            merged = {**(settings.adapter or {}), "merged_into": "this folder's weights"}
            (tmp / TRAIN_SETTINGS_FILE).write_text(json.dumps(replace(settings, adapter=merged).to_json(), indent=1))
    return target


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="evr1-train merge",
        description="Merge a LoRA checkpoint of the local engine into a full Hugging Face model folder.",
        epilog="example: evr1-train merge runs/quickstart_lora --out models/quickstart-lora-merged",
    )
    ap.add_argument("checkpoint", help="run folder, checkpoints/step_N folder, or its actor/ adapter folder")
    ap.add_argument("--out", help="output folder (default: <step folder>/merged)")
    ap.add_argument("--base", help="base model to merge into (default: the adapter's base_model_name_or_path)")
    args = ap.parse_args(list(argv))
    try:
        folder = merge_checkpoint(args.checkpoint, args.out, args.base)
    except (ValueError, FileNotFoundError) as exc:
        print(f"evr1-train merge: error: {exc}", file=sys.stderr)
        return 2
    print(f"merged model written to {folder}")
    return 0
